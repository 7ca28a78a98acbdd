#!/usr/bin/env python3
"""What the statement lifecycle costs a read: recall and Search with the lifecycle filters on,
against the same reads with them bypassed, in the same run.

An agent memory of N statements (default 2,000) about made-up things, each fact restated 1 to 4
times through `update` (so about half the statements are replaced versions that default reads
must leave out) and one in twenty inferred (proposed): recall with the default filters (replaced
versions withheld, proposals flagged), with `as_of` and with a `since`/`until` range, each paired
with the same recall through a Search whose filter is switched off (every statement visible: what
a read cost before the lifecycle). Then an HTTP-shaped user of chat messages, where nothing is
ever replaced: the default Search against the same Search with the lifecycle's one check (is
anything withheld?) bypassed. Target: every ratio <= 1.10 at p50.

    python3 bench/bench_lifecycle.py [--statements 2000] [--queries 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path
from typing import Any

from benchlib import (
    Samples,
    add_run_args,
    environment,
    environment_line,
    log,
    paired_ratio,
    require_positive,
    run_and_report,
)
from corpus import vocabulary

from aml_retriever.agents.scopes import ScopedMemory
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import AddRequest, Message, SearchRequest
from aml_retriever.storage import timeline
from aml_retriever.storage.timeline import ReadFilter, Visibility

MAX_RATIO = 1.10
DAY_MS = 86_400_000


def build_memory(root: Path, statements: int, seed: int) -> tuple[ScopedMemory, list[str], int]:
    """A local agent memory of about `statements` statements; the queries that ask for them; a
    record time between the first and the last update."""
    rng = random.Random(seed)
    words = vocabulary(seed).made_up
    memory = ScopedMemory.at(root / "project", root / "account")
    queries, written, middle = [], 0, 0
    fact = 0
    while written < statements:
        thing, attribute = words[(2 * fact) % len(words)], words[(2 * fact + 1) % len(words)]
        fact += 1
        first = memory.remember(f"The {thing} {attribute} is {rng.choice(words)} "
                                f"{rng.randint(1, 99)}.",
                                origin="agent" if rng.random() < 0.05 else "user")
        current, written = first["statement"]["id"], written + 1
        for _ in range(rng.randint(0, 4)):
            changed = memory.update(current, f"The {thing} {attribute} is now "
                                             f"{rng.choice(words)} {rng.randint(100, 999)}.")
            current, written = changed["statement"]["id"], written + 1
        if written >= statements // 2 and not middle:
            middle = int(time.time() * 1000)
        queries.append(f"what is the {thing} {attribute}")
    rng.shuffle(queries)
    return memory, queries, middle


def bypassed() -> Any:
    """Visibility.of with every message visible: the read as it was before the lifecycle."""
    return classmethod(lambda cls, conn, read: cls(read, None))


def timed(run: Any) -> int:
    started = time.perf_counter_ns()
    run()
    return time.perf_counter_ns() - started


def pair(label: str, call: Any, rounds: int, queries: list[str]) -> tuple[Samples, Samples]:
    """The call with the lifecycle filters on and bypassed, interleaved per query."""
    on, off = Samples(f"{label}: filters on"), Samples(f"{label}: bypassed")
    real = Visibility.of
    for round_no in range(rounds):
        for i, query in enumerate(queries):
            order = (on, off) if (i + round_no) % 2 == 0 else (off, on)
            for samples in order:
                timeline.Visibility.of = real if samples is on else bypassed()  # type: ignore[method-assign]
                samples.ns.append(timed(lambda q=query: call(q)))
    timeline.Visibility.of = real  # type: ignore[method-assign]
    return on, off


def chat_user(root: Path, messages: int, seed: int) -> tuple[MemoryService, list[str]]:
    rng = random.Random(seed + 1)
    words = vocabulary(seed).made_up
    service = MemoryService.open(str(root / "chat.db"), synchronous="NORMAL")
    start = 1_700_000_000_000
    for batch in range(0, messages, 20):
        service.add(AddRequest(f"r{batch}", "u", f"s{batch // 200}", tuple(
            Message("user", " ".join(rng.choices(words[:400], k=12)), start + (batch + i) * 60_000)
            for i in range(20))))
    return service, [" ".join(rng.choices(words[:400], k=4)) for _ in range(200)]


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    loadavg = __import__("os").getloadavg()[0]
    root.mkdir(parents=True, exist_ok=True)
    log(f"building an agent memory of {args.statements:,} statements")
    memory, queries, middle = build_memory(root, args.statements, args.seed)
    queries = queries[:args.queries]
    now = int(time.time() * 1000)
    reads = {
        "recall, default filters": ReadFilter(include_proposed=True),
        "recall, as_of the middle": ReadFilter(as_of_ms=middle, include_proposed=True),
        "recall, since/until": ReadFilter(since_ms=now - DAY_MS, until_ms=now + DAY_MS,
                                          include_proposed=True),
    }
    samples: dict[str, Samples] = {}
    ratios = []
    for label, read in reads.items():
        log(f"timing {label}")
        on, off = pair(label, lambda q, r=read: memory.recall(q, 10, "local", r), args.rounds,
                       queries)
        samples.update({on.label: on, off.label: off})
        ratios.append({"read": label, "ratio": paired_ratio(on, off)})
    memory.close()
    log(f"timing an HTTP-shaped Search over {args.messages:,} chat messages")
    service, chat_queries = chat_user(root, args.messages, args.seed)
    on, off = pair("Search, chat user", lambda q: service.search(
        SearchRequest(q, "u", 100, (), None)), args.rounds, chat_queries[:args.queries])
    service.close()
    samples.update({on.label: on, off.label: off})
    ratios.append({"read": "Search top_k 100, chat user (nothing withheld)",
                   "ratio": paired_ratio(on, off)})
    for row in ratios:
        row["passed"] = row["ratio"] <= MAX_RATIO
    return {"params": {"statements": args.statements, "messages": args.messages,
                       "queries": len(queries), "rounds": args.rounds, "max_ratio": MAX_RATIO},
            "latency_ms": {label: s.summary() for label, s in samples.items()},
            "ratios": ratios, "passed": all(r["passed"] for r in ratios),
            "environment": environment(loadavg)}


def markdown(report: dict[str, Any]) -> str:
    p = report["params"]
    lines = [f"# Lifecycle filters: reads with them on vs bypassed (target <= {p['max_ratio']:g}x)",
             "", f"An agent memory of {p['statements']:,} statements (about half replaced "
             f"versions), {p['queries']} queries x {p['rounds']} rounds; a chat user of "
             f"{p['messages']:,} messages.", "",
             "| read | p50 on | p50 bypassed | p95 on | p95 bypassed | paired ratio | verdict |",
             "|---|---|---|---|---|---|---|"]
    lat = report["latency_ms"]
    for row, (on, off) in zip(report["ratios"], zip(list(lat)[::2], list(lat)[1::2], strict=True),
                              strict=True):
        lines.append(f"| {row['read']} | {lat[on]['p50']:.2f} ms | {lat[off]['p50']:.2f} ms | "
                     f"{lat[on]['p95']:.2f} ms | {lat[off]['p95']:.2f} ms | {row['ratio']:.3f}x | "
                     f"{'PASS' if row['passed'] else 'FAIL'} |")
    lines += ["", environment_line(report["environment"]), ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--statements", type=int, default=2000)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    add_run_args(parser, "lifecycle", "where the memory and the chat store are built",
                 "keep them afterwards")
    args = parser.parse_args()
    require_positive(parser, args, ("statements", "messages", "queries", "rounds"))
    return run_and_report("lifecycle", args, run, markdown)


if __name__ == "__main__":
    raise SystemExit(main())
