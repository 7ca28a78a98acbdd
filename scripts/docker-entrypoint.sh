#!/usr/bin/env bash
# The image's entrypoint. A command of the CLI (any name in aml_retriever.cli.COMMANDS: serve, mcp,
# stats, reindex, ..., so a new command needs no change here) or an option of it (--help,
# --version) runs through `python3 -m aml_retriever`; anything else (./scripts/run_tests.sh, bash)
# runs as given; no argument serves. Relative paths are the caller's (the image's WORKDIR, /app).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
PYTHON="${PYTHON:-python3}"
[ $# -gt 0 ] || set -- serve
if [[ "$1" == -* ]] || "$PYTHON" -c 'import sys; from aml_retriever.cli import COMMANDS
sys.exit(sys.argv[1] not in COMMANDS)' "$1"; then
  exec "$PYTHON" -m aml_retriever "$@"
fi
exec "$@"
