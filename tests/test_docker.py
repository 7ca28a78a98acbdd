"""The image, built and run for real: scripts/check_docker.sh builds the Dockerfile with podman
(runtime runc) on a Debian bookworm base with python3 (built once with mmdebstrap and kept in
podman's store) and checks serve, the health check, the volume and `mcp` through the published
port and the entrypoint. Skipped, saying why, where no container can be built or run here.

The cheaper tests below need no runtime: what the Dockerfile promises that the real run relies on.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from aml_retriever.agents.scopes import default_global_root

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / "scripts" / "check_docker.sh"
SKIPPED = 77  # check_docker.sh: this machine cannot build or run a container
# A cold run builds the base (about a minute) before the checks (about half a minute).
TIMEOUT_S = 900


def dockerfile() -> str:
    return re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())


def test_the_base_is_a_build_argument_whose_default_is_python_slim():
    lines = [line.strip() for line in dockerfile().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    assert lines[:2] == ["ARG BASE=python:3.11-slim", "FROM ${BASE}"]


def test_the_account_memory_of_mcp_is_on_the_volume():
    """The image's environment puts the default global root under /data (the volume), not in the
    home directory of a container that `docker run --rm -i ... mcp` throws away."""
    env = dict(re.findall(r"(\w+)=(\S+)", dockerfile().split("\nENV ", 1)[1].split("\nUSER", 1)[0]))
    assert env["XDG_DATA_HOME"] == "/data" and env["AML_DB_PATH"].startswith("/data/")
    assert default_global_root(env, platform="linux", home=Path("/home/aml")) == Path("/data/aml_retriever")


def _runtime_missing() -> str | None:
    path = os.pathsep.join((os.environ.get("PATH", ""), "/usr/sbin", "/sbin"))
    for tool in ("podman", "runc"):
        if shutil.which(tool, path=path) is None:
            return (f"{tool} is not installed (apt-get install podman runc mmdebstrap; "
                    "scripts/run_tests.sh does it when run as root)")
    return None


@pytest.mark.slow
@pytest.mark.skipif(_runtime_missing() is not None, reason=_runtime_missing() or "")
def test_the_image_builds_and_runs():
    started = time.monotonic()
    done = subprocess.run([str(CHECK)], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S,
                          env={**os.environ, "LC_ALL": "C"})
    report = done.stdout + (f"\n(stderr)\n{done.stderr[-4000:]}" if done.stderr.strip() else "")
    if done.returncode == SKIPPED:
        reason = next((line for line in done.stdout.splitlines() if line.startswith("SKIP")), report)
        pytest.skip(f"scripts/check_docker.sh: {reason}")
    print(f"{report}\n(scripts/check_docker.sh took {time.monotonic() - started:.0f}s)")
    assert done.returncode == 0, report
    lines = done.stdout.splitlines()
    assert not [line for line in lines if line.startswith("FAIL")], report
    assert lines[-1] == "all checks passed", report
    checks = {line.split(":", 1)[0][5:] for line in lines if line.startswith("ok   ")}
    assert {"base", "build", "serve", "auth", "add", "search", "user", "healthcheck", "stop",
            "volume", "stats", "bind mount", "mcp"} <= checks, report
