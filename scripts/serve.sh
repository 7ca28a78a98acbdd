#!/usr/bin/env bash
# Serve the API on 127.0.0.1:8080 with ./aml.db. Flags pass through, e.g. --port 9000 --api-key KEY;
# so do the AML_* environment variables (see README.md). Relative paths (--db, --config,
# AML_DB_PATH) are the caller's: the script runs in the directory it was started from and only
# puts this checkout first on the import path.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
PYTHON="${PYTHON:-python3}"
exec "$PYTHON" -m aml_retriever serve "$@"
