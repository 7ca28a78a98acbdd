#!/usr/bin/env bash
# The image's entrypoint: a command of the CLI (serve, stats, reindex, ...) runs through
# `python3 -m aml_retriever`; anything else (./scripts/run_tests.sh, bash) runs as given.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
case "${1:-serve}" in
  serve|print-config|delete-user|purge|stats|reindex|check|--help|-h|--version)
    exec "$PYTHON" -m aml_retriever "${@:-serve}" ;;
  *)
    exec "$@" ;;
esac
