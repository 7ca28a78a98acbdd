"""What the answer window costs on a memory far larger than the window: a Search with
`answer_window_tokens` 117,760 against the same Search without, on users of 100,000 messages (in
one session, and in 100), of 10,000, and of 1,000; and a bystander's small Search while 16
clients search the largest user with the window on.

What it does
------------
1. Builds (or reuses, with `--keep`) a store of four users of the benchmarks' word messages
   (corpus.word_messages, ~20 words each, user and assistant turns alternating, session ids of
   60 characters): `big-1` (100,000 messages, one session), `big-100` (100,000 in 100 sessions),
   `mid-1` (10,000, one session), `bystander` (1,000 in 10 sessions).
2. In-process: per user, `--queries` queries drawn from its own messages plus one that matches
   nothing, each a top_k 100 Search with the window off and on, alternating which goes first, over
   `--rounds` rounds on one service; p50 of each and the paired median ratio (on / off); the
   largest resident size seen.
3. Over HTTP (`serve --answer-window-tokens 117760 --reader-view`, as the leaderboard serves): the
   bystander's Searches alone, then again while 16 client threads search `big-1` and `big-100`
   without pause; p50 of each, and the server's peak resident size.

Targets (the answer-window issue): on / off <= 2x for the 100,000-message users; the
bystander's p50 beside the 16 clients <= 2x its p50 alone.

Usage
-----
    python3 bench/bench_window_size.py --workdir /tmp/window-size --keep

Results go to `bench_out/window_size.json` and `bench_out/window_size.md`; exit status 0 when
every target is met. Standard library only.
"""

from __future__ import annotations

import argparse
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import (
    Client,
    Samples,
    ServerProcess,
    add_run_args,
    environment,
    environment_line,
    git_state,
    log,
    paired_ratio,
    run_and_report,
)
from corpus import word_messages, word_queries

from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import AddRequest, parse_search

WINDOW = 117_760
TOP_K = 100
SEED = 7
USERS = {"big-1": (100_000, 1), "big-100": (100_000, 100), "mid-1": (10_000, 1),
         "bystander": (1_000, 10)}
NOTHING = "zzqx wvyb"  # no message holds either word
MAX_RATIO = 2.0
CLIENTS = 16


def build(db: Path) -> None:
    """The four users, unless a kept store holds them."""
    marker = db.parent / "built"
    if marker.exists():
        return
    svc = MemoryService.open(str(db), synchronous="OFF")
    for user, (count, sessions) in USERS.items():
        messages = word_messages(SEED, user, count)
        per = count // sessions
        for start in range(0, count, 200):
            session = f"{user}-session-{'x' * 40}-{start // per:04d}"
            svc.add(AddRequest(f"{user}-r{start:07d}", user, session,
                               tuple(messages[start:start + 200])))
        log(f"built {user}")
    svc.close()
    marker.write_text("ok")


def in_process(db: Path, args: argparse.Namespace) -> dict[str, Any]:
    svc = MemoryService.open(str(db), synchronous="NORMAL")
    svc.reader_view = True
    found: dict[str, Any] = {}
    for user, (count, _) in USERS.items():
        queries = word_queries(SEED, word_messages(SEED, user, min(count, 2_000)), args.queries)
        off, on = Samples(f"{user} off"), Samples(f"{user} on")
        for round_ in range(args.rounds):
            for i, query in enumerate([*queries, NOTHING]):
                request = parse_search({"user_id": user, "query": query, "top_k": TOP_K})
                for label in (("off", "on") if (i + round_) % 2 == 0 else ("on", "off")):
                    svc.answer_window_tokens = WINDOW if label == "on" else 0
                    began = time.perf_counter_ns()
                    svc.search(request)
                    (on if label == "on" else off).ns.append(time.perf_counter_ns() - began)
        found[user] = {"off": off.summary(), "on": on.summary(), "ratio": paired_ratio(on, off)}
        log(f"{user}: off p50 {found[user]['off']['p50']:.1f} ms, on "
            f"{found[user]['on']['p50']:.1f} ms, {found[user]['ratio']:.2f}x")
    svc.close()
    found["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return found


def bystander(db: Path, root: Path, args: argparse.Namespace) -> dict[str, Any]:
    queries = word_queries(SEED, word_messages(SEED, "bystander", 1_000), args.queries)
    big = {user: word_queries(SEED, word_messages(SEED, user, 2_000), 50)
           for user in ("big-1", "big-100")}
    with ServerProcess(db, root / "serve.log", "--answer-window-tokens", str(WINDOW),
                       "--reader-view") as server:
        client = Client(server.port)

        def small(label: str) -> Samples:
            samples = Samples(label)
            for _ in range(args.rounds):
                for query in queries:
                    began = time.perf_counter_ns()
                    status, _ = client.post("/search", {"user_id": "bystander", "query": query,
                                                        "top_k": TOP_K})
                    assert status == 200, status
                    samples.ns.append(time.perf_counter_ns() - began)
            return samples

        alone = small("bystander alone")
        stop = threading.Event()

        def hammer(n: int) -> None:
            c = Client(server.port)
            user = ("big-1", "big-100")[n % 2]
            i = n
            while not stop.is_set():
                c.post("/search", {"user_id": user, "query": big[user][i % 50], "top_k": TOP_K})
                i += 1
            c.close()

        threads = [threading.Thread(target=hammer, args=(n,)) for n in range(CLIENTS)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        beside = small("bystander beside 16 clients")
        stop.set()
        for thread in threads:
            thread.join()
        memory = server.memory_mb()
        client.close()
    return {"alone": alone.summary(), "beside": beside.summary(),
            "ratio": beside.summary()["p50"] / alone.summary()["p50"], "server_mb": memory}


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    started_load = __import__("os").getloadavg()[0]
    root.mkdir(parents=True, exist_ok=True)
    db = root / "aml.db"
    build(db)
    found = in_process(db, args)
    crowd = bystander(db, root, args)
    passed = (all(found[u]["ratio"] <= MAX_RATIO for u in ("big-1", "big-100"))
              and crowd["ratio"] <= MAX_RATIO)
    return {"window_tokens": WINDOW, "queries": args.queries, "rounds": args.rounds,
            "in_process": found, "bystander": crowd, "passed": passed, "git": git_state(),
            "environment": environment(started_load)}


def markdown(report: dict[str, Any]) -> str:
    found, crowd = report["in_process"], report["bystander"]
    lines = [f"# Answer window on memories larger than it ({report['queries']} queries and one "
             f"that matches nothing, x {report['rounds']} rounds, top_k {TOP_K}, window "
             f"{report['window_tokens']} tokens, reader's view on)", "",
             environment_line(report["environment"]), "",
             "| user (messages, sessions) | off p50 ms | on p50 ms | on / off (paired) | target |",
             "|---|---|---|---|---|"]
    for user, (count, sessions) in USERS.items():
        target = f"<= {MAX_RATIO}x" if count == 100_000 else ""
        lines.append(f"| {user} ({count:,}, {sessions}) | {found[user]['off']['p50']:.1f} | "
                     f"{found[user]['on']['p50']:.1f} | {found[user]['ratio']:.2f}x | {target} |")
    lines += ["", f"In-process peak resident size: {found['max_rss_mb']:.0f} MB.", "",
              "| bystander (1,000 messages), HTTP | p50 ms | p95 ms |", "|---|---|---|",
              f"| alone | {crowd['alone']['p50']:.1f} | {crowd['alone']['p95']:.1f} |",
              f"| beside {CLIENTS} clients searching the 100,000-message users | "
              f"{crowd['beside']['p50']:.1f} | {crowd['beside']['p95']:.1f} |", "",
              f"Beside / alone: {crowd['ratio']:.2f}x (target <= {MAX_RATIO}x). Server resident "
              f"size after: {crowd['server_mb'].get('VmRSS', 0):.0f} MB, peak "
              f"{crowd['server_mb'].get('VmHWM', 0):.0f} MB.", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    add_run_args(parser, "window_size", "the store", "keep the store for another run")
    args = parser.parse_args()
    return run_and_report("window_size", args, run, markdown)


if __name__ == "__main__":
    sys.exit(main())
