#!/usr/bin/env python3
"""Drive an aml_retriever server on this machine with a mixed Add/Search load and report
throughput, latency percentiles (p50, p95, p99) and answers by status.

Loopback only: it refuses any address that is not this machine. Bounded: it stops at --duration
seconds or --max-requests requests, whichever comes first (at most 600 s and 1,000,000 requests).
Each client thread keeps one keep-alive connection. Without --url it serves a temporary store
itself (removed afterwards), so a bare run needs nothing else:

  python3 scripts/load_test.py --threads 8 --duration 10 --add-ratio 0.2
  python3 scripts/load_test.py --url http://127.0.0.1:8080 --api-key KEY --json

Every Add carries a fresh request_id, so every 200 is a new write; the report lists them, which is
how tests check that no acknowledged write was lost or stored twice.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aml_retriever.http.auth import is_loopback

MAX_DURATION_S = 600.0
MAX_REQUESTS = 1_000_000
# A client that is told 429 waits this long before its next request (the server says when, in
# Retry-After seconds; a load generator that waited that long would stop applying load).
OVERLOAD_PAUSE_S = 0.05
VOCABULARY = ("launch", "date", "budget", "garden", "violin", "lesson", "flight", "Berlin", "doctor",
              "appointment", "recipe", "pasta", "marathon", "training", "puppy", "vet", "kitchen",
              "paint", "blue", "concert", "ticket", "sister", "wedding", "August", "Tuesday",
              "北京", "咖啡", "Zürich", "café", "москва")


@dataclass(frozen=True)
class LoadConfig:
    url: str | None = None  # None: serve a temporary store in this process
    threads: int = 8
    duration_s: float = 10.0
    max_requests: int = 100_000
    add_ratio: float = 0.2
    users: int = 8
    messages_per_add: int = 4
    top_k: int = 10
    api_key: str | None = None
    seed: int = 1
    workers: int = 16  # for the server this tool starts itself
    queue_size: int = 64


@dataclass
class OpReport:
    count: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float


@dataclass
class Report:
    threads: int
    duration_s: float
    requests: int
    throughput_rps: float
    ops: dict[str, OpReport]
    statuses: dict[str, int]  # "200", "429", ... and "connection_error"
    statuses_by_op: dict[str, dict[str, int]]
    acknowledged: list[tuple[str, str, int]] = field(repr=False)  # (user, request_id, messages)

    def summary(self) -> dict[str, Any]:
        """The report without the list of acknowledged writes (for printing)."""
        return {"threads": self.threads, "duration_s": round(self.duration_s, 2),
                "requests": self.requests, "throughput_rps": round(self.throughput_rps, 1),
                "ops": {op: vars(r) for op, r in self.ops.items()}, "statuses": self.statuses,
                "statuses_by_op": self.statuses_by_op,
                "acknowledged_adds": len(self.acknowledged)}


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return 0.0
    rank = max(1, min(len(sorted_values), round(fraction * len(sorted_values) + 0.5)))
    return sorted_values[rank - 1]


class _Budget:
    def __init__(self, limit: int) -> None:
        self.left, self.lock = limit, threading.Lock()

    def take(self) -> bool:
        with self.lock:
            self.left -= 1
            return self.left >= 0


class _Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latencies: dict[str, list[float]] = {"add": [], "search": []}
        self.statuses: dict[str, Counter[str]] = {"add": Counter(), "search": Counter()}
        self.acknowledged: list[tuple[str, str, int]] = []

    def record(self, op: str, status: str, seconds: float) -> None:
        with self.lock:
            self.latencies[op].append(seconds * 1000)
            self.statuses[op][status] += 1


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme != "http" or not is_loopback(host):
        raise SystemExit(f"load_test.py drives loopback servers only (http://127.0.0.1:PORT), not {url}")
    return host, parts.port or 80


def _client(config: LoadConfig, address: tuple[str, int], index: int, deadline: float,
            budget: _Budget, recorder: _Recorder, run_id: str) -> None:
    rng = random.Random(config.seed * 1_000_003 + index)
    headers = {"Content-Type": "application/json"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    conn: http.client.HTTPConnection | None = None
    sent = 0
    while time.monotonic() < deadline and budget.take():
        user = f"{run_id}-user-{rng.randrange(config.users)}"
        if rng.random() < config.add_ratio:
            op, path = "add", "/add"
            request_id = f"{run_id}-t{index}-{sent}"
            messages = [{"role": rng.choice(("user", "assistant")),
                         "content": " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(4, 16))),
                         "timestamp": 1_700_000_000_000 + sent * 60_000 + i * 1000}
                        for i in range(config.messages_per_add)]
            body: dict[str, Any] = {"request_id": request_id, "user_id": user,
                                    "session_id": f"session-{index}", "messages": messages}
        else:
            op, path = "search", "/search"
            body = {"user_id": user, "query": " ".join(rng.sample(VOCABULARY, rng.randint(1, 4))),
                    "top_k": config.top_k}
        sent += 1
        started = time.perf_counter()
        try:
            if conn is None:
                conn = http.client.HTTPConnection(*address, timeout=30)
            conn.request("POST", path, body=json.dumps(body).encode(), headers=headers)
            response = conn.getresponse()
            response.read()
            status = str(response.status)
            if (response.getheader("Connection") or "").lower() == "close":
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException):
            status = "connection_error"
            if conn is not None:
                conn.close()
            conn = None
        recorder.record(op, status, time.perf_counter() - started)
        if op == "add" and status == "200":
            with recorder.lock:
                recorder.acknowledged.append((user, body["request_id"], config.messages_per_add))
        if status in ("429", "connection_error"):
            time.sleep(OVERLOAD_PAUSE_S)
    if conn is not None:
        conn.close()


def run(config: LoadConfig) -> Report:
    """Apply the load and measure it. Serves a temporary store itself when `config.url` is None."""
    if config.url is None:
        from aml_retriever.app import App
        from aml_retriever.settings import load

        with tempfile.TemporaryDirectory(prefix="aml-load-") as directory:
            app = App(load({"db_path": str(Path(directory) / "aml.db"), "host": "127.0.0.1",
                            "port": 0, "workers": config.workers, "queue_size": config.queue_size,
                            "api_key": config.api_key or ""}, environ={})).start()
            try:
                return _measure(config, _address(app.url))
            finally:
                app.stop()
    return _measure(config, _address(config.url))


def _measure(config: LoadConfig, address: tuple[str, int]) -> Report:
    duration = min(max(config.duration_s, 0.0), MAX_DURATION_S)
    budget = _Budget(min(max(config.max_requests, 0), MAX_REQUESTS))
    recorder = _Recorder()
    run_id = f"load{time.time_ns() % 10**12}"
    started = time.monotonic()
    threads = [threading.Thread(target=_client, args=(config, address, i, started + duration, budget,
                                                      recorder, run_id), daemon=True)
               for i in range(config.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - started
    ops = {}
    for op, values in recorder.latencies.items():
        ordered = sorted(values)
        if ordered:
            ops[op] = OpReport(len(ordered), *(round(percentile(ordered, f), 2)
                                               for f in (0.50, 0.95, 0.99, 1.0)))
    total = sum(len(v) for v in recorder.latencies.values())
    statuses = sum(recorder.statuses.values(), Counter())
    return Report(config.threads, elapsed, total, total / elapsed if elapsed else 0.0, ops,
                  dict(sorted(statuses.items())),
                  {op: dict(sorted(c.items())) for op, c in recorder.statuses.items() if c},
                  recorder.acknowledged)


def format_report(report: Report, config: LoadConfig) -> str:
    lines = [f"{report.threads} client threads, add ratio {config.add_ratio:.2f}, "
             f"{config.users} users, {config.messages_per_add} messages per Add",
             f"{report.requests} requests in {report.duration_s:.2f} s: "
             f"{report.throughput_rps:.1f} per second",
             f"{'op':<8}{'count':>8}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}{'max ms':>10}"]
    for op, r in report.ops.items():
        lines.append(f"{op:<8}{r.count:>8}{r.p50_ms:>10.2f}{r.p95_ms:>10.2f}{r.p99_ms:>10.2f}"
                     f"{r.max_ms:>10.2f}")
    lines.append("answers: " + ", ".join(f"{status} x{n}" for status, n in report.statuses.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a loopback server (default: serve a temporary store here)")
    parser.add_argument("--threads", type=int, default=8, help="client threads (default 8)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds (default 10, max 600)")
    parser.add_argument("--max-requests", type=int, default=100_000,
                        help="stop after this many requests (default 100000)")
    parser.add_argument("--add-ratio", type=float, default=0.2, help="share of Adds (default 0.2)")
    parser.add_argument("--users", type=int, default=8, help="distinct users (default 8)")
    parser.add_argument("--messages-per-add", type=int, default=4, help="default 4")
    parser.add_argument("--top-k", type=int, default=10, help="default 10")
    parser.add_argument("--api-key", help="sent as Authorization: Bearer KEY")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--workers", type=int, default=16, help="workers of the server started here")
    parser.add_argument("--queue-size", type=int, default=64, help="queue of the server started here")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if args.threads < 1 or not 0.0 <= args.add_ratio <= 1.0 or args.users < 1 \
            or args.messages_per_add < 1:
        parser.error("need --threads >= 1, --users >= 1, --messages-per-add >= 1, 0 <= --add-ratio <= 1")
    config = LoadConfig(url=args.url, threads=args.threads, duration_s=args.duration,
                        max_requests=args.max_requests, add_ratio=args.add_ratio, users=args.users,
                        messages_per_add=args.messages_per_add, top_k=args.top_k,
                        api_key=args.api_key, seed=args.seed, workers=args.workers,
                        queue_size=args.queue_size)
    if config.url:
        _address(config.url)  # refuse a remote address before doing anything
    report = run(config)
    print(json.dumps(report.summary(), indent=2) if args.json else format_report(report, config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
