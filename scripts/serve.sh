#!/usr/bin/env bash
# Serve the API on 127.0.0.1:8080 with ./aml.db. Flags pass through, e.g. --port 9000 --api-key KEY;
# so do the AML_* environment variables (see README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
exec "$PYTHON" -m aml_retriever serve "$@"
