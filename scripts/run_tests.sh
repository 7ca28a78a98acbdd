#!/usr/bin/env bash
# Run the whole test suite on a fresh machine: checks Python >= 3.11 and SQLite FTS5, then installs
# what the tests need, each only when missing: with pip (the environment, else the user's site,
# else --break-system-packages on a Debian system Python) pytest, hypothesis, jsonschema, the MCP
# SDK `mcp`, prometheus_client, selenium, tiktoken and bpe-openai; as root with apt-get, chromium
# and chromium-driver, haproxy, and podman, runc and mmdebstrap. What cannot be had is said, and
# its tests skip saying why. Then runs pytest; arguments pass to it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"

"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || {
  echo "aml_retriever needs Python >= 3.11 (found $("$PYTHON" --version 2>&1))" >&2; exit 1; }
"$PYTHON" -m aml_retriever check || { echo "this Python's SQLite lacks what aml_retriever needs" >&2; exit 1; }

# pip install, wherever this Python lets it: the environment, the user's site, or a Debian system
# Python that asks for --break-system-packages.
pip_install() {
  "$PYTHON" -m pip install --quiet "$@" 2>/dev/null \
    || "$PYTHON" -m pip install --quiet --user "$@" 2>/dev/null \
    || "$PYTHON" -m pip install --quiet --break-system-packages "$@"
}

missing=()
"$PYTHON" -c 'import pytest' 2>/dev/null || missing+=(pytest)
"$PYTHON" -c 'import hypothesis' 2>/dev/null || missing+=(hypothesis)
"$PYTHON" -c 'import jsonschema' 2>/dev/null || missing+=(jsonschema)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing test tools: ${missing[*]}" >&2
  pip_install "${missing[@]}"
fi

# The official MCP SDK drives the MCP server in tests/test_mcp_sdk.py. It is optional: when it cannot be
# installed (offline, an unsupported platform) those tests skip and say why; every other test still runs.
if ! "$PYTHON" -c 'import mcp.client.stdio' 2>/dev/null; then
  echo "installing the test-only MCP SDK: mcp" >&2
  pip_install mcp 2>/dev/null || echo "could not install mcp: the MCP SDK tests will be skipped" >&2
fi

# prometheus_client's parser reads GET /metrics in tests/test_metrics.py beside the parser written for
# the tests. Optional too: without it that one comparison skips and says why.
if ! "$PYTHON" -c 'import prometheus_client.parser' 2>/dev/null; then
  echo "installing the test-only Prometheus client: prometheus_client" >&2
  pip_install prometheus_client 2>/dev/null || echo "could not install prometheus_client: its parser comparison will be skipped" >&2
fi

# The answer window's token estimate is checked against gpt-4o's own BPE (tests/test_tokens.py):
# tiktoken, with the o200k_base vocabulary that bpe-openai ships (nothing is downloaded at test
# time). Optional too: without them those tests skip and say why.
if ! "$PYTHON" -c 'import tiktoken, bpe_openai' 2>/dev/null; then
  echo "installing the test-only tokenizer: tiktoken bpe-openai" >&2
  pip_install tiktoken bpe-openai 2>/dev/null || echo "could not install tiktoken: the token estimate's oracle tests will be skipped" >&2
fi

# The inspector page is tested in a real headless browser (tests/test_inspector_browser.py): Debian's chromium
# and chromium-driver, driven through selenium. Optional too: without them those tests skip and say why.
if ! command -v chromedriver >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing the test-only browser: chromium chromium-driver" >&2
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } \
    >/dev/null 2>&1 || echo "could not install chromium: the browser tests will be skipped" >&2
fi
if ! "$PYTHON" -c 'import selenium' 2>/dev/null; then
  echo "installing the test-only browser driver: selenium" >&2
  pip_install selenium 2>/dev/null || echo "could not install selenium: the browser tests will be skipped" >&2
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

# ---- container runtime (tests/test_docker.py, scripts/check_docker.sh) ----------------------------
# The image is built and run for real with podman and runc, on a Debian base that mmdebstrap builds
# once into podman's store. Installed with apt-get when missing and this runs as root (--no-remove:
# never at the cost of another package, e.g. Docker's containerd.io, which ships its own runc);
# otherwise that test skips and says why.
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  runtime=()
  for tool in podman runc mmdebstrap; do command -v "$tool" >/dev/null 2>&1 || runtime+=("$tool"); done
  if [ ${#runtime[@]} -gt 0 ]; then
    echo "installing the test-only container runtime: ${runtime[*]}" >&2
    install_runtime() {
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-remove "${runtime[@]}" >/dev/null 2>&1; }
    install_runtime || { apt-get update -q >/dev/null 2>&1 && install_runtime; } \
      || echo "could not install ${runtime[*]}: the image test will be skipped" >&2
  fi
fi
# ---- end of the container runtime block ------------------------------------------------------------

# Measured on an idle 2-core machine (docs/BENCHMARKS.md has none: a suite is no benchmark):
# 1,324 tests in about 6 minutes; said before it starts, so a quiet terminal is not a hung one.
echo "running the test suite: about 6 minutes on 2 idle cores" >&2
exec "$PYTHON" -m pytest "$@"
