"""What every benchmark here shares: latency samples and their statistics, timestamped progress
on stderr, the run-report-write main loop (work directory, kept or removed; JSON and Markdown in
bench_out/; the table on stdout; exit 1 when the benchmark's target was missed), the environment
a result was measured in, a cProfile summary, and the real server as a subprocess with a
keep-alive client."""

from __future__ import annotations

import argparse
import cProfile
import http.client
import json
import os
import platform
import pstats
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
# Benchmarks run as plain scripts from a checkout, where the package is not necessarily installed:
# every script imports this module first, which makes the repository root importable.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def run_and_report(name: str, args: Any, run: Callable[[Any, Path], dict[str, Any]],
                   markdown: Callable[[dict[str, Any]], str]) -> int:
    """Run in `WORKDIR/bench_NAME` (stores several benchmarks share go to `WORKDIR/shared`),
    write bench_out/NAME.json and .md, print the Markdown. Without --keep, what this run
    created is removed afterwards; with it, everything stays for the next run to reuse."""
    made_temp = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix=f"bench_{name}_")) if made_temp else args.workdir
    root = workdir / f"bench_{name}"
    shared = workdir / "shared"
    shared_existed = shared.exists()
    try:
        report = run(args, root)
    finally:
        if made_temp and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        elif not args.keep:
            shutil.rmtree(root, ignore_errors=True)
            if not shared_existed:
                shutil.rmtree(shared, ignore_errors=True)
        else:
            log(f"kept the stores in {workdir}")
    text = markdown(report)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / f"{name}.md").write_text(text)
    print(text)
    log(f"wrote {args.out / f'{name}.json'} and {args.out / f'{name}.md'}")
    return 0 if report["passed"] else 1


@dataclass
class Samples:
    """Latencies of one path, in nanoseconds, in the order taken (one per query and round)."""
    label: str
    ns: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, float | int]:
        ms = sorted(n / 1e6 for n in self.ns)
        return {"p50": percentile(ms, 50), "p95": percentile(ms, 95), "p99": percentile(ms, 99),
                "mean": statistics.fmean(ms), "min": ms[0], "max": ms[-1], "samples": len(ms)}


def percentile(sorted_ms: list[float], pct: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), on sorted values."""
    if len(sorted_ms) == 1:
        return sorted_ms[0]
    pos = (len(sorted_ms) - 1) * pct / 100
    low = int(pos)
    high = min(low + 1, len(sorted_ms) - 1)
    return sorted_ms[low] + (sorted_ms[high] - sorted_ms[low]) * (pos - low)


def paired_ratio(numerator: Samples, denominator: Samples) -> float:
    """Median over (query, round) of the ratio of two paths' times for the same call: less
    sensitive to noise than a ratio of separately taken percentiles."""
    return statistics.median(a / b for a, b in zip(numerator.ns, denominator.ns, strict=True)
                             if b > 0)


# ---- where and what was measured ---------------------------------------------------------


def git_state() -> dict[str, Any]:
    """The commit measured, and whether the package had uncommitted changes: results move with
    every change to the package, so a result must say which code produced it."""
    def git(*argv: str) -> str | None:
        try:
            done = subprocess.run(["git", *argv], cwd=REPO_ROOT, capture_output=True, text=True,
                                  timeout=10, check=True)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    status = git("status", "--porcelain", "--", "aml_retriever")
    return {"commit": git("rev-parse", "--short", "HEAD"),
            "package_uncommitted": None if status is None else bool(status)}


def environment(loadavg_start: float) -> dict[str, Any]:
    """Machine, versions and load: a result without them cannot be compared with another."""
    from aml_retriever import __version__

    return {"python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
            "platform": platform.platform(), "cpus": os.cpu_count(), "aml_retriever": __version__,
            **git_state(), "loadavg_start": loadavg_start, "loadavg_end": os.getloadavg()[0]}


def environment_line(env: dict[str, Any]) -> str:
    return (f"Environment: Python {env['python']}, SQLite {env['sqlite']}, {env['platform']}, "
            f"{env['cpus']} CPUs, load average {env['loadavg_start']:.2f} at start and "
            f"{env['loadavg_end']:.2f} at end (other jobs on the machine add noise to every path "
            f"alike); aml_retriever {env['aml_retriever']} at commit {env['commit']}"
            f"{' with uncommitted package changes' if env['package_uncommitted'] else ''}.")


def params(args: Any) -> dict[str, Any]:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}


# ---- profiling ---------------------------------------------------------------------------

PROFILE_TOP = 15


def _function_name(key: tuple[str, int, str]) -> str:
    filename, line, name = key
    if filename == "~":  # a builtin or C method: pstats names it in angle brackets
        return name
    try:
        filename = str(Path(filename).resolve().relative_to(REPO_ROOT))
    except ValueError:  # the standard library: its package and file say enough
        filename = "/".join(Path(filename).parts[-2:])
    return f"{filename}:{line}({name})"


def profile(run: Callable[[], object], calls: int, entry: tuple[str, str]) -> dict[str, Any]:
    """`run()` (which makes `calls` calls of the entry point, a (file suffix, function name)
    pair such as ("service.py", "search")) under cProfile: the top functions by cumulative and
    by self time. cProfile slows Python calls far more than C calls (sqlite3), so shares
    overstate the Python side; read them as an ordering."""
    profiler = cProfile.Profile()
    profiler.enable()
    run()
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    entry_key = next(k for k in stats if k[2] == entry[1] and k[0].endswith(entry[0]))
    total = stats[entry_key][3]
    rows = [{"function": _function_name(key), "calls": nc, "tottime_s": tt, "cumtime_s": ct,
             "cum_share": ct / total, "cum_ms_per_call": ct / calls * 1e3}
            for key, (_, nc, tt, ct, _) in stats.items()
            if "/bench/" not in key[0] and "disable" not in key[2]]
    return {"calls": calls, "entry": f"{entry[0]}:{entry[1]}", "total_s": total,
            "top_cumulative": sorted(rows, key=lambda r: -r["cumtime_s"])[:PROFILE_TOP],
            "top_self": sorted(rows, key=lambda r: -r["tottime_s"])[:10]}


def profile_markdown(prof: dict[str, Any], title: str) -> list[str]:
    def rows(items: list[dict[str, Any]]) -> list[str]:
        return [f"| `{r['function']}` | {r['calls']:,} | {r['tottime_s']:.3f} | "
                f"{r['cumtime_s']:.3f} | {r['cum_ms_per_call']:.3f} | {r['cum_share']:.0%} |"
                for r in items]

    head = ["| function | calls | self s | cumulative s | cum ms / call | share |",
            "|---|---:|---:|---:|---:|---:|"]
    return ["", f"## Profile: {title} (cProfile)", "",
            f"`{prof['entry']}` total {prof['total_s']:.2f} s under the profiler "
            f"({prof['total_s'] / prof['calls'] * 1e3:.2f} ms a call; cProfile inflates Python "
            "calls more than sqlite3's C calls, so read shares as an order).", "",
            f"Top {PROFILE_TOP} by cumulative time:", "", *head, *rows(prof["top_cumulative"]),
            "", "Top 10 by self time:", "", *head, *rows(prof["top_self"])]


# ---- the real server, and a keep-alive client --------------------------------------------

API_KEY = "bench-key-0123456789"  # a key is what a deployment uses; checking it is part of the cost
SERVE_TIMEOUT_S = 60.0


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (every thread), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class ServerProcess:
    """`python3 -m aml_retriever serve` as a subprocess on a free loopback port (port 0: the
    server picks one and logs it), its log (access lines included, as in production) in a file,
    its memory and CPU read from /proc."""

    def __init__(self, db: Path, log_path: Path, *flags: str) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AML_")}
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aml_retriever", "serve", "--db", str(db), "--host",
             "127.0.0.1", "--port", "0", "--api-key", API_KEY, *flags],
            cwd=REPO_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self._log)
        self.port = self._wait_for_port()

    def _wait_for_port(self) -> int:
        deadline = time.monotonic() + SERVE_TIMEOUT_S
        while time.monotonic() < deadline:
            found = re.search(rb"serving on http://127\.0\.0\.1:(\d+)", self.log_path.read_bytes())
            if found:
                return int(found.group(1))
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        tail = self.log_path.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"the server did not start; its log ends with:\n{tail}")

    def memory_mb(self) -> dict[str, float]:
        """VmRSS (resident now) and VmHWM (the peak resident size) in MB."""
        values: dict[str, float] = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
        return values

    def stop(self) -> None:
        """SIGTERM (the graceful stop: requests finish, files are checkpointed and closed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


class Client:
    """One keep-alive HTTP/1.1 connection, as an agent's client keeps one. Bodies are sent as
    given (bytes); the answer is read in full but not parsed, so a timing covers the round trip
    and the server's work, not the client's JSON decoding."""

    def __init__(self, port: int, timeout: float = 60.0) -> None:
        self.port, self.timeout = port, timeout
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.headers = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}
        self.reconnects = -1  # the first connect is not a reconnect

    def call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        if self.conn.sock is None:
            self.reconnects += 1
        self.conn.request(method, path, body=body, headers=self.headers)
        response = self.conn.getresponse()
        return response.status, response.read()

    def post(self, path: str, payload: dict[str, Any]) -> tuple[int, bytes]:
        return self.call("POST", path, json.dumps(payload).encode())

    def close(self) -> None:
        self.conn.close()


# The seed of every benchmark's generated data unless --seed says otherwise.
SEED = 20240611


def add_run_args(parser: argparse.ArgumentParser, name: str, workdir: str, keep: str) -> None:
    """The options every benchmark takes: --seed, --out (where {name}.json and {name}.md go),
    --workdir (`workdir` says what is written there) and --keep (`keep` says what it keeps)."""
    parser.add_argument("--seed", type=int, default=SEED, help="seed of all generated data")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench_out",
                        help=f"directory for {name}.json and {name}.md")
    parser.add_argument("--workdir", type=Path, default=None,
                        help=f"{workdir}; default: a new temporary directory")
    parser.add_argument("--keep", action="store_true", help=keep)


def require_positive(parser: argparse.ArgumentParser, args: argparse.Namespace,
                     names: tuple[str, ...]) -> None:
    """Refuse, naming the flag, any of these counts below 1."""
    for name in names:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")


def sizes_arg(text: str) -> list[int]:
    """An argparse type: comma-separated sizes ("1000,10_000"), sorted, each at least 1."""
    try:
        sizes = sorted({int(s.replace("_", "")) for s in text.split(",") if s.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError("sizes must be comma-separated integers") from None
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError("sizes must be at least 1")
    return sizes
