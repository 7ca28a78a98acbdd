"""`mcp-register`: the project's .mcp.json names a command that starts the memory server from a
shell that knows nothing of this package, as a client starts it; other servers are kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
HANDSHAKE = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]


def register(project: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """The command as the README gives it, run in the project with the checkout on the path."""
    return subprocess.run([sys.executable, "-m", "aml_retriever", "mcp-register", *extra],
                          cwd=project, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)


def client_env(home: Path, extra: dict[str, str]) -> dict[str, str]:
    """What a client gives the server it starts: its own PATH and HOME, and the entry's env."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), **extra}


def started(command: list[str], project: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    lines = "".join(json.dumps(message) + "\n" for message in HANDSHAKE)
    return subprocess.run(command, cwd=project, env=env, input=lines, capture_output=True,
                          text=True, timeout=60)


def answers(done: subprocess.CompletedProcess[str]) -> dict[int, Any]:
    return {message["id"]: message for message in map(json.loads, done.stdout.splitlines())}


def test_the_registered_command_starts_the_server_from_a_shell_without_the_package(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"other": {"command": "other"}}}))
    done = register(project)
    assert done.returncode == 0, done.stderr
    config = json.loads((project / ".mcp.json").read_text())
    assert config["mcpServers"]["other"] == {"command": "other"}  # another server, kept
    entry = config["mcpServers"]["memory"]
    assert json.loads(done.stdout)["server"] == entry
    assert Path(entry["command"]).is_absolute() and entry["args"] == ["-m", "aml_retriever", "mcp"]

    server = started([entry["command"], *entry["args"]], project,
                     client_env(tmp_path / "home", entry["env"]))
    assert server.returncode == 0, server.stderr
    found = answers(server)
    assert found[1]["result"]["serverInfo"]["name"] == "aml_retriever"
    assert "remember" in {tool["name"] for tool in found[2]["result"]["tools"]}

    # The control: the line the README gave, started the same way.
    plain = subprocess.run([sys.executable, "-c", "import aml_retriever"], capture_output=True,
                           env=client_env(tmp_path / "home", {}), cwd=project)
    if plain.returncode == 0:
        pytest.skip("aml_retriever is installed in this interpreter: the old line works here too")
    before = started(["python3", "-m", "aml_retriever", "mcp"], project,
                     client_env(tmp_path / "home", {}))
    assert before.returncode != 0 and "No module named aml_retriever" in before.stderr


def test_a_file_that_is_not_a_configuration_is_refused_and_left_as_it_was(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for text in ("{not json", "[1, 2]", '{"mcpServers": 3}'):
        (project / ".mcp.json").write_text(text)
        done = register(project)
        assert done.returncode == 1 and ".mcp.json" in done.stderr and "Traceback" not in done.stderr
        assert (project / ".mcp.json").read_text() == text
    done = register(project, "--project-root", str(tmp_path / "missing"))
    assert done.returncode == 1 and "no such directory" in done.stderr
