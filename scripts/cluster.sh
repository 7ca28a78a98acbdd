#!/usr/bin/env bash
# User-sharded servers behind HAProxy on one machine (HAProxy >= 2.6 must be installed):
#   scripts/cluster.sh start --shards 3 --port 8080 --dir ./cluster [--config config.example.json]
#   scripts/cluster.sh stats --dir ./cluster
#   scripts/cluster.sh start --shards 4 --dir ./cluster && scripts/cluster.sh move --shards 4 --dir ./cluster
#   scripts/cluster.sh stop --dir ./cluster
# Relative paths (--dir, --config) are the caller's: the script runs in the directory it was
# started from and only puts this checkout first on the import path (as scripts/serve.sh does).
# `move` prints a summary (--verbose: every bucket; --quiet: errors only).
# See README.md, "Running on several machines", and docs/ARCHITECTURE.md, "Scaling out".
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
PYTHON="${PYTHON:-python3}"
exec "$PYTHON" -m aml_retriever.cluster "$@"
