"""HAProxy in front of the shards: its configuration, rendered from deploy/haproxy.cfg, and its
runtime API (the stats socket), through which the bucket map changes while it runs.

The template lives beside the package in the checkout (`deploy/`), as the scripts do; what it
needs from a cluster (addresses, paths, the servers' limits and timeouts) is filled in here, so
the router's body limit and timeouts are derived from the same settings the shards run with.
"""

from __future__ import annotations

import re
import socket
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from aml_retriever import __version__
from aml_retriever.cluster.sharding import BUCKET_DIVISOR, BUCKETS
from aml_retriever.common.errors import ClusterError
from aml_retriever.settings import Config

DEPLOY_DIR = Path(__file__).resolve().parents[2] / "deploy"
TEMPLATE = DEPLOY_DIR / "haproxy.cfg"
LUA = DEPLOY_DIR / "aml_route.lua"
def shipped() -> None:
    """Refuse, before anything starts, a package installed without the checkout's deploy/
    (`pip install .` ships the package alone): the router could not be configured, and the
    shards started for it would be left running."""
    missing = [str(path) for path in (TEMPLATE, LUA) if not path.is_file()]
    if missing:
        raise ClusterError(f"the router's files are not here ({', '.join(missing)}): the cluster "
                           "runs from a checkout of the repository (./scripts/cluster.sh), not from "
                           "an installed package", "dir")


# HAProxy 2.6 is the first with everything the template uses (be2dec came in 2.5,
# wait-for-body in 2.4) and is what Debian 12 and Ubuntu 24.04 package.
MIN_VERSION = (2, 6)
# Buffer room a request may use beside its body (request line, headers, HAProxy's own
# bookkeeping): a request whose head and body do not fit is answered 408, never routed on part
# of its body. 64 KiB holds ordinary heads many times over.
HEAD_ROOM = 64 * 1024
# How long HAProxy waits for a shard's answer: far beyond any Search or Add (a 100k-message
# user's top-100 Search is ~16 ms alone, a few hundred under load), so a slow answer is still
# delivered, while a shard that hangs frees the client within a minute.
MIN_SERVER_TIMEOUT_S = 60
# Seconds a client is told to wait after a 503 for a shard that is down: a restarted shard is
# back in service after two good health checks a second apart.
RETRY_AFTER_S = 5
# Commands sent to the runtime API in one line (HAProxy runs `a; b; c` in order).
COMMANDS_PER_LINE = 64
SOCKET_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Shard:
    name: str
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class RouterPaths:
    """Where a rendered router keeps its files."""
    config: Path
    socket: Path
    map: Path


def render(shards: Sequence[Shard], host: str, port: int, paths: RouterPaths,
           settings: Config) -> str:
    """The HAProxy configuration of a cluster: `shards` behind `host:port`."""
    idle = settings.socket_timeout
    backends = "".join(
        f"\nbackend {shard.name}\n    server {shard.name} {shard.address} check\n"
        for shard in shards)
    values = {
        "version": __version__,
        "bind": f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
        "socket": str(paths.socket),
        "lua": str(LUA),
        "map": str(paths.map),
        "bufsize": str(settings.max_body_bytes + HEAD_ROOM),
        "max_body": str(settings.max_body_bytes),
        # An answered client connection waits this long for its next request, as a shard's does
        # (keep_alive_timeout: the client, whose own idle limit is shorter, closes first).
        "keep_alive_timeout": _ms(max(idle, settings.keep_alive_timeout)),
        # The server gives a request's head three times the idle timeout, then its body as much.
        "request_timeout": _ms(3 * idle),
        "server_timeout": _ms(max(MIN_SERVER_TIMEOUT_S, 6 * idle)),
        # A shard stopping finishes its requests within socket_timeout and 5 s (app.py).
        "stop_timeout": _ms(idle + 5),
        # As many requests at once as a shard queues: a shard holds each waiting request's bytes,
        # not a thread, and gives turns by user, which HAProxy's first-come queue would not.
        "server_maxconn": str(settings.queue_size),
        "retry_after": str(RETRY_AFTER_S),
        "first_shard": shards[0].name,
        "bucket_divisor": str(BUCKET_DIVISOR),
        "backends": backends,
    }
    text = TEMPLATE.read_text(encoding="utf-8")
    for name, value in values.items():
        text = text.replace("{{" + name + "}}", value)
    left = re.findall(r"\{\{\w+\}\}", text)
    if left:
        raise ClusterError(f"{TEMPLATE} names {left[0]}, which nothing fills in")
    return text


def _ms(seconds: float) -> str:
    return f"{round(seconds * 1000)}ms"


def version(binary: str = "haproxy") -> tuple[int, int]:
    """HAProxy's version, refused below MIN_VERSION."""
    try:
        done = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise ClusterError("haproxy is not installed (Debian and Ubuntu: apt-get install "
                          "haproxy)", "haproxy") from None
    found = re.search(r"version (\d+)\.(\d+)", done.stdout)
    if found is None:
        raise ClusterError(f"`{binary} -v` printed no version", "haproxy")
    got = (int(found.group(1)), int(found.group(2)))
    if got < MIN_VERSION:
        raise ClusterError(f"haproxy {got[0]}.{got[1]} is too old: the router needs "
                          f"{MIN_VERSION[0]}.{MIN_VERSION[1]} or later", "haproxy")
    return got


class Runtime:
    """HAProxy's runtime API on its stats socket: the bucket map and the requests in flight."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def command(self, line: str) -> str:
        """Run one command line (commands may be joined with '; ') and return its output."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(SOCKET_TIMEOUT_S)
            try:
                sock.connect(str(self.path))
            except OSError as exc:
                raise ClusterError(f"HAProxy's runtime API at {self.path} does not answer "
                                  f"({exc.strerror}); is the router running?", "haproxy") from None
            sock.sendall(line.encode("ascii") + b"\n")
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode("ascii", "replace")

    def set_buckets(self, map_path: Path, values: Mapping[int, str]) -> None:
        """Point buckets at shards (or HOLD) in the running router, at once for new requests."""
        commands = [f"set map {map_path} {bucket} {shard}" for bucket, shard in sorted(values.items())]
        for start in range(0, len(commands), COMMANDS_PER_LINE):
            output = self.command("; ".join(commands[start:start + COMMANDS_PER_LINE])).strip()
            if output:
                raise ClusterError(f"HAProxy refused a bucket map change: {output[:200]}",
                                  "haproxy")

    def buckets(self, map_path: Path) -> dict[int, str]:
        """The bucket map the running router uses."""
        found = {}
        for line in self.command(f"show map {map_path}").splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1].isdigit():
                found[int(parts[1])] = parts[2]
        if len(found) != BUCKETS:
            raise ClusterError(f"the running router's map {map_path} names {len(found)} buckets, "
                              f"not {BUCKETS}", "haproxy")
        return found

    def in_flight(self) -> dict[int, int]:
        """Requests being answered, by bucket (buckets with none may be absent)."""
        counts = {}
        for match in re.finditer(r"key=(\d+) .*?conn_cur=(\d+)", self.command("show table inflight")):
            counts[int(match.group(1))] = int(match.group(2))
        return counts

    def backends(self) -> set[str]:
        """The backends the running router has."""
        return {line.strip() for line in self.command("show backend").splitlines()
                if line.strip() and not line.startswith("#")}
