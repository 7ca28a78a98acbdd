"""User-sharded servers behind HAProxy: which shard holds a user (`sharding`), the router's
configuration and runtime API (`haproxy`), moving users between shards (`mover`), and the
commands of `scripts/cluster.sh` (`control`, run as `python3 -m aml_retriever.cluster`).

May import: every layer below it (`http`, `memory`, `storage`, `common`) and `settings`.
"""
