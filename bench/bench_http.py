"""What does the HTTP service add on top of the in-process service, and how much does it serve?

What it does
------------
1. Starts the real server as a subprocess (`python3 -m aml_retriever serve`, default settings:
   16 workers, synchronous=FULL, access log on, an API key) over a fresh store, on a free
   loopback port.
2. Pre-loads `--users` chat users (`corpus.conversation`) of `--user-messages` messages each
   through HTTP Adds of 20 messages, and builds questions about each user's messages.
3. HTTP overhead, in this process, interleaved query by query (the order rotates every query
   and round): a Search over one keep-alive connection; the same Search in-process
   (`MemoryService.search` on the same store, opened beside the running server: WAL readers
   in two processes are safe, and nothing writes meanwhile); and GET /health over the same
   connection (the HTTP round trip with no work behind it). Overhead = HTTP p50 - in-process p50.
4. Load, from ONE separate client process (so the client's work never runs in the server's
   process) with 1, 4 and 16 threads, each a keep-alive client with its own connection, for
   `--seconds` each: Search only (questions over the pre-loaded users); Add only (20-message Adds,
   each client to a user of its own, every Add a new request id); and an 80/20 Search/Add mix.
   Reports req/s, msg/s of Adds, p50/p95/p99 per operation, the CPU the server and the client
   process used (in cores), which shows which side was the limit, and the server's RSS after
   each phase.

Why threads in one client process: the machine has 2 cores, and the server (one Python
process) needs them; 16 client processes would add 16 interpreters competing for the same 2
cores and would measure the scheduler more than the server. A client thread spends almost all its
time waiting on its socket (the GIL is released there), and the client process's CPU is reported,
so a reader can see it stayed well below a core.

Targets: HTTP overhead at p50 <= 1.5 ms (`--max-overhead-ms`); Adds over HTTP with 4 clients
>= 3,000 messages/s (`--min-add-rate`).

Usage
-----
    python3 bench/bench_http.py                          # 16 users x 1,000 messages, 10 s phases
    python3 bench/bench_http.py --users 4 --user-messages 300 --seconds 2   # a quick run

Results go to `bench_out/http.json` and `bench_out/http.md` (git-ignored) and the Markdown is
printed; progress goes to stderr. Exit status: 0 when both targets are met and no request
failed, 1 otherwise, 2 on a usage error. Standard library only.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import multiprocessing
import os
import random
import shutil
import statistics
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from benchlib import (
    SERVE_TIMEOUT_S,
    Client,
    Samples,
    ServerProcess,
    add_run_args,
    environment,
    environment_line,
    log,
    params,
    process_cpu_seconds,
    require_positive,
    run_and_report,
)
from corpus import ADD_SIZE, Generated, chat_questions, conversation, generated

from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import SearchRequest

WORKLOADS = ("search", "add", "mix")
MIX_SEARCH_SHARE = 0.8
TOP_K = 10
WARMUP_REQUESTS = 3  # per client thread before the timed window (connections open, caches fill)
QUESTIONS_PER_USER = 50
PRELOAD_CLIENTS = 4
# Add bodies a client prepares before its timed window, per second and per client of a phase:
# more than the server can take (it took under 300 Adds/s in all), so none is made while timed.
ADDS_PER_SECOND_BOUND = 400


def search_body(user_id: str, query: str) -> bytes:
    return json.dumps({"user_id": user_id, "query": query, "top_k": TOP_K}).encode()


def add_bodies(user_id: str, seed: int) -> Iterator[bytes]:
    """Endless 20-message Adds of one user's chat history, each with a new request id."""
    stream = conversation(seed)
    number = 0
    while True:
        batch: list[Generated] = list(islice(stream, ADD_SIZE))
        yield json.dumps({
            "request_id": f"r{number:06d}", "user_id": user_id, "session_id": batch[0].session_id,
            "messages": [{"role": g.message.role, "content": g.message.content,
                          "timestamp": g.message.timestamp_ms} for g in batch]}).encode()
        number += 1


# ---- the client process ------------------------------------------------------------------


@dataclass(frozen=True)
class Phase:
    """One timed load: what every client thread sends, for how long."""
    workload: str  # "search", "add", "mix", or "preload" (every Add of `preload` users, untimed)
    clients: int
    seconds: float  # how long each client sends, unless `requests` is set
    port: int
    server_pid: int
    seed: int
    searches: tuple[tuple[str, str], ...] = ()  # (user_id, question), taken in turn
    preload: tuple[tuple[str, int, int], ...] = ()  # (user_id, seed, messages)
    search_share: float = MIX_SEARCH_SHARE  # of a mix
    requests: int = 0  # requests each client sends (0: as many as `seconds` allows)

    def adds_needed(self) -> int:
        """Add bodies a client prepares before its timed window, so none is made while timed."""
        if self.workload == "search":
            return 0
        share = 1.0 if self.workload == "add" else 1 - self.search_share
        if self.requests:
            return int(self.requests * share) + 10
        return int(self.seconds * ADDS_PER_SECOND_BOUND * share / self.clients) + 10


@dataclass
class _Window:
    """When the timed window opened, and the CPU both processes had used by then."""
    started: float = 0.0
    server_cpu: float = 0.0
    client_cpu: float = 0.0


class _Recorder:
    """Latencies and statuses of every client thread of a phase."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ms: dict[str, list[float]] = {"search": [], "add": []}
        self.statuses: Counter[str] = Counter()
        self.reconnects = 0

    def take(self, ms: dict[str, list[float]], statuses: Counter[str], reconnects: int) -> None:
        with self.lock:
            for op, values in ms.items():
                self.ms[op] += values
            self.statuses.update(statuses)
            self.reconnects += reconnects


def _client_thread(phase: Phase, index: int, start: threading.Barrier, recorder: _Recorder,
                   window: _Window) -> None:
    rng = random.Random(f"{phase.seed}:{phase.workload}:{phase.clients}:{index}")
    client = Client(phase.port)
    searches = [search_body(u, q) for u, q in phase.searches]
    offset = index * len(searches) // max(1, phase.clients)
    user = f"load-{phase.workload}-c{phase.clients}-{index}"
    adds = add_bodies(user, phase.seed + 10_000 + index)
    ready = deque(islice(adds, phase.adds_needed()))
    ms: dict[str, list[float]] = {"search": [], "add": []}
    statuses: Counter[str] = Counter()

    def one(op: str, number: int) -> tuple[int, float]:
        if op == "search":
            body = searches[(offset + number) % len(searches)]
            path = "/search"
        else:
            body = ready.popleft() if ready else next(adds)
            path = "/add"
        started = time.perf_counter_ns()
        try:
            status, _ = client.call("POST", path, body)
        except (http.client.HTTPException, OSError):
            status = 0  # counted as an error; the next call opens a new connection
            client.close()
        return status, (time.perf_counter_ns() - started) / 1e6

    def pick() -> str:
        if phase.workload == "mix":
            return "search" if rng.random() < phase.search_share else "add"
        return phase.workload

    try:
        for number in range(WARMUP_REQUESTS):
            one(pick(), number)
        start.wait(timeout=SERVE_TIMEOUT_S)
        deadline = window.started + phase.seconds
        number = WARMUP_REQUESTS
        while (number - WARMUP_REQUESTS < phase.requests if phase.requests
               else time.perf_counter() < deadline):
            op = pick()
            status, took = one(op, number)
            ms[op].append(took)
            statuses[f"{op} {status}"] += 1
            number += 1
    finally:
        client.close()
        recorder.take(ms, statuses, max(0, client.reconnects))


def _preload_thread(phase: Phase, users: Sequence[tuple[str, int, int]],
                    recorder: _Recorder) -> None:
    client = Client(phase.port)
    statuses: Counter[str] = Counter()
    try:
        for user_id, seed, messages in users:
            for body in islice(add_bodies(user_id, seed), messages // ADD_SIZE):
                status, _ = client.call("POST", "/add", body)
                statuses[f"add {status}"] += 1
    finally:
        client.close()
        recorder.take({}, statuses, 0)


def run_phase(phase: Phase) -> dict[str, Any]:
    """In the client process: run the phase's threads, return what they measured."""
    recorder = _Recorder()
    if phase.workload == "preload":
        started = time.perf_counter()
        threads = [threading.Thread(target=_preload_thread,
                                    args=(phase, phase.preload[i::phase.clients], recorder))
                   for i in range(phase.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {"seconds": time.perf_counter() - started, "statuses": dict(recorder.statuses)}
    window = _Window()

    def begin() -> None:  # runs once, when every thread is at the barrier
        window.started = time.perf_counter()
        window.server_cpu = process_cpu_seconds(phase.server_pid)
        window.client_cpu = time.process_time()

    start = threading.Barrier(phase.clients, action=begin)
    threads = [threading.Thread(target=_client_thread, args=(phase, i, start, recorder, window))
               for i in range(phase.clients)]
    gc.disable()
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        gc.enable()
    elapsed = time.perf_counter() - window.started
    return {"elapsed_s": elapsed, "ms": recorder.ms, "statuses": dict(recorder.statuses),
            "reconnects": recorder.reconnects,
            "server_cores": (process_cpu_seconds(phase.server_pid) - window.server_cpu) / elapsed,
            "client_cores": (time.process_time() - window.client_cpu) / elapsed}


# ---- measuring ---------------------------------------------------------------------------


def summarize(result: dict[str, Any], clients: int, workload: str) -> dict[str, Any]:
    elapsed = result["elapsed_s"]
    ops = {}
    for op, ms in result["ms"].items():
        if ms:
            s = Samples(op, [int(m * 1e6) for m in ms]).summary()
            ops[op] = {**s, "per_s": len(ms) / elapsed}
    requests = sum(len(ms) for ms in result["ms"].values())
    errors = sum(n for k, n in result["statuses"].items() if not k.endswith(" 200"))
    return {"workload": workload, "clients": clients, "elapsed_s": elapsed, "requests": requests,
            "req_per_s": requests / elapsed,
            "add_msg_per_s": len(result["ms"]["add"]) * ADD_SIZE / elapsed, "ops": ops,
            "errors": errors, "statuses": result["statuses"], "reconnects": result["reconnects"],
            "server_cores": result["server_cores"], "client_cores": result["client_cores"]}


def measure_overhead(db: Path, port: int, searches: Sequence[tuple[str, str]],
                     rounds: int) -> dict[str, Samples]:
    """HTTP Search, in-process Search and GET /health, query by query, order rotating."""
    svc = MemoryService.open(str(db))
    client = Client(port)
    bodies = [search_body(u, q) for u, q in searches]
    requests = [SearchRequest(q, u, TOP_K, (), None) for u, q in searches]
    paths = [("HTTP Search", lambda i: client.call("POST", "/search", bodies[i])),
             ("in-process Search", lambda i: svc.search(requests[i])),
             ("HTTP GET /health", lambda i: client.call("GET", "/health"))]
    samples = {name: Samples(name) for name, _ in paths}
    try:
        for i in range(len(searches)):  # warm-up: connections open, pages cached
            for _, call in paths:
                call(i)
        gc.collect()
        gc.disable()
        try:
            for round_no in range(rounds):
                for i in range(len(searches)):
                    shift = (i + round_no) % len(paths)
                    for name, call in paths[shift:] + paths[:shift]:
                        started = time.perf_counter_ns()
                        call(i)
                        samples[name].ns.append(time.perf_counter_ns() - started)
        finally:
            gc.enable()
    finally:
        client.close()
        svc.close()
    return samples


def preload_plan(args: argparse.Namespace) -> list[tuple[str, int, int]]:
    return [(f"user-{u:03d}", args.seed + u, args.user_messages) for u in range(args.users)]


def questions(args: argparse.Namespace) -> list[tuple[str, str]]:
    """Questions about each pre-loaded user's messages, users interleaved."""
    per_user = []
    for user_id, seed, messages in preload_plan(args):
        source = generated(seed, min(messages, 1_000))
        per_user.append([(user_id, q) for _, q in chat_questions(seed, source, QUESTIONS_PER_USER)])
    return [pair for group in zip(*per_user, strict=False) for pair in group]


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    loadavg_start = os.getloadavg()[0]
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    db = root / "store" / "aml.db"
    db.parent.mkdir()
    searches = questions(args)
    report: dict[str, Any] = {"params": params(args), "phases": []}
    context = multiprocessing.get_context("spawn")
    with ServerProcess(db, root / "server.log", *args.server_arg) as server, \
            context.Pool(1) as pool:
        log(f"server pid {server.proc.pid} on port {server.port}; pre-loading {args.users} users "
            f"x {args.user_messages:,} messages over HTTP ({PRELOAD_CLIENTS} clients)")
        base = Phase("preload", PRELOAD_CLIENTS, 0, server.port, server.proc.pid, args.seed,
                     preload=tuple(preload_plan(args)))
        loaded = pool.apply(run_phase, (base,))
        messages = args.users * (args.user_messages // ADD_SIZE) * ADD_SIZE
        report["preload"] = {**loaded, "messages": messages,
                             "msg_per_s": messages / loaded["seconds"]}
        log(f"pre-loaded in {loaded['seconds']:.1f} s ({messages / loaded['seconds']:,.0f} msg/s)")
        log(f"HTTP overhead: {args.rounds} rounds x {len(searches[:args.queries])} questions x 3 paths")
        samples = measure_overhead(db, server.port, searches[:args.queries], args.rounds)
        report["overhead_ms"] = {name: s.summary() for name, s in samples.items()}
        report["overhead_paired_ms"] = statistics.median(
            (h - p) / 1e6 for h, p in zip(samples["HTTP Search"].ns,
                                          samples["in-process Search"].ns, strict=True))
        for workload in WORKLOADS:
            for clients in args.clients:
                log(f"load: {workload}, {clients} client(s), {args.seconds:g} s")
                phase = Phase(workload, clients, args.seconds, server.port, server.proc.pid,
                              args.seed, searches=tuple(searches))
                row = summarize(pool.apply(run_phase, (phase,)), clients, workload)
                row["server_rss_mb"] = server.memory_mb()["VmRSS"]
                report["phases"].append(row)
                log(f"  {row['req_per_s']:,.0f} req/s, {row['add_msg_per_s']:,.0f} add msg/s, "
                    f"server {row['server_cores']:.2f} cores, client {row['client_cores']:.2f}")
        report["server_memory_mb"] = server.memory_mb()
    overhead = report["overhead_ms"]
    report["http_overhead_ms"] = overhead["HTTP Search"]["p50"] - overhead["in-process Search"]["p50"]
    adds4 = next((r for r in report["phases"] if r["workload"] == "add" and r["clients"] == 4), None)
    report["add_rate_4_clients"] = adds4["add_msg_per_s"] if adds4 else None
    report["verdicts"] = {
        "http_overhead": report["http_overhead_ms"] <= args.max_overhead_ms,
        "add_rate_4_clients": adds4 is not None and adds4["add_msg_per_s"] >= args.min_add_rate}
    report["errors"] = (sum(r["errors"] for r in report["phases"])
                        + sum(n for k, n in report["preload"]["statuses"].items()
                              if not k.endswith(" 200")))
    report["env"] = environment(loadavg_start)
    report["passed"] = all(report["verdicts"].values()) and report["errors"] == 0
    return report


# ---- reporting ---------------------------------------------------------------------------


def _extra(flags: list[str]) -> str:
    return f"; with {' '.join(flags)}" if flags else ""


def _op_cells(row: dict[str, Any], op: str) -> str:
    s = row["ops"].get(op)
    return " | ".join(f"{s[k]:.2f}" for k in ("p50", "p95", "p99")) if s else "- | - | -"


def markdown(report: dict[str, Any]) -> str:
    p, pre, over = report["params"], report["preload"], report["overhead_ms"]
    lines = [
        "# HTTP: overhead over the in-process service, and throughput under load",
        "",
        f"- Server: `python3 -m aml_retriever serve` (defaults: 16 workers, synchronous=FULL, "
        f"access log to a file, API key{_extra(p['server_arg'])}), a fresh store pre-loaded over "
        f"HTTP with {p['users']} "
        f"users x {p['user_messages']:,} messages ({pre['messages']:,} messages in "
        f"{pre['seconds']:.1f} s, {pre['msg_per_s']:,.0f} msg/s with {PRELOAD_CLIENTS} clients)",
        f"- Searches: top_k {TOP_K}, questions about the pre-loaded users' messages; Adds: "
        f"{ADD_SIZE} messages, each client to a user of its own, each a new request id",
        f"- Load from one client process, one thread and keep-alive connection per client, "
        f"{p['seconds']:g} s per phase after {WARMUP_REQUESTS} warm-up requests per client",
        "",
        "## HTTP overhead (1 keep-alive client, interleaved query by query)",
        "",
        "| path | p50 ms | p95 ms | p99 ms | mean ms | samples |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, s in over.items():
        lines.append(f"| {name} | {s['p50']:.3f} | {s['p95']:.3f} | {s['p99']:.3f} | "
                     f"{s['mean']:.3f} | {s['samples']} |")
    verdict = "PASS" if report["verdicts"]["http_overhead"] else "FAIL"
    lines += ["", f"HTTP overhead at p50 (HTTP Search p50 - in-process p50): "
              f"**{report['http_overhead_ms']:.3f} ms** (target <= {p['max_overhead_ms']} ms): "
              f"**{verdict}**; paired median of the same query's difference: "
              f"{report['overhead_paired_ms']:.3f} ms.", "",
              "## Load", "",
              "| workload | clients | req/s | Add msg/s | Search p50 | p95 | p99 | Add p50 | p95 | "
              "p99 | errors | server cores | client cores | server RSS MB after |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in report["phases"]:
        lines.append(f"| {row['workload']} | {row['clients']} | {row['req_per_s']:,.0f} | "
                     f"{row['add_msg_per_s']:,.0f} | {_op_cells(row, 'search')} | "
                     f"{_op_cells(row, 'add')} | {row['errors']} | {row['server_cores']:.2f} | "
                     f"{row['client_cores']:.2f} | {row['server_rss_mb']:.0f} |")
    rate = report["add_rate_4_clients"]
    verdict = "PASS" if report["verdicts"]["add_rate_4_clients"] else "FAIL"
    memory = report["server_memory_mb"]
    reconnects = sum(r["reconnects"] for r in report["phases"])
    lines += ["", "Latencies in ms, measured by the client (request sent to response read); "
              f"{reconnects} connections were reopened under load (keep-alive held otherwise).", "",
              f"- Adds over HTTP with 4 clients: **{rate:,.0f} messages/s** (target >= "
              f"{p['min_add_rate']:,}): **{verdict}**" if rate is not None else
              "- Adds over HTTP with 4 clients: not measured (4 not among --clients)",
              f"- Server memory after the run: VmRSS {memory['VmRSS']:.0f} MB, peak (VmHWM) "
              f"{memory['VmHWM']:.0f} MB",
              "", environment_line(report["env"]), ""]
    return "\n".join(lines)


# ---- command line ------------------------------------------------------------------------


def _clients(text: str) -> list[int]:
    try:
        clients = [int(c) for c in text.split(",") if c.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("clients must be comma-separated integers") from None
    if not clients or min(clients) < 1:
        raise argparse.ArgumentTypeError("clients must be at least 1")
    return clients


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench_http.py",
        description="Measure the real server over HTTP: overhead over the in-process Search, "
                    "and throughput and latency of Searches, Adds and a mix with keep-alive "
                    "clients.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--users", type=int, default=16, help="users pre-loaded over HTTP")
    parser.add_argument("--user-messages", type=int, default=1_000,
                        help="messages of each pre-loaded user")
    parser.add_argument("--clients", type=_clients, default=[1, 4, 16],
                        help="comma-separated numbers of concurrent clients")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each load phase")
    parser.add_argument("--queries", type=int, default=200,
                        help="questions in the overhead measurement")
    parser.add_argument("--rounds", type=int, default=5,
                        help="timed passes over the questions in the overhead measurement")
    parser.add_argument("--max-overhead-ms", type=float, default=1.5,
                        help="pass when HTTP p50 - in-process p50 is at most this")
    parser.add_argument("--min-add-rate", type=int, default=3_000,
                        help="pass when Adds with 4 clients store at least this many msg/s")
    parser.add_argument("--server-arg", action="append", default=[], metavar="FLAG",
                        help="a flag passed on to the server, e.g. --server-arg=--workers=4 "
                             "(repeatable; the targets are judged at the defaults)")
    add_run_args(parser, "http",
                 "where the store and the server log go (in a bench_http/ subdirectory)",
                 "keep the store and the server log")
    args = parser.parse_args(argv)
    require_positive(parser, args, ("users", "user_messages", "queries", "rounds"))
    if args.user_messages < ADD_SIZE:
        parser.error(f"--user-messages must be at least {ADD_SIZE}")
    if args.seconds <= 0:
        parser.error("--seconds must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    return run_and_report("http", parse_args(argv), run, markdown)


if __name__ == "__main__":
    sys.exit(main())
