#!/usr/bin/env bash
# User-sharded servers behind HAProxy on one machine (HAProxy >= 2.6 must be installed):
#   scripts/cluster.sh start --shards 3 --port 8080 --dir ./cluster [--config settings.json]
#   scripts/cluster.sh stats --dir ./cluster
#   scripts/cluster.sh start --shards 4 --dir ./cluster && scripts/cluster.sh move --shards 4 --dir ./cluster
#   scripts/cluster.sh stop --dir ./cluster
# See README.md, "Running on several machines", and docs/ARCHITECTURE.md, "Scaling out".
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
exec "$PYTHON" -m aml_retriever.cluster "$@"
