"""The leaderboard's regime: top_k 100 Searches and Adds on users of long messages.

What it does
------------
1. Generates, seeded, users of long messages (`corpus.long_messages`: 308 words a message on
   average) and of short chat (`corpus.word_messages`: 20 words) at each of `--sizes`.
2. Writes every user through the service (Adds of 20 messages) into one store, and the same
   contents into the files of a naive FTS5 service (`naive_service.py`: one plain FTS5 table per
   user, the service's tokenizer).
3. In-process: a top_k 100 Search against its floor, ONE FTS5 `MATCH ... ORDER BY rank LIMIT
   100` over the same user's index with the same terms, interleaved query by query; the paired
   ratio of the two times.
4. Over HTTP: the real server (`serve`, default settings, one process) and the naive service on
   the same messages, one keep-alive client each, interleaved query by query: p50 and p95.
5. Adds of long messages: in-process, the service at FULL against bare FTS5 inserts (20 messages
   a transaction, WAL, FULL: bench_add's searchable floor), in interleaved blocks; over HTTP,
   three users in parallel, the real server against the naive service; and the same over HTTP
   with short chat messages (`corpus.word_messages`), five times as many.
6. A top_k 10 Search over HTTP on the short-chat user of 10,000 messages (when 10000 is among
   `--sizes`; skipped, and the report says so, otherwise) against ONE FTS5 `MATCH ... LIMIT 10`
   in this process over the same user's file of our store, paired query by query: the whole
   server against the index lookup no Search can skip.

Targets (the leaderboard's regime): Search over HTTP p50 <= 1.8x the naive service; in-process
<= 4x the floor; Adds of long messages >= 35% of bare inserts in-process and >= 30% of the naive
service over HTTP, Adds of short messages >= 60% of it over HTTP; Search top_k 10 over HTTP on
short-10000 p50 <= 2.5x one in-process FTS5 query (the `TARGETS` below). Throughput with several
processes is `bench_http.py --server-arg=--processes=N`.

Usage
-----
    python3 bench/bench_long.py --quick                    # users of 1,000 messages, ~2 min
    python3 bench/bench_long.py --sizes 1000,10000,100000 --workdir /var/tmp/bench --keep

Results go to bench_out/long.json and bench_out/long.md; the verdicts are printed. Exit status 0
when the benchmark ran, whatever the verdicts; 1 on an error. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import benchlib
import naive_service
from bench_add import FloorWriter
from benchlib import (
    REPO_ROOT,
    Client,
    Samples,
    ServerProcess,
    add_run_args,
    environment,
    environment_line,
    log,
    paired_ratio,
    params,
    sizes_arg,
)
from corpus import adds_of, long_messages, word_messages, word_queries

from aml_retriever.engine.held import HELD_BYTES
from aml_retriever.engine.query import plan
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import AddRequest, Message, SearchRequest
from aml_retriever.storage.store import Store

SHAPES: dict[str, Callable[[int, str, int], list[Message]]] = {"long": long_messages, "short": word_messages}
TOP_K = 100
FLOOR_SQL = ("SELECT rowid, bm25(message_index) FROM message_index WHERE message_index MATCH ? "
             "ORDER BY rank LIMIT ?")
# The targets of the Search that keeps what it learned (held state, engine/held.py): over HTTP
# within 1.8x the naive service, in-process within 4x one FTS5 query, top_k 10 within 2.5x one
# in-process query; Adds of long messages 35% of bare inserts; over HTTP, Adds of long messages
# 30% of the naive service and of short ones 60% (an Add derives more from a long message).
TARGETS = {"http_search": 1.8, "inprocess_search": 4.0, "inprocess_add": 0.35, "http_add": 0.30,
           "http_short_add": 0.60, "http_search_top10": 2.5}
SHORT_TOP_K = 10  # a chat agent's usual Search, measured over HTTP against one FTS5 query
SHORT_SIZE = 10_000  # the short-chat user of that measurement: built when --sizes holds it
ADD_USERS = 3  # users written in parallel over HTTP, as the issue measured
# Short Adds over HTTP send this many times --add-messages: a short message takes about a fifth
# of a long one's time, so both runs last about as long.
SHORT_ADD_FACTOR = 5
BUILD_SYNCHRONOUS = "NORMAL"  # building is set-up, not what is measured


def user_id(shape: str, size: int) -> str:
    return f"{shape}-{size}"


# ---- building ----------------------------------------------------------------------------


def build(args: argparse.Namespace, root: Path) -> tuple[Path, Path, dict[str, list[Message]]]:
    """The service's store and the naive service's files, every user written once."""
    shutil.rmtree(root, ignore_errors=True)  # every run writes its users afresh
    service_db, naive_dir = root / "service" / "aml.db", root / "naive"
    service_db.parent.mkdir(parents=True)
    naive_dir.mkdir()
    users = {user_id(shape, size): make(args.seed, user_id(shape, size), size)
             for shape, make in SHAPES.items() for size in args.sizes}
    svc = MemoryService.open(str(service_db), synchronous=BUILD_SYNCHRONOUS)
    try:
        for uid, messages in users.items():
            started = time.perf_counter()
            for request in adds_of(uid, messages):
                svc.add(request)
            naive_write(naive_dir, uid, messages)
            log(f"built {uid}: {len(messages):,} messages in {time.perf_counter() - started:.0f} s")
    finally:
        svc.close()
    return service_db, naive_dir, users


def naive_write(directory: Path, uid: str, messages: Sequence[Message]) -> None:
    """The naive service's own file of this user, written as its /add writes."""
    conn = naive_service.Stores(directory).get(uid)
    conn.execute(f"PRAGMA synchronous = {BUILD_SYNCHRONOUS}")
    for start in range(0, len(messages), 500):
        naive_service.add(conn, {"messages": [{"content": m.content} for m in messages[start:start + 500]]})
    conn.close()


# ---- Search ------------------------------------------------------------------------------


def search_in_process(service_db: Path, uid: str, queries: Sequence[str], rounds: int) -> dict[str, Any]:
    """The service's top_k 100 Search and its floor, interleaved, over the same user file: each
    query asked once (`first`: the service holding what the earlier queries read), then again."""
    first = Samples("service, first ask"), Samples("floor, first ask")
    found = pair(*time_in_process(service_db, [(uid, q) for q in queries], rounds, TOP_K, first))
    return {**found, "first": pair(*first)}


def time_in_process(service_db: Path, questions: Sequence[tuple[str, str]], rounds: int,
                    top_k: int, first: tuple[Samples, Samples] | None = None,
                    held_bytes: int = HELD_BYTES) -> tuple[Samples, Samples]:
    """The service's Search of each (user, query) and its floor, one FTS5 query over that user's
    file with the same terms and top_k, interleaved question by question; the first pass (each
    question asked for the first time, what the service holds of its user read by the earlier
    questions only) into `first` when given."""
    svc = MemoryService(Store(service_db), held_bytes=held_bytes)
    raws: dict[str, sqlite3.Connection] = {}
    try:
        for uid in dict.fromkeys(uid for uid, _ in questions):
            raws[uid] = sqlite3.connect(f"{svc.store.shard_path(uid).as_uri()}?mode=ro", uri=True,
                                        isolation_level=None)
        requests = [SearchRequest(q, uid, top_k, (), None) for uid, q in questions]
        floors = [(plan(q).expression or '""', raws[uid]) for uid, q in questions]
        full, floor = Samples("service"), Samples("floor")
        alternate([(lambda r=r: svc.search(r), lambda e=e, c=c: c.execute(FLOOR_SQL, (e, top_k)).fetchall())
                   for r, (e, c) in zip(requests, floors, strict=True)], full, floor, rounds, first)
    finally:
        for raw in raws.values():
            raw.close()
        svc.close()
    return full, floor


def alternate(calls: Sequence[tuple[Callable[[], object], Callable[[], object]]], first: Samples,
              second: Samples, rounds: int,
              first_pass: tuple[Samples, Samples] | None = None) -> None:
    """Each pair of calls once (both warm; timed into `first_pass` when given: each call made
    for the first time), then `rounds` timed passes, the pair's order alternating every call and
    round, so a burst of noise lands on both paths alike."""
    for i, (a, b) in enumerate(calls):
        if first_pass is None:
            a()
            b()
            continue
        paths = [(first_pass[0], a), (first_pass[1], b)]
        for samples, call in paths if i % 2 == 0 else paths[::-1]:
            started = time.perf_counter_ns()
            call()
            samples.ns.append(time.perf_counter_ns() - started)
    for rnd in range(rounds):
        for i, (a, b) in enumerate(calls):
            paths = [(first, a), (second, b)]
            for samples, call in paths if (i + rnd) % 2 == 0 else paths[::-1]:
                started = time.perf_counter_ns()
                call()
                samples.ns.append(time.perf_counter_ns() - started)


def pair(ours: Samples, reference: Samples) -> dict[str, Any]:
    return {"ours": ours.summary(), "reference": reference.summary(),
            "paired_ratio": paired_ratio(ours, reference),
            "p50_ratio": ours.summary()["p50"] / reference.summary()["p50"]}


def search_over_http(ours: int, naive: int, uid: str, queries: Sequence[str], rounds: int) -> dict[str, Any]:
    """The real server and the naive service, one keep-alive client each, interleaved: each
    query asked once (`first`), then again."""
    first = Samples("ours, first ask"), Samples("naive, first ask")
    found = pair(*time_over_http(ours, naive, [(uid, q) for q in queries], rounds, TOP_K, first))
    return {**found, "first": pair(*first)}


def time_over_http(ours: int, naive: int, questions: Sequence[tuple[str, str]], rounds: int,
                   top_k: int, first: tuple[Samples, Samples] | None = None
                   ) -> tuple[Samples, Samples]:
    """Each (user, query) as a Search to the real server and to the naive service, one keep-alive
    client each, interleaved question by question; the first pass into `first` when given."""
    client, reference = Client(ours), Client(naive)
    samples = Samples("ours"), Samples("naive")
    bodies = [json.dumps({"user_id": uid, "query": q, "top_k": top_k}).encode() for uid, q in questions]
    try:
        alternate([(lambda b=body: _ok(client.call("POST", "/search", b)),
                    lambda b=body: _ok(reference.call("POST", "/search", b))) for body in bodies],
                  *samples, rounds, first)
    finally:
        client.close()
        reference.close()
    return samples


def _ok(answer: tuple[int, bytes]) -> None:
    if answer[0] != 200:
        raise RuntimeError(f"HTTP {answer[0]}: {answer[1][:200]!r}")


def search_http_against_fts(port: int, user_file: Path, uid: str, queries: Sequence[str],
                            rounds: int) -> dict[str, Any]:
    """A top_k 10 Search over HTTP against ONE FTS5 query with the same terms (LIMIT 10) over the
    same user's file of our store, in this process, paired query by query: what the whole server
    (socket, JSON, every signal) costs on top of the one index lookup no Search can skip."""
    client = Client(port)
    raw = sqlite3.connect(f"{user_file.as_uri()}?mode=ro", uri=True, isolation_level=None)
    bodies = [json.dumps({"user_id": uid, "query": q, "top_k": SHORT_TOP_K}).encode() for q in queries]
    expressions = [plan(q).expression or '""' for q in queries]
    http, floor = Samples("HTTP"), Samples("floor")
    first = Samples("HTTP, first ask"), Samples("floor, first ask")
    try:
        alternate([(lambda b=b: _ok(client.call("POST", "/search", b)),
                    lambda e=e: raw.execute(FLOOR_SQL, (e, SHORT_TOP_K)).fetchall())
                   for b, e in zip(bodies, expressions, strict=True)], http, floor, rounds, first)
    finally:
        raw.close()
        client.close()
    return {**pair(http, floor), "first": pair(*first)}


def user_file(service_db: Path, uid: str) -> Path:
    """The file of one user in our store (read before the server holds the store)."""
    svc = MemoryService.open(str(service_db))
    try:
        return svc.store.shard_path(uid)
    finally:
        svc.close()


# ---- Adds --------------------------------------------------------------------------------


def adds_in_process(root: Path, seed: int, count: int, block: int) -> dict[str, Any]:
    """Adds of 20 long messages: the service at FULL against bare FTS5 inserts at FULL, in
    blocks of `block` Adds, the order of the two paths alternating every block."""
    requests = [r for u in range(ADD_USERS)
                for r in adds_of(f"add-{u}", long_messages(seed, f"add-{u}", count // ADD_USERS))]
    svc = MemoryService.open(str(root / "adds-service" / "aml.db"), synchronous="FULL")
    floor = FloorWriter(root / "adds-floor", "FULL", searchable=True)
    spent = {"service": 0.0, "floor": 0.0}
    writers: dict[str, Callable[[AddRequest], Any]] = {"service": svc.add, "floor": floor.add}
    try:
        for start in range(0, len(requests), block):
            chunk = requests[start:start + block]
            order = ["service", "floor"] if (start // block) % 2 == 0 else ["floor", "service"]
            for name in order:
                started = time.perf_counter()
                for request in chunk:
                    writers[name](request)
                spent[name] += time.perf_counter() - started
    finally:
        svc.close()
        floor.close()
    messages = sum(len(r.messages) for r in requests)
    rates = {name: messages / seconds for name, seconds in spent.items()}
    return {"messages": messages, "service_msg_s": rates["service"], "floor_msg_s": rates["floor"],
            "ratio": rates["service"] / rates["floor"]}


def adds_over_http(ours: int, naive: int, seed: int, count: int, shape: str) -> dict[str, Any]:
    """Three users' Adds of messages of `shape` in parallel (a thread and a connection each),
    first to the naive service, then to the real server, then the naive service again (the mean
    of its two runs: the machine's load moves between them)."""
    users = [f"http-add-{shape}-{u}" for u in range(ADD_USERS)]
    bodies = {u: [json.dumps({"request_id": r.request_id, "user_id": u, "session_id": r.session_id,
                              "messages": [{"role": m.role, "content": m.content,
                                            "timestamp": m.timestamp_ms} for m in r.messages]}).encode()
                  for r in adds_of(u, SHAPES[shape](seed, u, count // ADD_USERS))] for u in users}
    messages = sum(len(b) for b in bodies.values()) * 20

    def run(port: int, suffix: str) -> float:
        def send(uid: str) -> None:
            client = Client(port)
            for body in bodies[uid]:
                _ok(client.call("POST", "/add", body.replace(uid.encode(), f"{uid}{suffix}".encode())))
            client.close()

        threads = [threading.Thread(target=send, args=(u,)) for u in users]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return messages / (time.perf_counter() - started)

    naive_first = run(naive, "-a")
    service = run(ours, "")
    naive_rate = (naive_first + run(naive, "-b")) / 2
    return {"messages": messages, "service_msg_s": service, "naive_msg_s": naive_rate,
            "ratio": service / naive_rate}


# ---- the naive service as a process ------------------------------------------------------


class NaiveProcess:
    def __init__(self, directory: Path, log_path: Path) -> None:
        self._log = log_path.open("wb")
        self.log_path = log_path
        self.proc = subprocess.Popen([sys.executable, str(REPO_ROOT / "bench" / "naive_service.py"),
                                      "--dir", str(directory)], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self._log)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = re.search(rb"serving on http://127\.0\.0\.1:(\d+)", log_path.read_bytes())
            if found:
                self.port = int(found.group(1))
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("the naive service did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self._log.close()


# ---- the run -----------------------------------------------------------------------------


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    loadavg = os.getloadavg()[0]
    service_db, naive_dir, users = build(args, root)
    report: dict[str, Any] = {"params": params(args), "search": {}, "targets": TARGETS}
    queries = {uid: word_queries(args.seed, messages, args.queries) for uid, messages in users.items()}
    for uid in users:
        log(f"in-process Search, {uid}")
        report["search"][uid] = {"words_per_message": mean_words(users[uid]),
                                 "in_process": search_in_process(service_db, uid, queries[uid], args.rounds)}
    short = user_id("short", SHORT_SIZE)
    short_file = user_file(service_db, short) if short in users else None
    with ServerProcess(service_db, root / "server.log") as server:
        naive = NaiveProcess(naive_dir, root / "naive.log")
        try:
            # First, while the server holds nothing of the user: its queries are asked again at
            # top_k 100 below.
            if short_file is None:
                report["http_top10"] = {"user": short, "skipped": f"{SHORT_SIZE} is not among --sizes"}
            else:
                log(f"HTTP Search top_k {SHORT_TOP_K} against one FTS5 query, {short}")
                report["http_top10"] = {"user": short, **search_http_against_fts(
                    server.port, short_file, short, queries[short], args.rounds)}
            for uid in users:
                log(f"HTTP Search, {uid}")
                report["search"][uid]["http"] = search_over_http(server.port, naive.port, uid,
                                                                 queries[uid], args.rounds)
            log("HTTP Adds of long messages")
            report["http_adds"] = adds_over_http(server.port, naive.port, args.seed,
                                                 args.add_messages, "long")
            log("HTTP Adds of short messages")
            report["http_short_adds"] = adds_over_http(server.port, naive.port, args.seed,
                                                       SHORT_ADD_FACTOR * args.add_messages, "short")
        finally:
            naive.stop()
    log("in-process Adds of long messages")
    report["in_process_adds"] = adds_in_process(root, args.seed, args.add_messages, args.block)
    report["verdicts"] = verdicts(report)
    report["passed"] = all(v["passed"] for v in report["verdicts"])
    report["environment"] = environment(loadavg)
    return report


def mean_words(messages: Sequence[Message]) -> float:
    return sum(len(m.content.split()) for m in messages) / len(messages)


def verdicts(report: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for uid, result in report["search"].items():
        rows.append(verdict(f"Search top_k 100 over HTTP, {uid}, each query asked once: p50 / "
                            "naive service", result["http"]["first"]["p50_ratio"],
                            TARGETS["http_search"], lower=True))
        rows.append(verdict(f"Search top_k 100 in-process, {uid}, each query asked once: paired "
                            "ratio to one FTS5 query", result["in_process"]["first"]["paired_ratio"],
                            TARGETS["inprocess_search"], lower=True))
    rows.append(verdict("Adds of long messages in-process / bare FTS5 inserts",
                         report["in_process_adds"]["ratio"], TARGETS["inprocess_add"], lower=False))
    rows.append(verdict("Adds of long messages over HTTP / naive service",
                         report["http_adds"]["ratio"], TARGETS["http_add"], lower=False))
    rows.append(verdict("Adds of short messages over HTTP / naive service",
                         report["http_short_adds"]["ratio"], TARGETS["http_short_add"], lower=False))
    top10 = report["http_top10"]
    if "skipped" not in top10:
        rows.append(verdict(f"Search top_k {SHORT_TOP_K} over HTTP, {top10['user']}, each query "
                            "asked once: p50 / one in-process FTS5 query",
                            top10["first"]["p50_ratio"], TARGETS["http_search_top10"], lower=True))
    return rows


def verdict(what: str, value: float, target: float, lower: bool) -> dict[str, Any]:
    passed = value <= target if lower else value >= target
    return {"what": what, "value": value, "target": target, "lower_is_better": lower, "passed": passed}


def markdown(report: dict[str, Any]) -> str:
    lines = ["# Long messages at top_k 100 (`bench_long.py`)", "",
             "| user, queries | words a message | in-process p50 ms: ours / floor | paired ratio | "
             "HTTP p50 ms: ours / naive | HTTP p95 ms: ours / naive | HTTP p50 ratio |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for uid, r in report["search"].items():
        for asked, inp, http in (("asked once", r["in_process"]["first"], r["http"]["first"]),
                                 ("asked again", r["in_process"], r["http"])):
            lines.append(f"| {uid}, {asked} | {r['words_per_message']:.0f} | "
                         f"{inp['ours']['p50']:.2f} / {inp['reference']['p50']:.2f} | "
                         f"{inp['paired_ratio']:.2f}x | "
                         f"{http['ours']['p50']:.2f} / {http['reference']['p50']:.2f} | "
                         f"{http['ours']['p95']:.2f} / {http['reference']['p95']:.2f} | "
                         f"{http['p50_ratio']:.2f}x |")
    ia, ha, hs = report["in_process_adds"], report["http_adds"], report["http_short_adds"]
    lines += ["", "| Adds | ours msg/s | reference msg/s | ratio |", "|---|---:|---:|---:|",
              f"| long, in-process, FULL, 20 a transaction (reference: bare FTS5 inserts) | "
              f"{ia['service_msg_s']:,.0f} | {ia['floor_msg_s']:,.0f} | {ia['ratio']:.1%} |",
              f"| long, over HTTP, {ADD_USERS} users in parallel (reference: naive service) | "
              f"{ha['service_msg_s']:,.0f} | {ha['naive_msg_s']:,.0f} | {ha['ratio']:.1%} |",
              f"| short, over HTTP, {ADD_USERS} users in parallel (reference: naive service) | "
              f"{hs['service_msg_s']:,.0f} | {hs['naive_msg_s']:,.0f} | {hs['ratio']:.1%} |",
              "", *_top10_markdown(report["http_top10"]),
              "", *verdicts_markdown(report["verdicts"])]
    lines += ["", environment_line(report["environment"]), ""]
    return "\n".join(lines)


def verdicts_markdown(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The targets table: ratios as 1.23x (lower is better), shares as 45.6% (higher is better)."""
    lines = ["| target | measured | verdict |", "|---|---:|---|"]
    for v in rows:
        sign = "<=" if v["lower_is_better"] else ">="
        value = f"{v['value']:.2f}x" if v["lower_is_better"] else f"{v['value']:.1%}"
        target = f"{v['target']}x" if v["lower_is_better"] else f"{v['target']:.0%}"
        lines.append(f"| {v['what']} {sign} {target} | {value} | {'pass' if v['passed'] else '**miss**'} |")
    return lines


def _top10_markdown(top10: dict[str, Any]) -> list[str]:
    title = f"Search top_k {SHORT_TOP_K} over HTTP, {top10['user']}, against one in-process FTS5 query"
    if "skipped" in top10:
        return [f"{title}: skipped ({top10['skipped']})."]
    first = top10["first"]
    lines = [f"| {title} | p50 ms | p95 ms |", "|---|---:|---:|"]
    for asked, r in (("each query asked once", first), ("asked again", top10)):
        lines += [f"| Search over HTTP, {asked} | {r['ours']['p50']:.2f} | {r['ours']['p95']:.2f} |",
                  f"| one FTS5 query, LIMIT {SHORT_TOP_K}, same terms, {asked} | "
                  f"{r['reference']['p50']:.2f} | {r['reference']['p95']:.2f} |"]
    return [*lines, "", f"HTTP / FTS5 query, each query asked once: {first['p50_ratio']:.2f}x at "
            f"p50, {first['paired_ratio']:.2f}x paired median; asked again: "
            f"{top10['p50_ratio']:.2f}x, {top10['paired_ratio']:.2f}x."]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=sizes_arg, default=[1000, 10000],
                        help="messages per user, comma-separated (default 1000,10000)")
    parser.add_argument("--queries", type=int, default=50, help="queries per user (default 50)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over the queries (default 3)")
    parser.add_argument("--add-messages", type=int, default=1200,
                        help="long messages written by each Add measurement (default 1,200)")
    parser.add_argument("--block", type=int, default=5, help="Adds per interleaved block (default 5)")
    parser.add_argument("--quick", action="store_true", help="users of 1,000 messages, fewer queries")
    add_run_args(parser, "long", "where the stores are written", "keep the stores")
    args = parser.parse_args(argv)
    benchlib.require_positive(parser, args, ("queries", "rounds", "add_messages", "block"))
    if args.quick:
        args.sizes, args.queries, args.rounds, args.add_messages = [1000], 30, 2, 600
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    benchlib.run_and_report("long", args, run, markdown)
    return 0  # the verdicts are printed; only an error (an exception) fails the run


if __name__ == "__main__":
    sys.exit(main())
