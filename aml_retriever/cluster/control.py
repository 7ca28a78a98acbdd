"""A cluster on one machine: N shard servers, each with its own store, behind HAProxy.

    scripts/cluster.sh start --shards 3 --port 8080 --dir ./cluster [--config config.example.json]
    scripts/cluster.sh stats --dir ./cluster
    scripts/cluster.sh start --shards 4 --dir ./cluster     # a fourth shard, holding no user yet
    scripts/cluster.sh move --shards 4 --dir ./cluster      # move a quarter of the users to it
    scripts/cluster.sh stop --dir ./cluster

(`python3 -m aml_retriever.cluster ...` is the same.) Relative paths are the caller's (resolved
against the directory the command runs in). The directory holds everything:

    cluster.json     the router's address, the shards (name, port) and the settings file
    haproxy.cfg      rendered from deploy/haproxy.cfg
    buckets.map      the placement: bucket -> shard (changed only by `move`; .lock: one at a time)
    haproxy.sock     HAProxy's runtime API;  haproxy.pid, haproxy.log (its start-up messages)
    shard-K/aml.db   shard K's store;  shard-K.pid, shard-K.log (its server's log)

`start` starts whatever is not running (so after a crash it restarts the shard), each shard with
`serve` on a loopback port of its own and the settings file given, waits for every /health, then
starts HAProxy (or reloads it, seamlessly, when its configuration changed). Settings come from
the file and the AML_* environment, as for `serve`; the router's body limit and timeouts follow
them. A shard whose host in cluster.json is not loopback (written there by hand) runs on another
machine: `start` waits for its /health and routes to it, but starts and stops only local ones,
and `move` refuses (it copies user files between stores it opens). Every command prints its
result as JSON on stdout; `move` also prints a summary on stderr (which shard gave how many
buckets and users to which), every bucket's progress with --verbose, and with --quiet nothing but
errors (no JSON either). Exit codes: 0 done, 1 could not do it (one line on stderr), 2 usage
error.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aml_retriever.cluster.haproxy import RouterPaths, Runtime, Shard, render, shipped, version
from aml_retriever.cluster.mover import Cluster, Progress, move
from aml_retriever.cluster.sharding import HOLD, changing_map, placement, read_map, write_map
from aml_retriever.common.errors import AmlError, ClusterError
from aml_retriever.http.auth import is_loopback
from aml_retriever.settings import Config, load

SHARD_HOST = "127.0.0.1"
# How long a server or the router may take to answer its first /health.
START_TIMEOUT_S = 60.0
# Extra seconds a shard gets to stop after its own graceful stop (requests in flight finish
# within socket_timeout + 5 s) before it is killed.
STOP_MARGIN_S = 10.0
POLL_S = 0.05
# HAProxy keeps freed buffers in a shared pool for reuse. Its buffers hold a whole request body
# (tune.bufsize is max_body_bytes + 64 KiB), larger than its per-thread cache takes, and without
# the shared pool (off by default on glibc) every request allocates and frees several of them:
# 0.30 ms of HAProxy's CPU a forwarded request, 0.17-0.22 ms with it (on 2 busy cores).
ROUTER_FLAGS = ("-dMglobal",)
# The longest path HAProxy takes for its stats socket (sun_path, less the NUL and the
# ".<pid>.tmp" it binds first): the cluster's directory must leave room for /haproxy.sock.
SOCKET_PATH_MAX = (104 if sys.platform == "darwin" else 108) - 11


@dataclass(frozen=True)
class Layout:
    """Where a cluster keeps its files."""
    root: Path

    @property
    def spec(self) -> Path:
        return self.root / "cluster.json"

    @property
    def router(self) -> RouterPaths:
        return RouterPaths(self.root / "haproxy.cfg", self.root / "haproxy.sock",
                           self.root / "buckets.map")

    @property
    def router_pid(self) -> Path:
        return self.root / "haproxy.pid"

    def store(self, shard: str) -> Path:
        return self.root / shard / "aml.db"

    def pid(self, shard: str) -> Path:
        return self.root / f"{shard}.pid"

    def log(self, shard: str) -> Path:
        return self.root / f"{shard}.log"


@dataclass
class Spec:
    """cluster.json: what the cluster is."""
    host: str
    port: int
    config_file: str | None
    shards: list[Shard]

    @classmethod
    def read(cls, path: Path) -> Spec:
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(data["host"], data["port"], data["config_file"],
                   [Shard(s["name"], s["host"], s["port"]) for s in data["shards"]])

    def write(self, path: Path) -> None:
        data = {"host": self.host, "port": self.port, "config_file": self.config_file,
                "shards": [{"name": s.name, "host": s.host, "port": s.port} for s in self.shards]}
        partial = path.with_name(path.name + ".partial")
        partial.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        os.replace(partial, path)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.shards]


# ---- start ---------------------------------------------------------------------------------


def start(layout: Layout, shards: int | None, port: int | None, host: str,
          config_file: str | None) -> dict[str, Any]:
    """Make the cluster run: create it, grow or shrink it, or restart what is not running."""
    version()
    shipped()
    socket_bytes = len(os.fsencode(layout.router.socket))
    if socket_bytes > SOCKET_PATH_MAX:
        raise ClusterError(f"the cluster directory's path is too long: HAProxy's socket in it "
                           f"would be {socket_bytes} bytes, more than the {SOCKET_PATH_MAX} it "
                           f"takes ({layout.router.socket}); use a shorter --dir", "dir")
    layout.root.mkdir(parents=True, exist_ok=True)
    if layout.spec.exists():
        spec = Spec.read(layout.spec)
        if port is not None and port != spec.port:
            raise ClusterError(f"this cluster serves on port {spec.port}; stop it and start a new "
                               "one to change it", "port")
    else:
        if shards is None or port is None:
            raise ClusterError("a new cluster needs --shards and --port", "shards")
        spec = Spec(host, port, str(Path(config_file).resolve()) if config_file else None, [])
    settings = load(None, spec.config_file)
    if not is_loopback(spec.host) and not settings.api_key:
        # Keyless shards answer only to this machine's names (DNS rebinding), and HAProxy passes
        # a client's Host through: a public router in front of them would refuse everything.
        raise ClusterError(f"a router on {spec.host} needs an API key for the shards (api_key in "
                           "--config): without one they answer only to this machine's names",
                           "host")
    with changing_map(layout.router.map):  # never while users are being moved
        if shards is not None:
            _resize(layout, spec, shards)
        spec.write(layout.spec)
        if not layout.router.map.exists():
            write_map(layout.router.map, placement(spec.names))
        started = [(shard, _start_shard(layout, spec, shard)) for shard in spec.shards]
        for shard, process in started:  # started together, waited for in turn
            _wait_healthy(shard.host, shard.port, f"{shard.name} (log: {layout.log(shard.name)})"
                          if is_loopback(shard.host) else f"{shard.name} at {shard.address}",
                          process)
        _start_router(layout, spec, settings)
    return {"router": f"http://{spec.host}:{spec.port}",
            "shards": {s.name: f"http://{s.host}:{s.port}" for s in spec.shards}}


def _resize(layout: Layout, spec: Spec, shards: int) -> None:
    if shards < 1:
        raise ClusterError("--shards must be at least 1", "shards")
    names = spec.names
    for index in range(len(names), shards):
        spec.shards.append(Shard(f"shard-{index}", SHARD_HOST, _free_port()))
    if shards >= len(names):
        return
    dropped = set(names[shards:])
    if layout.router.map.exists():
        placed = set(read_map(layout.router.map).values())
        if placed & (dropped | {HOLD}):
            raise ClusterError(f"shards {', '.join(sorted(dropped))} still hold users (or a move "
                               f"is unfinished): run `cluster.sh move --shards {shards}` first",
                               "shards")
    for name in sorted(dropped):
        _stop_process(layout.pid(name), STOP_MARGIN_S)
    del spec.shards[shards:]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((SHARD_HOST, 0))
        return int(sock.getsockname()[1])


def _start_shard(layout: Layout, spec: Spec, shard: Shard) -> subprocess.Popen[bytes] | None:
    """Start a shard's server unless it runs; the process started, if one was. A shard on
    another machine (cluster.json written by hand) is started there, not here."""
    if not is_loopback(shard.host) or _running(layout.pid(shard.name), b"aml_retriever"):
        return None
    store = layout.store(shard.name)
    store.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "aml_retriever", "serve", "--db", str(store), "--host",
            shard.host, "--port", str(shard.port)]
    if spec.config_file:
        argv += ["--config", spec.config_file]
    with open(layout.log(shard.name), "ab") as log:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=log, start_new_session=True,
                                   cwd=Path(__file__).resolve().parents[2])
    layout.pid(shard.name).write_text(f"{process.pid}\n")
    return process


def _start_router(layout: Layout, spec: Spec, settings: Config) -> None:
    paths = layout.router
    text = render(spec.shards, spec.host, spec.port, paths, settings)
    running = _running(layout.router_pid, b"haproxy")
    if running and paths.config.exists() and paths.config.read_text() == text:
        return
    paths.config.write_text(text)
    _haproxy("-c", "-f", str(paths.config), log=layout.root / "haproxy.log")
    argv = ["-f", str(paths.config), "-D", "-p", str(layout.router_pid), *ROUTER_FLAGS]
    if running:  # a seamless reload: the new process takes the listening socket over
        argv += ["-x", str(paths.socket), "-sf", str(_pid(layout.router_pid))]
    _haproxy(*argv, log=layout.root / "haproxy.log")
    _wait_healthy(spec.host, spec.port, f"HAProxy (log: {layout.root / 'haproxy.log'})", None)


def _haproxy(*argv: str, log: Path) -> None:
    with open(log, "ab") as out:
        start = out.tell()
        done = subprocess.run(["haproxy", *argv], stdin=subprocess.DEVNULL, stdout=out,
                              stderr=out, timeout=START_TIMEOUT_S)
    if done.returncode != 0:
        with open(log, "rb") as written:
            written.seek(start)
            lines = written.read().decode(errors="replace").strip().splitlines()
        # Its first alert says what is wrong (the last only that something was).
        said = next((line for line in lines if "[ALERT]" in line), lines[-1] if lines else None)
        raise ClusterError(f"haproxy {argv[0]} failed: {said.strip() if said else done.returncode}"
                           f" (log: {log})", "haproxy")


def _wait_healthy(host: str, port: int, what: str, process: subprocess.Popen[bytes] | None) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise ClusterError(f"{what} exited with status {process.returncode}", "shards")
        try:
            status, _ = _get(host, port, "/health", None, timeout=2.0)
            if status == 200:
                return
        except OSError:
            pass
        time.sleep(POLL_S)
    raise ClusterError(f"{what} did not answer /health within {START_TIMEOUT_S:g} s", "shards")


# ---- stop, stats ---------------------------------------------------------------------------


def stop(layout: Layout) -> dict[str, Any]:
    """Stop the router, then every shard, gracefully (requests in flight finish)."""
    spec = Spec.read(_existing(layout).spec)
    settings = load(None, spec.config_file)
    grace = settings.socket_timeout + STOP_MARGIN_S
    stopped = {"router": _stop_process(layout.router_pid, grace, signal.SIGUSR1)}
    for shard in spec.shards:
        stopped[shard.name] = _stop_process(layout.pid(shard.name), grace)
    return {"stopped": stopped}


def stats(layout: Layout) -> dict[str, Any]:
    """Every shard's /stats, and their sums."""
    spec = Spec.read(_existing(layout).spec)
    key = load(None, spec.config_file).api_key or None
    per_shard: dict[str, Any] = {}
    total: dict[str, int] = {}
    for shard in spec.shards:
        try:
            status, body = _get(shard.host, shard.port, "/stats", key, timeout=60.0)
        except OSError as exc:
            raise ClusterError(f"{shard.name} does not answer ({exc.strerror or exc})",
                               "shards") from None
        if status != 200:
            raise ClusterError(f"{shard.name} answered /stats with {status}", "shards")
        per_shard[shard.name] = body
        for name, value in body.items():
            if isinstance(value, int):
                total[name] = total.get(name, 0) + value
    return {"total": total, "shards": per_shard}


def _get(host: str, port: int, path: str, key: str | None, timeout: float) -> tuple[int, Any]:
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {key}"} if key else {})
        response = conn.getresponse()
        payload = response.read()
        return response.status, json.loads(payload) if payload else None
    finally:
        conn.close()


# ---- move ----------------------------------------------------------------------------------


def move_users(layout: Layout, shards: int, batch: int,
               progress: Progress | None = None) -> dict[str, Any]:
    """Move users so that the first `shards` shards of the cluster hold them; `progress` is told
    of every batch held and every bucket copied and switched."""
    cluster, names = mover_cluster(layout)
    remote = sorted(set(names) - set(cluster.stores))
    if remote:
        raise ClusterError(f"{remote[0]} is not on this machine: the mover copies user files "
                           "between stores it opens", "shards")
    if not 1 <= shards <= len(names):
        raise ClusterError(f"--shards must be from 1 to the cluster's {len(names)} (start new "
                           "shards first: cluster.sh start --shards N)", "shards")
    return move(cluster, names[:shards], progress, batch).as_dict()


def mover_cluster(layout: Layout) -> tuple[Cluster, list[str]]:
    """What the mover needs of this cluster, and its shards' names in order."""
    spec = Spec.read(_existing(layout).spec)
    settings = load(None, spec.config_file)
    cluster = Cluster(
        stores={s.name: layout.store(s.name) for s in spec.shards if is_loopback(s.host)},
        map_path=layout.router.map, runtime=Runtime(layout.router.socket),
        release=lambda: _signal_shards(layout, spec, signal.SIGUSR1),
        # The servers close their idle files at their next checkpoint tick.
        settle_s=2 * settings.checkpoint_interval + 0.5)
    return cluster, spec.names


def _progress(event: str, detail: Any) -> None:
    print(f"{event}: {json.dumps(detail)}", file=sys.stderr, flush=True)


def move_summary(report: dict[str, Any]) -> list[str]:
    """A few lines saying what a move did (its report, `move_users`' result), for a person."""
    if report["buckets_moved"]:
        lines = [f"moved {_count(report['buckets_moved'], 'bucket')} "
                 f"({_count(report['users_moved'], 'user')}):"]
        lines += [f"  {m['from']} -> {m['to']}: {_count(m['buckets'], 'bucket')}, "
                  f"{_count(m['users'], 'user')}" for m in report["moves"]]
    else:
        lines = ["nothing to move: every bucket is already on its shard"]
    if report["files_removed"]:
        lines.append(f"removed {_count(report['files_removed'], 'emptied user file')}")
    if report["emptied_files_left_open"]:
        lines.append(f"left {_count(report['emptied_files_left_open'], 'emptied user file')} "
                     "a server still holds open (a later move removes them)")
    if report["unexpected_files"]:
        lines.append("warning: left alone, user files holding rows on a shard the map does not "
                     f"route them to: {', '.join(report['unexpected_files'])}")
    return lines


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _signal_shards(layout: Layout, spec: Spec, signum: int) -> None:
    for shard in spec.shards:
        if _running(layout.pid(shard.name), b"aml_retriever"):
            os.kill(_pid(layout.pid(shard.name)), signum)


# ---- processes -----------------------------------------------------------------------------


def _pid(path: Path) -> int:
    return int(path.read_text().split()[0])


def _running(pid_file: Path, marker: bytes) -> bool:
    """Whether the process a pid file names is alive and is the one written there (a pid is
    reused after a crash)."""
    try:
        pid = _pid(pid_file)
        os.kill(pid, 0)
    except (OSError, ValueError, IndexError):
        return False
    try:
        return marker in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:  # no /proc (macOS): the pid alone says it
        return True


def _stop_process(pid_file: Path, grace: float, signum: int = signal.SIGTERM) -> str:
    """Ask a process to stop, wait `grace` seconds, then kill it; remove its pid file."""
    if not pid_file.exists():
        return "not running"
    if not _running(pid_file, b"haproxy" if pid_file.name == "haproxy.pid" else b"aml_retriever"):
        pid_file.unlink()
        return "not running"
    pid = _pid(pid_file)
    os.kill(pid, signum)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(POLL_S)
    outcome = "stopped"
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
        outcome = "killed"
    pid_file.unlink(missing_ok=True)
    return outcome


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie (a child of this process not yet reaped) has stopped
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return True


def _existing(layout: Layout) -> Layout:
    if not layout.spec.exists():
        raise ClusterError(f"there is no cluster in {layout.root} (no cluster.json)", "dir")
    return layout


# ---- command line --------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scripts/cluster.sh", description="Run user-sharded servers behind HAProxy on one "
        "machine, and move users between them.",
        epilog="exit codes: 0 success, 1 could not do its work (reason on stderr), 2 usage error")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    begin = commands.add_parser("start", help="start (or restart, grow, shrink) a cluster")
    begin.add_argument("--dir", required=True, help="the cluster's directory")
    begin.add_argument("--shards", type=int, help="how many shards (a new cluster: required)")
    begin.add_argument("--port", type=int, help="HAProxy's port (a new cluster: required)")
    begin.add_argument("--host", default="127.0.0.1", help="HAProxy's address (default loopback)")
    begin.add_argument("--config", help="JSON settings file every shard serves with")
    for name, summary in (("stop", "stop the router and every shard gracefully"),
                          ("stats", "sum /stats over the shards (JSON, never content)")):
        command = commands.add_parser(name, help=summary)
        command.add_argument("--dir", required=True, help="the cluster's directory")
    moving = commands.add_parser("move", help="move users so the first N shards hold them")
    moving.add_argument("--dir", required=True, help="the cluster's directory")
    moving.add_argument("--shards", type=int, required=True,
                        help="the new number of shards (the first N of the cluster's)")
    moving.add_argument("--batch", type=int, default=16,
                        help="buckets held at once (each about 1/1,024 of the users)")
    output = moving.add_mutually_exclusive_group()
    output.add_argument("--verbose", action="store_true",
                        help="also print every batch held and every bucket copied and switched")
    output.add_argument("--quiet", action="store_true",
                        help="print nothing but errors (no summary, no JSON)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    layout = Layout(Path(args.dir).resolve())
    try:
        if args.command == "start":
            result = start(layout, args.shards, args.port, args.host, args.config)
        elif args.command == "stop":
            result = stop(layout)
        elif args.command == "stats":
            result = stats(layout)
        else:
            result = move_users(layout, args.shards, max(1, args.batch),
                                _progress if args.verbose else None)
    except AmlError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"error: {exc.strerror or exc}{f' ({exc.filename})' if exc.filename else ''}",
              file=sys.stderr)
        return 1
    if args.command == "move":
        if args.quiet:
            return 0
        print("\n".join(move_summary(result)), file=sys.stderr, flush=True)
    try:
        print(json.dumps(result, indent=2, ensure_ascii=False), flush=True)
    except BrokenPipeError:
        # The reader went away (`cluster.sh stats | head`): nothing is left to say to it, and
        # the interpreter's last flush must not fail again on the way out.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0

