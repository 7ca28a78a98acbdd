#!/usr/bin/env python3
"""The image's health check: GET /health of the server this container runs, on the address and
port that server was started with, however they were given (`--port`, `AML_PORT`, `--config`).

Docker runs a health check as a process of its own: it sees the container's environment but not
the server's command line. So this reads the command line, environment and working directory of
the running `serve` from /proc (PID 1 when the entrypoint exec's the server, as it does; the
lowest such process under an init such as `docker run --init`) and resolves its settings with the
command line's own parser and settings table, as `serve` did.

Exit status: 0 healthy, or no HTTP server in this container (`mcp` or a one-off command);
1 unhealthy (no answer, or not `{"status": "ok"}`), the reason on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.request
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aml_retriever.cli import build_parser
from aml_retriever.common.errors import AmlError
from aml_retriever.settings import SETTINGS, load

PROC = Path("/proc")
MODULE = "aml_retriever"
# Docker's own --timeout (10 s in the Dockerfile) bounds the whole check: the request gets half, the
# rest is for starting Python (about 0.1 s idle; 3 s were exceeded on a 2-core host at load 7).
TIMEOUT_S = 5.0
# A server bound to every address answers on loopback.
ANY_ADDRESS = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}


def cli_arguments(cmdline: bytes) -> list[str] | None:
    """The arguments after `-m aml_retriever` of a `serve` command line, else None."""
    argv = [part.decode(errors="replace") for part in cmdline.split(b"\0") if part]
    for i in range(len(argv) - 1):
        if argv[i] == "-m" and argv[i + 1] == MODULE:
            rest = argv[i + 2:]
            return rest if rest[:1] == ["serve"] else None
    return None


def find_server(proc: Path = PROC) -> int | None:
    """The lowest process id running `python3 -m aml_retriever serve` (with --processes N, the
    parent that owns the port), or None."""
    for pid in sorted(int(p.name) for p in proc.iterdir() if p.name.isdigit()):
        try:
            cmdline = (proc / str(pid) / "cmdline").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if cli_arguments(cmdline) is not None:
            return pid
    return None


def address(pid: int, proc: Path = PROC) -> tuple[str, int]:
    """(host, port) of the server process `pid`, resolved from its flags, environment and config
    file (relative to its working directory) exactly as `serve` resolves them."""
    base = proc / str(pid)
    arguments = cli_arguments((base / "cmdline").read_bytes())
    if arguments is None:
        raise ValueError(f"process {pid} is not `python3 -m {MODULE} serve`")
    environ = dict(entry.split("=", 1) for entry in
                   (base / "environ").read_bytes().decode(errors="replace").split("\0") if "=" in entry)
    args = build_parser().parse_args(arguments)
    config_file = args.config
    if config_file and not os.path.isabs(config_file):
        config_file = os.path.join(os.readlink(base / "cwd"), config_file)
    config = load({s.name: getattr(args, s.name, None) for s in SETTINGS}, config_file, environ)
    return ANY_ADDRESS.get(config.host, config.host), config.port


def healthy(host: str, port: int) -> str | None:
    """None when GET /health answers {"status": "ok"}; otherwise why not."""
    shown = f"[{host}]" if ":" in host else host
    try:
        with urllib.request.urlopen(f"http://{shown}:{port}/health", timeout=TIMEOUT_S) as response:
            body = json.loads(response.read())
    except (OSError, ValueError) as exc:
        return f"no health answer from {shown}:{port}: {exc}"
    if not isinstance(body, dict) or body.get("status") != "ok":
        return f"{shown}:{port}/health did not answer status ok"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="docker-healthcheck.py", description=__doc__.split("\n")[0])
    parser.add_argument("--pid", type=int, help="the server's process id (default: found in /proc)")
    args = parser.parse_args(argv)
    pid = args.pid if args.pid is not None else find_server()
    if pid is None:
        print("no HTTP server in this container: nothing to check", file=sys.stderr)
        return 0
    try:
        host, port = address(pid)
    except (OSError, ValueError, AmlError, SystemExit) as exc:
        print(f"unhealthy: the server's settings cannot be read: {exc}", file=sys.stderr)
        return 1
    problem = healthy(host, port)
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
