"""What ships beside the package: the Docker entrypoint, the Dockerfile's promises."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENTRYPOINT = ROOT / "scripts" / "docker-entrypoint.sh"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ENTRYPOINT), *args], capture_output=True, text=True, timeout=60)


def test_entrypoint_runs_cli_commands_through_the_package():
    result = run("check")
    assert result.returncode == 0 and "FTS5" in result.stdout
    config = run("print-config", "--port", "9")
    assert json.loads(config.stdout)["port"] == {"value": 9, "from": "flag"}


def test_entrypoint_runs_anything_else_as_given():
    result = run("echo", "hello")
    assert result.returncode == 0 and result.stdout == "hello\n"


def test_entrypoint_passes_exit_codes_through():
    assert run("print-config", "--workers", "0").returncode == 1


def test_dockerfile_runs_as_non_root_with_a_volume_and_a_healthcheck():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "FROM python:3.11-slim" in dockerfile
    assert "\nUSER aml\n" in dockerfile and 'VOLUME ["/data"]' in dockerfile
    assert "HEALTHCHECK" in dockerfile and "/health" in dockerfile
    assert 'ENTRYPOINT ["./scripts/docker-entrypoint.sh"]' in dockerfile
