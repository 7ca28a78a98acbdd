"""Real users at top_k 100: the replay files' users and questions, against one FTS5 query and the
naive FTS5 service.

What it does
------------
1. Reads replay files (`--replay`: files or folders of the evaluation's replay format, e.g. the
   BEAM development users; the benchmark ships no data of its own), at most `--users` of them,
   and Adds every user into one store in-process (`MemoryService.add`, the files' Adds as they
   are), and the same messages into the files of the naive FTS5 service (`naive_service.py`: one
   plain FTS5 table per user, the service's tokenizer), as `bench_long.py` writes them.
2. In-process: every question as a top_k Search against its floor, ONE FTS5 `MATCH ... ORDER BY
   rank LIMIT top_k` over the asking user's file of our store with the query plan's terms,
   interleaved question by question, the order alternating, over `--rounds` rounds: p50, p95
   and the paired median ratio.
3. Over HTTP: the real server (`serve`, default settings and any `--server-arg`, one process)
   and the naive service on the same messages, one keep-alive client each, every question sent
   to both, alternating which goes first: p50, p95 and the p50 ratio.

Why
---
`bench_long.py` measures generated users, whose questions are a few words. Real questions are
whole sentences and real memories mix short turns with pasted pages: more terms per query, more
postings read, other lengths to rank and return. This is the same comparison on them.

Targets: over HTTP p50 <= 2.0x the naive service; in-process
paired ratio <= 5.0x one FTS5 query.

Usage
-----
    python3 bench/bench_replay.py --replay ../shared/eval/external/data/beam/100K \\
        ../shared/eval/external/data/beam/500K
    python3 bench/bench_replay.py --replay ../shared/eval/external/data/beam/500K --users 3 --rounds 1

Results go to `bench_out/replay.json` and `bench_out/replay.md` and the Markdown is printed;
progress goes to stderr. Exit status 0 when both targets are met, 1 when one is missed or on an
error, 2 on a usage error. Standard library only.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bench_long
from bench_long import (
    BUILD_SYNCHRONOUS,
    NaiveProcess,
    mean_words,
    naive_write,
    pair,
    time_in_process,
    time_over_http,
    verdict,
    verdicts_markdown,
)
from bench_window import replay_files
from benchlib import (
    Samples,
    ServerProcess,
    add_run_args,
    environment,
    environment_line,
    log,
    params,
    require_positive,
    run_and_report,
)

from aml_retriever.engine.held import HELD_BYTES
from aml_retriever.evaluation.backends import ADD_MESSAGE_LIMIT
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import TOP_K_MAX, Message, SearchRequest, parse_add
from aml_retriever.storage.store import Store

TOP_K = 100  # what the leaderboard's reader asks for
# The same targets as bench_long.py's generated users.
TARGETS = {name: bench_long.TARGETS[name] for name in ("http_search", "inprocess_search")}


# ---- the users ---------------------------------------------------------------------------


def load(paths: Sequence[Path], limit: int | None) -> list[dict[str, Any]]:
    """The conversations of the first `limit` replay files (all without a limit), in order."""
    return [json.loads(path.read_text(encoding="utf-8"))
            for path in replay_files(list(paths))[:limit]]


def build(conversations: Sequence[dict[str, Any]], root: Path) -> tuple[Path, Path, int, float]:
    """Our store and the naive service's files, every user written once; the messages written
    and their mean words."""
    shutil.rmtree(root, ignore_errors=True)  # every run writes its users afresh
    service_db, naive_dir = root / "service" / "aml.db", root / "naive"
    service_db.parent.mkdir(parents=True)
    naive_dir.mkdir()
    written: list[Message] = []
    svc = MemoryService.open(str(service_db), synchronous=BUILD_SYNCHRONOUS)
    try:
        for conversation in conversations:
            uid = conversation["user_id"]
            requests = [parse_add(body, ADD_MESSAGE_LIMIT) for body in conversation["adds"]]
            if any(r.user_id != uid for r in requests):
                # The naive file and the questions go by the file's user: another user's Adds
                # would leave the two services holding different memories.
                raise ValueError(f"{uid}: an Add of another user in its replay file")
            messages = [m for r in requests for m in r.messages]
            for request in requests:
                svc.add(request)
            naive_write(naive_dir, uid, messages)
            written += messages
            log(f"built {uid}: {len(messages):,} messages, {len(conversation['questions'])} questions")
    finally:
        svc.close()
    return service_db, naive_dir, len(written), mean_words(written)


# ---- the run -----------------------------------------------------------------------------


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    loadavg = os.getloadavg()[0]
    conversations = load(args.replay, args.users)
    service_db, naive_dir, messages, words = build(conversations, root)
    questions = [(c["user_id"], q["question"]) for c in conversations for q in c["questions"]]
    report: dict[str, Any] = {"params": {**params(args), "replay": [str(p) for p in args.replay]},
                              "users": [c["user_id"] for c in conversations],
                              "messages": messages, "words_per_message": words,
                              "questions": len(questions), "targets": TARGETS}
    held_bytes = args.held_megabytes * 2**20
    log(f"in-process Search, {len(questions)} questions x {args.rounds} rounds, top_k {args.top_k}")
    first = Samples("service, first ask"), Samples("floor, first ask")
    report["in_process"] = pair(*time_in_process(service_db, questions, args.rounds, args.top_k,
                                                 first, held_bytes))
    report["in_process_first"] = asked_first(first, questions)
    log("what is held of each user, after every question of it once")
    report["held"] = held_memory(service_db, questions, args.top_k, held_bytes, messages)
    server_args = [*args.server_arg, f"--held-megabytes={args.held_megabytes}"]
    with ServerProcess(service_db, root / "server.log", *server_args) as server:
        naive = NaiveProcess(naive_dir, root / "naive.log")
        try:
            log(f"HTTP Search, {len(questions)} questions x {args.rounds} rounds, top_k {args.top_k}")
            first = Samples("ours, first ask"), Samples("naive, first ask")
            report["http"] = pair(*time_over_http(server.port, naive.port, questions, args.rounds,
                                                  args.top_k, first))
            report["http_first"] = asked_first(first, questions)
        finally:
            naive.stop()
    report["verdicts"] = [
        verdict(f"Search top_k {args.top_k} over HTTP, each question asked once: p50 / naive "
                "service", report["http_first"]["p50_ratio"], TARGETS["http_search"], lower=True),
        verdict(f"Search top_k {args.top_k} in-process, each question asked once: paired ratio "
                "to one FTS5 query", report["in_process_first"]["paired_ratio"],
                TARGETS["inprocess_search"], lower=True)]
    report["passed"] = all(v["passed"] for v in report["verdicts"])
    report["environment"] = environment(loadavg)
    return report


def asked_first(first: tuple[Samples, Samples], questions: Sequence[tuple[str, str]]
                ) -> dict[str, Any]:
    """The first pass: every question asked once, in order (the leaderboard's way: each user's
    questions one after the other), and of it the first question of each user (nothing held)."""
    found = pair(*first)
    starts = [i for i, (uid, _) in enumerate(questions) if i == 0 or questions[i - 1][0] != uid]
    opening = [Samples(s.label, [s.ns[i] for i in starts]) for s in first]
    found["users_first"] = pair(*opening)
    return found


def held_memory(service_db: Path, questions: Sequence[tuple[str, str]], top_k: int,
                held_bytes: int, messages: int) -> dict[str, Any]:
    """What the service holds after every question once: its own estimate, and what Python
    allocated for it (tracemalloc, the Searches' garbage collected), per message."""
    svc = MemoryService(Store(service_db), held_bytes=held_bytes)
    try:
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for uid, question in questions:
            svc.search(SearchRequest(question, uid, top_k, (), None))
        gc.collect()
        allocated = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        return {"users": svc.held.users, "estimate_bytes": svc.held.held_bytes,
                "allocated_bytes": allocated, "budget_bytes": held_bytes,
                "estimate_per_message": svc.held.held_bytes / messages,
                "allocated_per_message": allocated / messages}
    finally:
        svc.close()


def markdown(report: dict[str, Any]) -> str:
    p = report["params"]
    flags = f" (server flags: {' '.join(p['server_arg'])})" if p["server_arg"] else ""
    inp, http = report["in_process"], report["http"]
    inp_first, http_first, held = report["in_process_first"], report["http_first"], report["held"]
    lines = [f"# Real users at top_k {p['top_k']} (`bench_replay.py`)", "",
             f"{len(report['users'])} users ({', '.join(report['users'])}), {report['messages']:,} "
             f"messages ({report['words_per_message']:.0f} words a message on average), "
             f"{report['questions']} questions x {p['rounds']} rounds{flags}.", "",
             "| path | ours p50 / p95 ms | reference p50 / p95 ms | p50 ratio | paired ratio |",
             "|---|---:|---:|---:|---:|"]
    for what, r in (("in-process, each question asked once (reference: one FTS5 query)", inp_first),
                    ("in-process, the first question of each user", inp_first["users_first"]),
                    ("in-process, asked again (held, when the budget holds every user)", inp),
                    ("over HTTP, each question asked once (reference: the naive service)", http_first),
                    ("over HTTP, the first question of each user", http_first["users_first"]),
                    ("over HTTP, asked again (held, when the budget holds every user)", http)):
        lines.append(f"| {what} | {r['ours']['p50']:.2f} / {r['ours']['p95']:.2f} | "
                     f"{r['reference']['p50']:.2f} / {r['reference']['p95']:.2f} | "
                     f"{r['p50_ratio']:.2f}x | {r['paired_ratio']:.2f}x |")
    lines += ["", f"Held after every question once: {held['users']} users, "
              f"{held['estimate_bytes'] / 2**20:.1f} MiB by the service's estimate "
              f"({held['estimate_per_message']:,.0f} bytes a message), "
              f"{held['allocated_bytes'] / 2**20:.1f} MiB allocated "
              f"({held['allocated_per_message']:,.0f} bytes a message), budget "
              f"{held['budget_bytes'] / 2**20:.0f} MiB.",
              "", *verdicts_markdown(report["verdicts"]), "",
              environment_line(report["environment"]), ""]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replay", type=Path, nargs="+", required=True,
                        help="replay files or folders (the users and questions to time)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds over the questions (default 2)")
    parser.add_argument("--top-k", type=int, default=TOP_K,
                        help=f"results a Search asks for (default {TOP_K})")
    parser.add_argument("--users", type=int, default=None,
                        help="at most this many users, the first replay files in order (default all)")
    parser.add_argument("--held-megabytes", type=int, default=HELD_BYTES // 2**20,
                        help="what the service holds of its users between Searches, in-process "
                             f"and served (default {HELD_BYTES // 2**20}; 0: nothing)")
    parser.add_argument("--server-arg", action="append", default=[], metavar="FLAG",
                        help="a flag passed on to the server, e.g. --server-arg=--workers=4 "
                             "(repeatable; the targets are judged at the defaults)")
    add_run_args(parser, "replay", "where the stores are written", "keep the stores")
    args = parser.parse_args(argv)
    require_positive(parser, args, ("rounds", "top_k"))
    if args.held_megabytes < 0:
        parser.error("--held-megabytes must be at least 0")
    if args.users is not None and args.users < 1:
        parser.error("--users must be at least 1")
    if args.top_k > TOP_K_MAX:
        parser.error(f"--top-k must be at most {TOP_K_MAX}, the contract's limit")
    if not replay_files(args.replay):
        parser.error("--replay holds no replay files")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    return run_and_report("replay", parse_args(argv), run, markdown)


if __name__ == "__main__":
    sys.exit(main())
