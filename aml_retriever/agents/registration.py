"""A project's registration of the memory server with its MCP clients: the `.mcp.json` Claude Code
reads for a project's servers (what `claude mcp add --scope project` writes), with a command that
starts the server from any shell.

`claude mcp add --scope project memory -- python3 -m aml_retriever mcp`, pasted as the README
gave it, registered whatever `python3` the client finds when it starts the server: one without
the package (a virtual environment not active there, a checkout not on its path) exits "No module
named aml_retriever", and the agent has no memory tools. The entry written here names the very
interpreter that runs this command, by its absolute path, and the checkout the package is read
from when it is not installed (`PYTHONPATH`); other servers in the file are kept.
"""

from __future__ import annotations

import json
import os
import sys
import sysconfig
from pathlib import Path
from typing import Any

from aml_retriever.common.errors import InvalidField

CONFIG_FILE = ".mcp.json"


def server_entry() -> dict[str, Any]:
    """How a client starts this memory server: this interpreter, and the folder the package is
    read from unless it is installed in it."""
    entry: dict[str, Any] = {"type": "stdio", "command": sys.executable,
                             "args": ["-m", "aml_retriever", "mcp"], "env": {}}
    source = Path(__file__).resolve().parents[2]  # the folder holding aml_retriever/
    installed = {Path(sysconfig.get_paths()[kind]).resolve() for kind in ("purelib", "platlib")}
    if source not in installed:
        entry["env"]["PYTHONPATH"] = str(source)
    return entry


def register(project: Path, name: str) -> dict[str, Any]:
    """Add (or replace) the server `name` in the project's .mcp.json, written whole or not at
    all; what was written and where."""
    path = project / CONFIG_FILE
    config = _read(path)
    servers = config.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise InvalidField(f"{path}: mcpServers is not an object; fix or remove the file",
                           "project_root")
    servers[name] = server_entry()
    partial = path.with_name(f".{CONFIG_FILE}.partial")
    partial.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(partial, path)
    return {"written": str(path), "name": name, "server": servers[name]}


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise InvalidField(f"{path} is not valid JSON; fix or remove it", "project_root") from None
    if not isinstance(config, dict):
        raise InvalidField(f"{path} does not hold a JSON object; fix or remove it", "project_root")
    return config
