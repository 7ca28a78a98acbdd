"""Does one user's Search slow down when the store holds many OTHER users? This measures it.

What it does
------------
1. Generates deterministic synthetic chat messages (seeded `random`; a vocabulary of a few
   thousand made-up words, common English words, names and numbers; ~20 words a message). No
   external data, so every run on every machine writes the same bytes.
2. Builds two stores through the public in-process API (`MemoryService.add`, 20-message Adds):
   - "crowded": the target user (default 1,000 messages) plus `--others` messages (default
     1,000,000) spread over other users of ~1,000 messages each;
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
    python3 bench/bench_isolation.py --workdir /var/tmp/iso --keep   # keep, reuse next run

Results go to `bench_out/isolation.json` and `bench_out/isolation.md` (git-ignored) and the
Markdown table is printed. Exit status: 0 when results are identical and the p50 ratio is within
`--max-ratio`, 1 otherwise, 2 on a usage error. Standard library only.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import multiprocessing
import os
import platform
import random
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import Any

# Run as a plain script from a checkout (python3 bench/bench_isolation.py): the package is not
# necessarily installed, so make the repository root importable.
REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchlib import Samples, log, paired_ratio, run_and_report

from aml_retriever import __version__
from aml_retriever.service import MemoryService
from aml_retriever.store import Store
from aml_retriever.tokenizer import match_expression, query_terms
from aml_retriever.validation import AddRequest, Message, SearchRequest

# Bump when generation or build changes, so a kept workdir from an older version is not reused.
BENCH_FORMAT = "bench_isolation-v1"
TARGET_USER = "target-user"
ADD_SIZE = 20  # messages per Add, the size a chat platform typically sends
SESSION_SIZE = 100  # messages per session id
BASE_TIME_MS = 1_700_000_000_000
# The floor: FTS5 alone, no service code around it (as given in the brief; bm25 with default weights).
FLOOR_SQL = ("SELECT rowid, bm25(message_index) FROM message_index WHERE message_index MATCH ? "
             "ORDER BY 2 LIMIT 10")

# ---- synthetic text ----------------------------------------------------------------------

COMMON_WORDS = """
    the be to of and a in that have i it for not on with he as you do at this but his by from
    they we say her she or an will my one all would there their what so up out if about who get
    which go me when make can like time no just him know take people into year your good some
    could them see other than then now look only come its over think also back after use two how
    our work first well way even new want because any these give day most us is was are were
    been has had did said made going got need meeting tomorrow today yesterday week month plan
    call email send project idea remember please thanks sure maybe really think pretty great
    problem question answer
""".split()

NAMES = """
    Alice Bruno Chiara Dmitri Elena Farid Greta Hiro Ingrid Jonas Kavya Lars Mei Nadia Oscar
    Priya Quentin Rosa Sven Tariq Uma Viktor Wen Xavier Yara Zoltan Amara Bjorn Carmen Diego
    Esther Felix Gita Hamza Irene Jamal Keiko Luca Marta Nikos Olga Pablo Rania Stefan Tomas
    Ulla Vera Wanda Yusuf Berlin Lisbon Nairobi Osaka Quito Tallinn Zurich Monday Friday
""".split()

ONSETS = """
    b br ch d dr f fl g gl gr h j k kl kr l m n p pl pr qu r s sh sk sl st t th tr v w z zh
""".split()
VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ie", "oa", "ou", "y"]
CODAS = ["", "", "", "n", "r", "s", "l", "k", "nd", "st", "x", "m", "rt"]


@dataclass(frozen=True)
class Vocabulary:
    """Words with Zipf-like weights (as cumulative weights, for random.choices)."""
    words: tuple[str, ...]
    cum_weights: tuple[float, ...]
    made_up: tuple[str, ...]


def _made_up_word(rng: random.Random) -> str:
    return "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS)
                   for _ in range(rng.choice((2, 2, 3))))


@cache
def vocabulary(seed: int, size: int = 3000) -> Vocabulary:
    """The shared vocabulary. Weights follow Zipf (1/rank) so a few words are everywhere and most
    are rare, as in real text; common English words take the top ranks."""
    rng = random.Random(f"{seed}:vocabulary")
    common = set(COMMON_WORDS)
    made_up: list[str] = []
    seen: set[str] = set()
    while len(made_up) < size:
        word = _made_up_word(rng)
        if word not in seen and word not in common:
            seen.add(word)
            made_up.append(word)
    words = list(dict.fromkeys(COMMON_WORDS)) + made_up
    total, cum = 0.0, []
    for rank in range(1, len(words) + 1):
        total += 1.0 / rank
        cum.append(total)
    return Vocabulary(tuple(words), tuple(cum), tuple(made_up))


def _number(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.4:
        return str(rng.randint(2, 99))
    if kind < 0.7:
        return str(rng.randint(1990, 2030))
    if kind < 0.85:
        return f"{rng.randint(1, 999)}.{rng.randint(0, 99):02d}"
    return f"{rng.randint(100, 999)}-{rng.randint(1000, 9999)}"


def _sentence(rng: random.Random, vocab: Vocabulary, favourites: Sequence[str]) -> str:
    """About 20 words: mostly the shared vocabulary, some of the user's favourite words (so each
    user has topics of their own), and now and then a name or a number."""
    count = max(6, min(40, round(rng.gauss(20, 5))))
    tokens = rng.choices(vocab.words, cum_weights=vocab.cum_weights, k=count)
    for i in range(count):
        roll = rng.random()
        if roll < 0.15:
            tokens[i] = rng.choice(favourites)
        elif roll < 0.21:
            tokens[i] = rng.choice(NAMES)
        elif roll < 0.25:
            tokens[i] = _number(rng)
        elif roll < 0.28:
            tokens[i] += ","
    tokens[0] = tokens[0][:1].upper() + tokens[0][1:]
    return " ".join(tokens).rstrip(",") + rng.choice(".....?!")


def user_messages(seed: int, user_id: str, count: int) -> list[Message]:
    """A user's messages, a pure function of (seed, user_id, count): the target user is the same
    in both stores, and a build can be split over processes without passing any text around."""
    vocab = vocabulary(seed)
    rng = random.Random(f"{seed}:user:{user_id}")
    favourites = rng.sample(vocab.made_up, 40)
    start = BASE_TIME_MS + rng.randint(0, 86_400_000)
    return [Message("user" if i % 2 == 0 else "assistant", _sentence(rng, vocab, favourites),
                    start + i * 45_000) for i in range(count)]


def user_adds(seed: int, user_id: str, count: int) -> list[AddRequest]:
    """The user's messages as 20-message Adds, one session per 100 messages."""
    messages = user_messages(seed, user_id, count)
    return [AddRequest(f"{user_id}-r{start // ADD_SIZE:05d}", user_id,
                       f"{user_id}-s{start // SESSION_SIZE:03d}",
                       tuple(messages[start:start + ADD_SIZE]))
            for start in range(0, count, ADD_SIZE)]


def make_queries(seed: int, messages: Sequence[Message], count: int) -> list[str]:
    """Queries of 3-6 words from the target user's own messages, so they have matches in the
    target's index; a third mix in a word from another message, as a real question would."""
    rng = random.Random(f"{seed}:queries")
    queries: list[str] = []
    for _ in range(count):
        words = _plain_words(rng.choice(messages).content)
        chosen = rng.sample(words, min(len(words), rng.randint(3, 6)))
        if rng.random() < 0.33:
            chosen[-1] = rng.choice(_plain_words(rng.choice(messages).content))
        queries.append(" ".join(chosen))
    return queries


def _plain_words(content: str) -> list[str]:
    return list(dict.fromkeys(w.strip(".,?!") for w in content.split()))


# ---- building the stores -----------------------------------------------------------------


@dataclass(frozen=True)
class BuildPlan:
    seed: int
    others: int
    user_messages: int
    messages_per_other: int

    def other_users(self) -> list[tuple[str, int]]:
        """(user_id, message count) of the other users: `others` messages in total, split into
        users of ~messages_per_other each (the remainder spread one by one)."""
        if self.others <= 0:
            return []
        users = max(1, round(self.others / self.messages_per_other))
        base, extra = divmod(self.others, users)
        return [(f"other-{i:06d}", base + (1 if i < extra else 0)) for i in range(users)]

    def crowded_users(self) -> list[tuple[str, int]]:
        """Everyone in the crowded store; the target sits mid-way, written among the others."""
        users = self.other_users()
        middle = len(users) // 2
        return [*users[:middle], (TARGET_USER, self.user_messages), *users[middle:]]


def _write_users(job: tuple[str, int, list[tuple[str, int]], int, int]) -> tuple[int, float]:
    """Worker: write the given users into the store with svc.add. Each worker has its own Store
    (its own connections); users never span workers, so no two processes write one file."""
    path, seed, users, worker, workers = job
    store = Store(path, synchronous="NORMAL")
    svc = MemoryService(store)
    written, started = 0, time.perf_counter()
    try:
        for done, (user_id, count) in enumerate(users, 1):
            for request in user_adds(seed, user_id, count):
                svc.add(request)
            written += count
            # Keep every WAL small: otherwise each of the ~1,000 files keeps a few MB of WAL.
            store.checkpoint_dirty()
            if done % 50 == 0 or done == len(users):
                rate = written / (time.perf_counter() - started)
                log(f"  worker {worker + 1}/{workers}: {done}/{len(users)} users, "
                     f"{written:,} messages, {rate:,.0f} msg/s")
    finally:
        store.close()
    return written, time.perf_counter() - started


def build_store(path: Path, seed: int, users: list[tuple[str, int]], jobs: int) -> dict[str, Any]:
    """Write `users` into a new store at `path` using `jobs` processes; returns timings."""
    Store(path, synchronous="NORMAL").close()  # create the catalog once, before workers race
    jobs = max(1, min(jobs, len(users)))
    # Round-robin, so each worker gets a similar mix of sizes and the target is in one of them.
    work = [(str(path), seed, users[i::jobs], i, jobs) for i in range(jobs)]
    started = time.perf_counter()
    if jobs == 1:
        results = [_write_users(work[0])]
    else:
        # spawn: a fresh interpreter per worker, so no SQLite handle is inherited across fork.
        with multiprocessing.get_context("spawn").Pool(jobs) as pool:
            results = pool.map(_write_users, work)
    seconds = time.perf_counter() - started
    messages = sum(r[0] for r in results)
    return {"seconds": round(seconds, 2), "messages": messages, "users": len(users),
            "jobs": jobs, "messages_per_second": round(messages / seconds) if seconds else None}


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build_or_reuse(root: Path, plan: BuildPlan, jobs: int) -> dict[str, Any]:
    """Build both stores under `root`, or reuse them when a kept build of the same plan is there
    (a manifest is written only after a complete build)."""
    manifest_path = root / "manifest.json"
    wanted = {"format": BENCH_FORMAT, "aml_retriever": __version__, **asdict(plan)}
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("plan") == wanted:
            log(f"reusing the stores built earlier in {root}")
            return {**manifest["build"], "reused": True}
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    log(f"building the crowded store: {plan.others:,} other messages + {plan.user_messages:,} "
         f"of the target, {jobs} process(es)")
    crowded = build_store(root / "crowded.db", plan.seed, plan.crowded_users(), jobs)
    log(f"crowded store built in {crowded['seconds']:.1f} s "
         f"({crowded['messages_per_second']:,} msg/s)")
    alone = build_store(root / "alone.db", plan.seed, [(TARGET_USER, plan.user_messages)], 1)
    log(f"alone store built in {alone['seconds']:.1f} s")
    build = {"crowded": crowded, "alone": alone, "reused": False}
    manifest_path.write_text(json.dumps({"plan": wanted, "build": build}, indent=2))
    return build


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
                subject.store.close_thread()
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
    crowded_build = build["crowded"]
    build_text = ("reused from an earlier kept build, originally " if build.get("reused") else "")
    lines = [
        "# Search isolation: one user's Search, alone vs among other users",
        "",
        f"- Crowded store: {stores['crowded']['users']:,} users, {stores['crowded']['messages']:,} "
        f"messages ({p['others']:,} of other users + {p['user_messages']:,} of the target), "
        f"{stores['crowded']['bytes'] / 1e6:,.0f} MB on disk",
        f"- Alone store: {stores['alone']['users']:,} user, {stores['alone']['messages']:,} "
        f"messages, {stores['alone']['bytes'] / 1e6:,.1f} MB on disk",
        f"- Build ({build_text}svc.add, {ADD_SIZE}-message Adds, synchronous=NORMAL, "
        f"{crowded_build['jobs']} process(es)): crowded {crowded_build['seconds']:,.1f} s "
        f"({crowded_build['messages_per_second']:,} msg/s), alone {build['alone']['seconds']:,.1f} s",
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
        f"Environment: Python {report['env']['python']}, SQLite {report['env']['sqlite']}, "
        f"{report['env']['platform']}, {report['env']['cpus']} CPUs; aml_retriever "
        f"{report['env']['aml_retriever']}.",
        "",
    ]
    return "\n".join(lines)


def store_counts(path: Path) -> dict[str, int]:
    stats = MemoryService(store := Store(path, synchronous="NORMAL")).stats()
    store.close()
    return {"users": stats["users"], "messages": stats["messages"],
            "bytes": _dir_bytes(path.parent / (path.name + ".users")) + path.stat().st_size}


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
    parser.add_argument("--seed", type=int, default=20240611, help="seed of all generated data")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="processes writing the crowded store")
    parser.add_argument("--max-ratio", type=float, default=1.5,
                        help="pass when crowded p50 / alone p50 is at most this")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench_out",
                        help="directory for isolation.json and isolation.md")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where the stores are built (in a bench_isolation/ subdirectory); "
                             "default: a new temporary directory")
    parser.add_argument("--keep", action="store_true",
                        help="keep the stores (a later run with the same --workdir and the same "
                             "data options reuses them instead of building again)")
    args = parser.parse_args(argv)
    for name in ("others", "messages_per_other", "user_messages", "queries", "rounds",
                 "reopen_rounds", "top_k", "jobs"):
        minimum = 0 if name == "others" else 1
        if getattr(args, name) < minimum:
            parser.error(f"--{name.replace('_', '-')} must be at least {minimum}")
    if args.top_k > 100:
        parser.error("--top-k must be at most 100 (the service's limit)")
    return args


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    plan = BuildPlan(args.seed, args.others, args.user_messages, args.messages_per_other)
    build = build_or_reuse(root, plan, args.jobs)
    stores = {"crowded": store_counts(root / "crowded.db"), "alone": store_counts(root / "alone.db")}
    target = user_messages(args.seed, TARGET_USER, args.user_messages)
    queries = make_queries(args.seed, target, args.queries)

    alone, crowded = Subject.open("alone", root / "alone.db"), Subject.open("crowded", root / "crowded.db")
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
        "params": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "env": {"python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
                "platform": platform.platform(), "cpus": os.cpu_count(),
                "aml_retriever": __version__},
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
