#!/usr/bin/env bash
# Run the whole test suite on a fresh machine: checks Python >= 3.11 and SQLite FTS5, installs the
# test-only tools (pytest, hypothesis, jsonschema, and the official MCP SDK `mcp`) only when missing, then
# runs pytest. Arguments pass to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"

"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || {
  echo "aml_retriever needs Python >= 3.11 (found $("$PYTHON" --version 2>&1))" >&2; exit 1; }
"$PYTHON" -m aml_retriever check || { echo "this Python's SQLite lacks what aml_retriever needs" >&2; exit 1; }

missing=()
"$PYTHON" -c 'import pytest' 2>/dev/null || missing+=(pytest)
"$PYTHON" -c 'import hypothesis' 2>/dev/null || missing+=(hypothesis)
"$PYTHON" -c 'import jsonschema' 2>/dev/null || missing+=(jsonschema)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing test tools: ${missing[*]}" >&2
  "$PYTHON" -m pip install --quiet "${missing[@]}" 2>/dev/null \
    || "$PYTHON" -m pip install --quiet --user "${missing[@]}" 2>/dev/null \
    || "$PYTHON" -m pip install --quiet --break-system-packages "${missing[@]}"
fi

# The official MCP SDK drives the MCP server in tests/test_mcp_sdk.py. It is optional: when it cannot be
# installed (offline, an unsupported platform) those tests skip and say why; every other test still runs.
if ! "$PYTHON" -c 'import mcp.client.stdio' 2>/dev/null; then
  echo "installing the test-only MCP SDK: mcp" >&2
  "$PYTHON" -m pip install --quiet mcp 2>/dev/null \
    || "$PYTHON" -m pip install --quiet --user mcp 2>/dev/null \
    || "$PYTHON" -m pip install --quiet --break-system-packages mcp 2>/dev/null \
    || echo "could not install mcp: the MCP SDK tests will be skipped" >&2
fi

# HAProxy (2.6 or later) routes the cluster tests (tests/test_cluster.py). Installed with apt-get when
# missing and this runs as root; otherwise those tests skip and say why.
if ! command -v haproxy >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing the test-only router: haproxy" >&2
    { apt-get install -y -q haproxy >/dev/null 2>&1 \
      || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q haproxy >/dev/null 2>&1; }; } \
      || echo "could not install haproxy: the cluster tests will be skipped" >&2
  else
    echo "haproxy is not installed (and this is not root with apt-get): the cluster tests will be skipped" >&2
  fi
fi

exec "$PYTHON" -m pytest "$@"
