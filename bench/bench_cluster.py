"""What do user-sharded servers behind HAProxy serve, and what does HAProxy add to a request?

What it does
------------
1. Starts two clusters with the real tools (`aml_retriever.cluster.control`: `serve` shards behind
   HAProxy, default server settings, an API key): one of 1 shard and one of 2 shards, on free
   loopback ports, each over fresh stores.
2. Pre-loads the same `--users` chat users (`corpus.conversation`) of `--user-messages` messages
   into both, through HAProxy, in 20-message Adds. The users are chosen so that half live on each
   shard of the 2-shard cluster (a fair split: the question is what a second shard adds, not how
   lucky the hash is with 16 names).
3. HAProxy's added latency, on the 1-shard cluster, one keep-alive client, interleaved query by
   query (the order alternates every query and round): the same Search sent straight to the
   shard's port and through HAProxy. Added = p50 (and p99) through HAProxy - straight.
4. Throughput, from ONE separate client process with `--clients` threads (16), each a keep-alive
   client of HAProxy with its own connection, for `--seconds` each: Search only (questions about
   the pre-loaded users), and Add only (20-message Adds, each client to a user of its own, half
   of them on each shard of the 2-shard cluster). The 1-shard and 2-shard phases alternate for
   `--rounds` rounds; the ratio of each round is reported and their median judged. Reports
   req/s, p50/p99, and the CPU the shards, HAProxy and the client used (in cores).

5. The router's CPU per request by body shape, on the 1-shard cluster: the bodies (each ~1 MiB,
   user_id the last key, sent without the API key, as an attacker would) that cost the router's
   user-id reader most, and a plain Search, each sent `--shape-requests` times (50 times as many
   of the small one); HAProxy's CPU time (/proc) before and after, divided by the requests
   (docs/RELIABILITY.md, "The router under attack").

Why one client process with threads: the machine has 2 cores, which the shards need; see
bench_http.py. Both clusters stay up throughout; the one not measured is idle.

Targets (the issue's): HAProxy adds <= 1 ms at p50 to a Search (`--max-added-ms`); 2 shards give
>= 1.6x the Searches and the Adds a second of 1 shard at 16 clients (`--min-ratio`); no body
shape costs HAProxy more than 10 ms of CPU (`--max-body-cpu-ms`; it was 90-290 ms).

Needs HAProxy 2.6 or later (`apt-get install haproxy`); without it the benchmark says so and
exits 0 with nothing measured.

Usage
-----
    python3 bench/bench_cluster.py                     # 16 users x 1,000 messages, 10 s phases
    python3 bench/bench_cluster.py --users 8 --user-messages 200 --seconds 3 --rounds 1

Results go to `bench_out/cluster.json` and `bench_out/cluster.md`; progress to stderr. Exit
status: 0 when every target is met (or HAProxy is missing), 1 otherwise, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import multiprocessing
import os
import socket
import statistics
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from bench_http import add_bodies, search_body
from benchlib import (
    API_KEY,
    SERVE_TIMEOUT_S,
    Client,
    Samples,
    add_run_args,
    environment,
    environment_line,
    log,
    params,
    process_cpu_seconds,
    require_positive,
    run_and_report,
)
from corpus import ADD_SIZE, chat_questions, generated

from aml_retriever.cluster.control import Layout, Spec, start, stop
from aml_retriever.cluster.haproxy import version
from aml_retriever.cluster.sharding import placement, shard_of
from aml_retriever.common.errors import ClusterError

QUESTIONS_PER_USER = 50
WARMUP_REQUESTS = 3
PRELOAD_CLIENTS = 4
# Add bodies a client prepares before its window, per second of the window: more than a client
# gets answered (16 clients together were answered under 300 Adds/s by one process, so two
# shards give each client well under 40 a second).
ADDS_PER_SECOND_BOUND = 40
SHARD_COUNTS = (1, 2)


@dataclass(frozen=True)
class Load:
    """One timed load through a router."""
    workload: str  # "search" or "add"
    port: int
    seconds: float
    searches: tuple[tuple[str, str], ...]
    add_users: tuple[str, ...]  # one per client
    seed: int


def _client(load: Load, index: int, start_at: threading.Barrier, out: dict[str, Any],
            lock: threading.Lock, window: dict[str, float]) -> None:
    client = Client(load.port)
    bodies = [search_body(u, q) for u, q in load.searches]
    offset = index * len(bodies) // len(load.add_users)
    adds = add_bodies(load.add_users[index], load.seed + 1000 * index + int(load.seconds * 7))
    ready = deque(islice(adds, int(load.seconds * ADDS_PER_SECOND_BOUND) + 10)
                  if load.workload == "add" else ())
    ms: list[float] = []
    statuses: Counter[int] = Counter()

    def one(number: int) -> int:
        if load.workload == "search":
            path, body = "/search", bodies[(offset + number) % len(bodies)]
        else:
            path, body = "/add", ready.popleft() if ready else next(adds)
        try:
            status, _ = client.call("POST", path, body)
        except (http.client.HTTPException, OSError):
            client.close()
            status = 0
        return status

    try:
        for number in range(WARMUP_REQUESTS):
            one(number)
        start_at.wait(timeout=SERVE_TIMEOUT_S)
        number = WARMUP_REQUESTS
        while time.perf_counter() < window["started"] + load.seconds:
            began = time.perf_counter_ns()
            statuses[one(number)] += 1
            ms.append((time.perf_counter_ns() - began) / 1e6)
            number += 1
    finally:
        client.close()
        with lock:
            out["ms"] += ms
            out["statuses"].update(statuses)


def run_load(load: Load, router: int, shards: tuple[int, ...]) -> dict[str, Any]:
    """In the client process: the load's threads, and the CPU every process used meanwhile."""
    out: dict[str, Any] = {"ms": [], "statuses": Counter()}
    lock = threading.Lock()
    window: dict[str, float] = {}

    def begin() -> None:
        window["started"] = time.perf_counter()
        window["shards_cpu"] = sum(process_cpu_seconds(p) for p in shards)
        window["router_cpu"] = process_cpu_seconds(router)
        window["client_cpu"] = time.process_time()

    clients = len(load.add_users)
    barrier = threading.Barrier(clients, action=begin)
    threads = [threading.Thread(target=_client, args=(load, i, barrier, out, lock, window))
               for i in range(clients)]
    gc.disable()
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        gc.enable()
    elapsed = time.perf_counter() - window["started"]
    summary = Samples(load.workload, [int(m * 1e6) for m in out["ms"]]).summary()
    return {"workload": load.workload, "elapsed_s": elapsed, "requests": len(out["ms"]),
            "req_per_s": len(out["ms"]) / elapsed, "p50": summary["p50"], "p99": summary["p99"],
            "errors": sum(n for s, n in out["statuses"].items() if s != 200),
            "shard_cores": (sum(process_cpu_seconds(p) for p in shards)
                            - window["shards_cpu"]) / elapsed,
            "router_cores": (process_cpu_seconds(router) - window["router_cpu"]) / elapsed,
            "client_cores": (time.process_time() - window["client_cpu"]) / elapsed}


def preload(port: int, users: Sequence[tuple[str, int]], messages: int) -> dict[str, Any]:
    """Every Add of every user, through the router, from a few threads."""
    statuses: Counter[int] = Counter()
    lock = threading.Lock()

    def work(part: Sequence[tuple[str, int]]) -> None:
        client = Client(port)
        try:
            for user, seed in part:
                for body in islice(add_bodies(user, seed), messages // ADD_SIZE):
                    status, _ = client.call("POST", "/add", body)
                    with lock:
                        statuses[status] += 1
        finally:
            client.close()

    started = time.perf_counter()
    threads = [threading.Thread(target=work, args=(users[i::PRELOAD_CLIENTS],))
               for i in range(PRELOAD_CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"seconds": time.perf_counter() - started, "statuses": dict(statuses)}


def added_latency(router: int, shard: int, searches: Sequence[tuple[str, str]],
                  rounds: int) -> dict[str, Samples]:
    """The same Searches straight to the shard and through HAProxy, interleaved."""
    paths = {"straight to the shard": Client(shard), "through HAProxy": Client(router)}
    samples = {name: Samples(name) for name in paths}
    bodies = [search_body(u, q) for u, q in searches]
    try:
        for body in bodies:  # warm-up: connections open, pages cached
            for client in paths.values():
                client.call("POST", "/search", body)
        gc.collect()
        gc.disable()
        try:
            for round_no in range(rounds):
                for i, body in enumerate(bodies):
                    order = list(paths.items())
                    if (i + round_no) % 2:
                        order.reverse()
                    for name, client in order:
                        began = time.perf_counter_ns()
                        client.call("POST", "/search", body)
                        samples[name].ns.append(time.perf_counter_ns() - began)
        finally:
            gc.enable()
    finally:
        for client in paths.values():
            client.close()
    return samples


# ---- the router's CPU by body shape -------------------------------------------------------------


def body_shapes(user: str, limit: int) -> dict[str, bytes]:
    """A plain Search, then bodies of about `limit` bytes (max_body_bytes, less room) with
    user_id the last key, in the shapes that cost the router's user-id reader most. Searches of
    top_k 0: a shard that reads one refuses it."""
    size = limit - 4096
    named = json.dumps(user)

    def last(head: str, unit: str, tail: str) -> bytes:
        head = '{"top_k": 0, "query": "\\u00e9", ' + head
        tail = tail + ', "user_id": ' + named + "}"
        return (head + unit * ((size - len(head) - len(tail)) // len(unit)) + tail).encode()

    half = (size - 200) // 2
    return {
        "plain Search": json.dumps({"user_id": user, "query": "kite", "top_k": 1}).encode(),
        "~1 MiB of raw text": last('"q": "', "kite ", '"'),
        "\\u escapes": last('"q": "', "\\u4e2d", '"'),
        "escaped quotes": last('"q": "', '\\"', '"'),
        "a run of backslashes": last('"q": "', "\\\\", '\\""'),
        "tiny strings": last('"q": [', '"",', '""]'),
        "deep nesting": last('"q": ', "[" * half + "]" * half, ""),
        "nested user_id keys": last('"messages": [', '{"user_id": "decoy"},', "{}]"),
        '"user_id" as values': last('"a": "user_id", "b": [0', ', "user_id"', "]"),
        "escaped keys": last('"q": 0', ', "\\u0061\\u0062\\u0063": 0', ""),
        "tiny numbers": last('"q": [', "0,", "0]"),
    }


def router_cpu_by_body(router: int, router_pid: int, limit: int,
                       requests: int) -> dict[str, dict[str, Any]]:
    """HAProxy's CPU time per request for each body shape, sent without the API key on a
    connection of its own, and who answered (HAProxy itself, or the shard)."""
    def send(body: bytes) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", router, timeout=60)
        try:
            conn.request("POST", "/search", body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            response.read()
            return response.status, "shard" if response.getheader("Server") else "HAProxy"
        finally:
            conn.close()

    found = {}
    for name, body in body_shapes("bystander", limit).items():
        count = requests * 50 if len(body) < 10_000 else requests
        status, by = send(body)
        before = process_cpu_seconds(router_pid)
        for _ in range(count):
            send(body)
        found[name] = {"bytes": len(body), "status": status, "answered_by": by,
                       "requests": count,
                       "cpu_ms": (process_cpu_seconds(router_pid) - before) * 1000 / count}
        log(f"  {name}: {len(body):,} bytes, {status} from {by}, "
            f"{found[name]['cpu_ms']:.2f} ms of HAProxy's CPU a request")
    return found


def balanced_users(count: int) -> list[str]:
    """`count` user ids, half on each shard of a 2-shard cluster, alternating."""
    buckets = placement(["shard-0", "shard-1"])
    halves: dict[str, list[str]] = {"shard-0": [], "shard-1": []}
    candidate = 0
    while min(len(h) for h in halves.values()) < (count + 1) // 2:
        user = f"user-{candidate:04d}"
        halves[shard_of(user, buckets)].append(user)
        candidate += 1
    return [u for pair in zip(halves["shard-0"], halves["shard-1"], strict=False) for u in pair][:count]


def questions(users: Sequence[str], seed: int, messages: int) -> list[tuple[str, str]]:
    per_user = []
    for number, user in enumerate(users):
        source = generated(seed + number, min(messages, 1_000))
        per_user.append([(user, q) for _, q in chat_questions(seed + number, source,
                                                               QUESTIONS_PER_USER)])
    return [pair for group in zip(*per_user, strict=False) for pair in group]


def _pids(layout: Layout, spec: Spec) -> tuple[int, tuple[int, ...]]:
    """HAProxy's pid and the shards'."""
    def pid(path: Path) -> int:
        return int(path.read_text().split()[0])

    return pid(layout.router_pid), tuple(pid(layout.pid(s.name)) for s in spec.shards)


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    loadavg_start = os.getloadavg()[0]
    report: dict[str, Any] = {"params": params(args)}
    try:
        report["haproxy"] = ".".join(map(str, version()))
    except ClusterError as exc:
        log(f"not measured: {exc.message}")
        return {**report, "skipped": exc.message, "passed": True,
                "env": environment(loadavg_start)}
    root.mkdir(parents=True, exist_ok=True)
    settings = root / "settings.json"
    settings.write_text(json.dumps({"api_key": API_KEY, **dict(args.setting)}))
    # Pre-loaded users first, then each round's Add clients: all new users, half on each shard.
    every = balanced_users(args.users + args.clients * args.rounds)
    users = every[:args.users]
    seeds = [(user, args.seed + number) for number, user in enumerate(users)]
    searches = questions(users, args.seed, args.user_messages)
    layouts = {n: Layout(root / f"shards-{n}") for n in SHARD_COUNTS}
    try:
        specs = {}
        for n, layout in layouts.items():
            port = _free_port()
            start(layout, n, port, "127.0.0.1", str(settings))
            specs[n] = Spec.read(layout.spec)
            log(f"{n} shard(s) behind HAProxy on port {port}; pre-loading {args.users} users x "
                f"{args.user_messages:,} messages")
            report.setdefault("preload", {})[n] = preload(port, seeds, args.user_messages)
        one = specs[1]
        log(f"added latency: {args.rounds * 2} rounds x {args.queries} questions x 2 paths")
        samples = added_latency(one.port, one.shards[0].port, searches[:args.queries],
                                args.rounds * 2)
        report["latency_ms"] = {name: s.summary() for name, s in samples.items()}
        report["added_paired_ms"] = statistics.median(
            (t - d) / 1e6 for t, d in zip(samples["through HAProxy"].ns,
                                          samples["straight to the shard"].ns, strict=True))
        log(f"HAProxy's CPU by body shape, {args.shape_requests} requests each")
        limit = int(dict(args.setting).get("max_body_bytes", 1_048_576))
        report["router_cpu_by_body"] = router_cpu_by_body(
            one.port, _pids(layouts[1], one)[0], limit, args.shape_requests)
        context = multiprocessing.get_context("spawn")
        report["phases"] = []
        with context.Pool(1) as pool:
            for round_no in range(args.rounds):
                for workload in ("search", "add"):
                    for n in SHARD_COUNTS:
                        first = args.users + round_no * args.clients
                        load = Load(workload, specs[n].port, args.seconds, tuple(searches),
                                    tuple(every[first:first + args.clients]), args.seed)
                        log(f"round {round_no + 1}: {workload}, {n} shard(s), "
                            f"{args.clients} clients, {args.seconds:g} s")
                        row = pool.apply(run_load, (load, *_pids(layouts[n], specs[n])))
                        row.update(shards=n, round=round_no + 1)
                        report["phases"].append(row)
                        log(f"  {row['req_per_s']:,.0f} req/s, p50 {row['p50']:.1f} ms, "
                            f"shards {row['shard_cores']:.2f} cores, HAProxy "
                            f"{row['router_cores']:.2f}, client {row['client_cores']:.2f}")
    finally:
        for layout in layouts.values():
            if layout.spec.exists():
                stop(layout)
    return judge(report, args, loadavg_start)


def judge(report: dict[str, Any], args: argparse.Namespace, loadavg_start: float) -> dict[str, Any]:
    latency = report["latency_ms"]
    through, straight = latency["through HAProxy"], latency["straight to the shard"]
    report["added_ms"] = {"p50": through["p50"] - straight["p50"],
                          "p99": through["p99"] - straight["p99"]}
    ratios: dict[str, list[float]] = {"search": [], "add": []}
    for round_no in range(1, args.rounds + 1):
        for workload in ratios:
            rate = {row["shards"]: row["req_per_s"] for row in report["phases"]
                    if row["round"] == round_no and row["workload"] == workload}
            ratios[workload].append(rate[2] / rate[1])
    report["ratios"] = {w: {"rounds": r, "median": statistics.median(r)} for w, r in ratios.items()}
    report["errors"] = sum(row["errors"] for row in report["phases"])
    report["worst_body_cpu_ms"] = max(s["cpu_ms"] for s in report["router_cpu_by_body"].values())
    report["verdicts"] = {
        "added_p50": report["added_ms"]["p50"] <= args.max_added_ms,
        "body_cpu": report["worst_body_cpu_ms"] <= args.max_body_cpu_ms,
        **{f"{w}_ratio": r["median"] >= args.min_ratio for w, r in report["ratios"].items()}}
    report["env"] = environment(loadavg_start)
    report["passed"] = all(report["verdicts"].values()) and report["errors"] == 0
    return report


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---- reporting ---------------------------------------------------------------------------------


def markdown(report: dict[str, Any]) -> str:
    p = report["params"]
    if "skipped" in report:
        return f"# Cluster behind HAProxy\n\nNot measured: {report['skipped']}.\n"
    lines = [
        "# User-sharded servers behind HAProxy: throughput and added latency",
        "",
        f"- HAProxy {report['haproxy']}, rendered from deploy/haproxy.cfg; shards: `serve` with "
        f"default settings (synchronous=FULL, 16 workers, 2 active requests) and an API key"
        + "".join(f", {name}={value}" for name, value in p["setting"]),
        f"- {p['users']} users x {p['user_messages']:,} messages pre-loaded through HAProxy, half "
        "on each shard of the 2-shard cluster; Searches top_k 10 about them; Adds of "
        f"{ADD_SIZE} messages, each client to a user of its own (half on each shard)",
        f"- {p['clients']} keep-alive clients from one client process, {p['seconds']:g} s per phase, "
        f"1 and 2 shards alternating, {p['rounds']} round(s)",
        "",
        "## Added latency (1 shard, 1 client, the same Search straight and through HAProxy)",
        "",
        "| path | p50 ms | p95 ms | p99 ms | samples |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, s in report["latency_ms"].items():
        lines.append(f"| {name} | {s['p50']:.3f} | {s['p95']:.3f} | {s['p99']:.3f} | "
                     f"{s['samples']} |")
    added, v = report["added_ms"], report["verdicts"]
    lines += ["", f"Added by HAProxy: **{added['p50']:.3f} ms at p50** (target <= "
              f"{p['max_added_ms']:g} ms: **{'PASS' if v['added_p50'] else 'FAIL'}**), "
              f"{added['p99']:.3f} ms at p99; the paired median of the same Search's two times "
              f"differs by {report['added_paired_ms']:.3f} ms.", "",
              "## HAProxy's CPU by body shape (1 shard, no API key, user_id the last key)", "",
              "| body | bytes | answer | HAProxy CPU ms a request |", "|---|---:|---|---:|"]
    for name, s in report["router_cpu_by_body"].items():
        lines.append(f"| {name} | {s['bytes']:,} | {s['status']} from {s['answered_by']} | "
                     f"{s['cpu_ms']:.2f} |")
    lines += ["", f"Worst: **{report['worst_body_cpu_ms']:.2f} ms** (target <= "
              f"{p['max_body_cpu_ms']:g} ms: **{'PASS' if v['body_cpu'] else 'FAIL'}**).", "",
              f"## Throughput ({p['clients']} clients through HAProxy)", "",
              "| round | workload | shards | req/s | p50 ms | p99 ms | errors | shard cores | "
              "HAProxy cores (ms a request) | client cores |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in report["phases"]:
        per_request = row["router_cores"] * 1000 / row["req_per_s"] if row["req_per_s"] else 0
        lines.append(f"| {row['round']} | {row['workload']} | {row['shards']} | "
                     f"{row['req_per_s']:,.0f} | {row['p50']:.1f} | {row['p99']:.1f} | "
                     f"{row['errors']} | {row['shard_cores']:.2f} | {row['router_cores']:.2f} "
                     f"({per_request:.3f}) | {row['client_cores']:.2f} |")
    lines.append("")
    for workload, r in report["ratios"].items():
        verdict = "PASS" if v[f"{workload}_ratio"] else "FAIL"
        lines.append(f"- {workload.capitalize()}: 2 shards / 1 shard = **{r['median']:.2f}x** "
                     f"(rounds: {', '.join(f'{x:.2f}' for x in r['rounds'])}; target >= "
                     f"{p['min_ratio']:g}x: **{verdict}**)")
    lines += ["", environment_line(report["env"]), ""]
    return "\n".join(lines)


def _setting(text: str) -> tuple[str, str]:
    name, _, value = text.partition("=")
    if not name or not value:
        raise argparse.ArgumentTypeError("a setting is NAME=VALUE")
    return name, value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench_cluster.py", description="Measure shards behind HAProxy: Search and Add "
        "throughput with 1 and 2 shards, and the latency HAProxy adds.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--users", type=int, default=16, help="users pre-loaded")
    parser.add_argument("--user-messages", type=int, default=1_000,
                        help="messages of each pre-loaded user")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each load phase")
    parser.add_argument("--rounds", type=int, default=2,
                        help="rounds of (1 shard, 2 shards) phases; the median ratio is judged")
    parser.add_argument("--queries", type=int, default=200,
                        help="questions in the added-latency measurement")
    parser.add_argument("--max-added-ms", type=float, default=1.0,
                        help="pass when HAProxy adds at most this at p50")
    parser.add_argument("--min-ratio", type=float, default=1.6,
                        help="pass when 2 shards serve at least this times 1 shard")
    parser.add_argument("--shape-requests", type=int, default=20,
                        help="requests of each ~1 MiB body shape in the router-CPU measurement")
    parser.add_argument("--max-body-cpu-ms", type=float, default=10.0,
                        help="pass when no body shape costs HAProxy more CPU than this a request")
    parser.add_argument("--setting", action="append", default=[], type=_setting, metavar="NAME=VALUE",
                        help="a server setting every shard runs with, e.g. synchronous=NORMAL "
                             "(repeatable; the targets are judged at the defaults)")
    add_run_args(parser, "cluster", "where the clusters go (in a bench_cluster/ subdirectory)",
                 "keep the clusters' stores and logs")
    args = parser.parse_args(argv)
    require_positive(parser, args, ("users", "user_messages", "clients", "rounds", "queries",
                                    "shape_requests"))
    if args.user_messages < ADD_SIZE:
        parser.error(f"--user-messages must be at least {ADD_SIZE}")
    if args.seconds <= 0:
        parser.error("--seconds must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    return run_and_report("cluster", parse_args(argv), run, markdown)


if __name__ == "__main__":
    sys.exit(main())
