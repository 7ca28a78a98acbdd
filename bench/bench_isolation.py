"""Does one user's Search slow down when the store holds many OTHER users? This measures it.

What it does
------------
1. Generates deterministic synthetic messages (`corpus.word_messages`: seeded `random`; a
   vocabulary of a few thousand made-up words, common English words, names and numbers; ~20
   words a message). No external data, so every run on every machine writes the same bytes.
2. Builds two stores through the public in-process API (`MemoryService.add`, 20-message Adds):
   - "crowded": `--others` messages (default 1,000,000) of other users of ~1,000 messages each
     (`corpus.others_store`: built once in parallel processes and shared with the other
     benchmarks, its files linked in), plus the target user (default 1,000 messages);
   - "alone": the same target user, written by the same Adds in the same order, and nobody else.
3. Runs the same queries (words taken from the target user's messages, 3-6 words each) against
   the target user in both stores, plus the floor: one raw FTS5 query on the target user's file,
   opened directly with sqlite3. The four paths are interleaved query by query, in an order that
   rotates every query and every round, so a burst of machine noise lands on all of them alike.
4. Checks that every query returns identical results (ids, order, scores, content) from both
   stores, and reports p50/p95/p99 latency of each path and the ratio crowded / alone.

Why
---
The store keeps each user in their own SQLite file (see aml_retriever/store.py), so a user's
Search should cost what an FTS5 query over that user's own messages costs, whatever else the
store holds. This benchmark is the evidence: if the crowded p50 stays within `--max-ratio`
(default 1.5x) of the alone p50, and the results are identical, other users neither slow down
nor change a user's Search. A second, smaller measurement reopens the user's connection before
every query, so the connection cache (which hides per-file open costs) is taken out of the picture
too.

Usage
-----
    python3 bench/bench_isolation.py                     # 1M other messages (a few minutes)
    python3 bench/bench_isolation.py --others 50000      # a quick run
    python3 bench/bench_isolation.py --workdir /var/tmp/bench --keep   # keep, reuse next run

Results go to `bench_out/isolation.json` and `bench_out/isolation.md` (git-ignored) and the
Markdown table is printed. Exit status: 0 when results are identical and the p50 ratio is within
`--max-ratio`, 1 otherwise, 2 on a usage error. Standard library only.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib import (
    Samples,
    add_run_args,
    environment,
    environment_line,
    log,
    paired_ratio,
    params,
    require_positive,
    run_and_report,
)
from corpus import (
    ADD_SIZE,
    OthersPlan,
    others_store,
    prepare_store,
    shared_dir,
    store_bytes,
    word_adds,
    word_messages,
    word_queries,
    write_adds,
)

from aml_retriever.analysis.tokenizer import match_expression, query_terms
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import SearchRequest
from aml_retriever.storage.store import Store

TARGET_USER = "target-user"
# The floor: FTS5 alone, no service code around it (as given in the brief; bm25 with default weights).
FLOOR_SQL = ("SELECT rowid, bm25(message_index) FROM message_index WHERE message_index MATCH ? "
             "ORDER BY 2 LIMIT 10")

# ---- building the stores -----------------------------------------------------------------


def build_or_reuse(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """Both stores under `root`, each reused when a kept build of the same plan is there: the
    crowded one links the other users of the shared store of `--others` messages (built once,
    in parallel) and writes the target beside them; the alone one holds the target only."""
    others = None
    if args.others:
        others = others_store(shared_dir(root), OthersPlan(args.seed, args.others,
                                                           args.messages_per_other), args.jobs)
    target = {TARGET_USER: {"generator": "words", "seed": args.seed,
                            "messages": args.user_messages}}

    def write(svc: MemoryService, user_id: str) -> dict[str, Any]:
        return write_adds(svc, word_adds(args.seed, user_id, args.user_messages), user_id)

    log("crowded store: the other users and the target")
    crowded = prepare_store(root / "crowded" / "aml.db", others, target, write)
    log("alone store: the target only")
    alone = prepare_store(root / "alone" / "aml.db", None, target, write)
    return {"others": others.build if others else None, "crowded": crowded[TARGET_USER],
            "alone": alone[TARGET_USER]}


# ---- measuring ---------------------------------------------------------------------------


@dataclass
class Subject:
    """One store as the benchmark sees it: the service, and a raw connection for the floor."""
    name: str
    store: Store
    svc: MemoryService
    raw: sqlite3.Connection

    @classmethod
    def open(cls, name: str, path: Path) -> Subject:
        store = Store(path, synchronous="NORMAL")
        shard = store.shard_path(TARGET_USER)
        raw = sqlite3.connect(f"{shard.as_uri()}?mode=ro", uri=True, isolation_level=None)
        return cls(name, store, MemoryService(store), raw)

    def search(self, query: str, top_k: int) -> list[dict[str, Any]]:
        return self.svc.search(SearchRequest(query, TARGET_USER, top_k, (), None))["data"]

    def floor(self, expression: str) -> list[tuple[int, float]]:
        return self.raw.execute(FLOOR_SQL, (expression,)).fetchall()

    def close(self) -> None:
        self.raw.close()
        self.store.close()


def _timed(call: Callable[[], object]) -> int:
    started = time.perf_counter_ns()
    call()
    return time.perf_counter_ns() - started


def compare_results(alone: Subject, crowded: Subject, queries: Sequence[str],
                    top_k: int) -> dict[str, Any]:
    """Every query's full result list (id, order, score, content, metadata) from both stores, and
    the raw FTS5 rows from both files, compared for exact equality. Doubles as the warm-up pass."""
    differing: list[str] = []
    floor_differing = 0
    results = empty = 0
    for query in queries:
        a, c = alone.search(query, top_k), crowded.search(query, top_k)
        if a != c:
            differing.append(query)
        results += len(a)
        empty += not a
        expression = match_expression(query_terms(query))
        if expression is not None and alone.floor(expression) != crowded.floor(expression):
            floor_differing += 1
    return {"identical": not differing and not floor_differing, "queries": len(queries),
            "queries_differing": len(differing), "examples_differing": differing[:5],
            "floor_queries_differing": floor_differing, "results_compared": results,
            "queries_without_results": empty}


def measure_warm(alone: Subject, crowded: Subject, queries: Sequence[str], top_k: int,
                 rounds: int) -> dict[str, Samples]:
    """The main measurement, connections cached as in a running server. For every query the four
    paths run back to back, their order rotated by query and round, so none is always first
    (after a cache miss) or last, and slow moments are shared out evenly."""
    expressions = [match_expression(query_terms(q)) or '""' for q in queries]
    paths: list[tuple[Samples, Callable[[int], object]]] = [
        (Samples("alone: svc.search"), lambda i: alone.search(queries[i], top_k)),
        (Samples("crowded: svc.search"), lambda i: crowded.search(queries[i], top_k)),
        (Samples("floor: raw FTS5, alone file"), lambda i: alone.floor(expressions[i])),
        (Samples("floor: raw FTS5, crowded file"), lambda i: crowded.floor(expressions[i])),
    ]
    for round_no in range(rounds):
        for i in range(len(queries)):
            shift = (i + round_no) % len(paths)
            for samples, call in paths[shift:] + paths[:shift]:
                samples.ns.append(_timed(lambda call=call, i=i: call(i)))
    return {s.label: s for s, _ in paths}


def measure_reopen(alone: Subject, crowded: Subject, queries: Sequence[str], top_k: int,
                   rounds: int) -> dict[str, Samples]:
    """Secondary: the connection is closed before every query, so each Search also finds the
    user's file among the others and opens it. Shows what a connection-cache miss costs, and
    whether that cost grows with the number of files in the store."""
    subjects = [(Samples("alone: close + svc.search"), alone),
                (Samples("crowded: close + svc.search"), crowded)]
    for round_no in range(rounds):
        for i, query in enumerate(queries):
            order = subjects if (i + round_no) % 2 == 0 else subjects[::-1]
            for samples, subject in order:
                subject.store.close()
                samples.ns.append(_timed(lambda s=subject, q=query: s.search(q, top_k)))
    return {s.label: s for s, _ in subjects}


# ---- reporting ---------------------------------------------------------------------------


def _row(label: str, stats: dict[str, float | int]) -> str:
    return (f"| {label} | {stats['p50']:.3f} | {stats['p95']:.3f} | {stats['p99']:.3f} | "
            f"{stats['mean']:.3f} | {stats['samples']} |")


def _ratio_row(label: str, crowded: dict[str, Any], alone: dict[str, Any]) -> str:
    return (f"| {label} | {crowded['p50'] / alone['p50']:.2f}x | {crowded['p95'] / alone['p95']:.2f}x | "
            f"{crowded['p99'] / alone['p99']:.2f}x | {crowded['mean'] / alone['mean']:.2f}x | |")


def markdown(report: dict[str, Any]) -> str:
    p, build, stores, check = (report["params"], report["build"], report["stores"],
                               report["results_check"])
    warm, reopen = report["latency_ms"]["warm"], report["latency_ms"]["reopen"]
    others = build["others"]
    others_text = (f"other users built once for every benchmark (svc.add, {ADD_SIZE}-message "
                   f"Adds, synchronous=NORMAL, {others['jobs']} processes): "
                   f"{others['seconds']:,.1f} s, {others['messages_per_second']:,} msg/s"
                   f"{', reused from a kept build' if others.get('reused') else ''}; "
                   if others else "")
    lines = [
        "# Search isolation: one user's Search, alone vs among other users",
        "",
        f"- Crowded store: {stores['crowded']['users']:,} users, {stores['crowded']['messages']:,} "
        f"messages ({p['others']:,} of other users + {p['user_messages']:,} of the target), "
        f"{stores['crowded']['bytes'] / 1e6:,.0f} MB on disk",
        f"- Alone store: {stores['alone']['users']:,} user, {stores['alone']['messages']:,} "
        f"messages, {stores['alone']['bytes'] / 1e6:,.1f} MB on disk",
        f"- Build: {others_text}the target written into each store after the others "
        f"(svc.add), {build['crowded']['seconds']:,.1f} s crowded, "
        f"{build['alone']['seconds']:,.1f} s alone"
        f"{' (reused)' if build['crowded'].get('reused') else ''}",
        f"- Queries: {p['queries']} (3-6 words from the target's messages), top_k {p['top_k']}, "
        f"{p['rounds']} timed rounds after a warm-up pass, paths interleaved per query",
        "",
        "## Latency, connections cached (as in a running server)",
        "",
        "| path | p50 ms | p95 ms | p99 ms | mean ms | samples |",
        "|---|---:|---:|---:|---:|---:|",
        _row("alone: svc.search", warm["alone: svc.search"]),
        _row("crowded: svc.search", warm["crowded: svc.search"]),
        _ratio_row("**ratio crowded / alone**", warm["crowded: svc.search"],
                   warm["alone: svc.search"]),
        _row("floor: raw FTS5, alone file", warm["floor: raw FTS5, alone file"]),
        _row("floor: raw FTS5, crowded file", warm["floor: raw FTS5, crowded file"]),
        "",
        f"Paired median ratio (same query, same round) crowded / alone: "
        f"{report['paired_ratio']['warm']:.3f}x.",
        "",
        "## Latency, connection reopened before every query (no connection cache)",
        "",
        "| path | p50 ms | p95 ms | p99 ms | mean ms | samples |",
        "|---|---:|---:|---:|---:|---:|",
        _row("alone: close + svc.search", reopen["alone: close + svc.search"]),
        _row("crowded: close + svc.search", reopen["crowded: close + svc.search"]),
        _ratio_row("**ratio crowded / alone**", reopen["crowded: close + svc.search"],
                   reopen["alone: close + svc.search"]),
        "",
        f"Paired median ratio: {report['paired_ratio']['reopen']:.3f}x.",
        "",
        "## Results",
        "",
        (f"- Identical in both stores: **{'yes' if check['identical'] else 'NO'}** — "
         f"{check['queries'] - check['queries_differing']}/{check['queries']} queries gave the same "
         f"ids, order, scores and content ({check['results_compared']:,} results compared; "
         f"{check['queries_without_results']} queries without results); raw FTS5 rows differed "
         f"for {check['floor_queries_differing']} queries."),
        f"- Verdict: crowded p50 is {report['p50_ratio']:.2f}x alone (target ≤ {p['max_ratio']}x): "
        f"**{'PASS' if report['passed'] else 'FAIL'}**",
        "",
        environment_line(report["env"]),
        "",
    ]
    return "\n".join(lines)


def store_counts(path: Path) -> dict[str, int]:
    stats = MemoryService(store := Store(path, synchronous="NORMAL")).stats()
    store.close()
    return {"users": stats["users"], "messages": stats["messages"],
            "bytes": sum(store_bytes(path)[k] for k in ("catalog", "user_files", "wal"))}


# ---- command line ------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench_isolation.py",
        description="Measure whether one user's Search slows down with the number of OTHER users: "
                    "the same queries against the same user in a crowded store and in a store "
                    "holding that user alone, with a raw FTS5 floor, and a check that the results "
                    "are identical.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--others", type=int, default=1_000_000,
                        help="messages of other users in the crowded store")
    parser.add_argument("--messages-per-other", type=int, default=1_000,
                        help="messages per other user (sets the number of other users)")
    parser.add_argument("--user-messages", type=int, default=1_000,
                        help="messages of the target user")
    parser.add_argument("--queries", type=int, default=200,
                        help="queries, each 3-6 words from the target user's messages")
    parser.add_argument("--rounds", type=int, default=10,
                        help="timed passes over the queries (connections cached)")
    parser.add_argument("--reopen-rounds", type=int, default=3,
                        help="timed passes with the connection reopened before each query")
    parser.add_argument("--top-k", type=int, default=10, help="top_k of each Search")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="processes building the other users")
    parser.add_argument("--max-ratio", type=float, default=1.5,
                        help="pass when crowded p50 / alone p50 is at most this")
    add_run_args(parser, "isolation",
                 "where the stores are built (bench_isolation/ and shared/ in it)",
                 "keep the stores (a later run with the same --workdir and the same data "
                 "options reuses them instead of building again)")
    args = parser.parse_args(argv)
    require_positive(parser, args, ("messages_per_other", "user_messages", "queries", "rounds",
                                    "reopen_rounds", "top_k", "jobs"))
    if args.others < 0:
        parser.error("--others must be at least 0")
    if args.top_k > 100:
        parser.error("--top-k must be at most 100 (the service's limit)")
    return args


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    loadavg_start = os.getloadavg()[0]
    build = build_or_reuse(args, root)
    paths = {name: root / name / "aml.db" for name in ("crowded", "alone")}
    stores = {name: store_counts(path) for name, path in paths.items()}
    target = word_messages(args.seed, TARGET_USER, args.user_messages)
    queries = word_queries(args.seed, target, args.queries)

    alone, crowded = Subject.open("alone", paths["alone"]), Subject.open("crowded", paths["crowded"])
    try:
        log("checking results are identical (also the warm-up pass)")
        check = compare_results(alone, crowded, queries, args.top_k)
        # The collector is paused while timing: a collection would land on whichever call
        # happened to trigger it, adding noise that has nothing to do with the store.
        gc.collect()
        gc.disable()
        try:
            log(f"timing: {args.rounds} rounds x {len(queries)} queries x 4 paths")
            warm = measure_warm(alone, crowded, queries, args.top_k, args.rounds)
            log(f"timing: {args.reopen_rounds} rounds with reopened connections")
            reopen = measure_reopen(alone, crowded, queries, args.top_k, args.reopen_rounds)
        finally:
            gc.enable()
    finally:
        alone.close()
        crowded.close()

    warm_stats = {label: s.summary() for label, s in warm.items()}
    reopen_stats = {label: s.summary() for label, s in reopen.items()}
    p50_ratio = (warm_stats["crowded: svc.search"]["p50"] / warm_stats["alone: svc.search"]["p50"])
    return {
        "params": params(args),
        "env": environment(loadavg_start),
        "build": build,
        "stores": stores,
        "target_messages_sha256": hashlib.sha256(
            "\n".join(m.content for m in target).encode()).hexdigest(),
        "queries_sample": queries[:10],
        "results_check": check,
        "latency_ms": {"warm": warm_stats, "reopen": reopen_stats},
        "paired_ratio": {
            "warm": paired_ratio(warm["crowded: svc.search"], warm["alone: svc.search"]),
            "reopen": paired_ratio(reopen["crowded: close + svc.search"],
                                   reopen["alone: close + svc.search"])},
        "p50_ratio": p50_ratio,
        "passed": bool(check["identical"] and p50_ratio <= args.max_ratio),
    }


def main(argv: Sequence[str] | None = None) -> int:
    return run_and_report("isolation", parse_args(argv), run, markdown)


if __name__ == "__main__":
    sys.exit(main())
