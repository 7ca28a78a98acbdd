#!/usr/bin/env bash
# Lint the project with ruff (a development tool only, installed here when missing; the package
# itself never needs it).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
"$PYTHON" -m ruff --version >/dev/null 2>&1 || "$PYTHON" -m pip install --quiet ruff
exec "$PYTHON" -m ruff check aml_retriever tests bench scripts "$@"
