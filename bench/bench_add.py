"""How close is an Add to what SQLite needs to store the same messages at all?

What it does
------------
1. Generates `--users` chat histories (`corpus.conversation`, seeded, no external data) and cuts
   each into Adds of exactly 20 messages (the session id is that of the Add's first message), as
   a chat platform sends 20 turns at a time. Adds go to the users round-robin.
2. Writes the same Adds, in the same order, through three paths, each into fresh files of its
   own, one file per user, in WAL mode, one transaction per Add, at each `--synchronous` level
   (default FULL, the server's default, and NORMAL):
   - service: in-process `MemoryService.add`: validation hash, idempotency record, features,
     dates, conversation links, segments, index terms, session cursor; everything an Add does;
   - bare (the floor the target is judged against): INSERT of the rows (session_id, role,
     content, timestamp) into a plain table;
   - searchable: the bare rows plus one row per message in a contentless FTS5 index of the
     content with the service's tokenizer: the least that makes a message searchable.
   The first Add of each user (which creates its file) is written before timing.
3. Interleaves the paths in blocks of `--block` Adds (the order of paths rotates every block), so
   a burst of machine noise or a slow disk moment lands on every path alike, and reports msg/s
   (messages / time spent in Adds), per-Add p50/p95/p99, and the ratios to both floors.
4. Profiles 100 Adds of the service path (cProfile, synchronous=NORMAL, fresh store) to show
   where an Add's time goes.
5. By message length: `--length-adds` Adds of 20 messages of exactly `--lengths` words each
   (default 10, 50, 300, 1,000: a short turn, a long one, an assistant's answer, a pasted page;
   cut from the same chat history run together, so long messages hold the same mix of names,
   dates and everyday words), through the same three paths at the first `--synchronous` level,
   fresh files per length, interleaved as above: msg/s and words/s against message length.

Why
---
An Add is synchronous: the caller waits until the messages are durable and searchable. The
target is that the service stores at least half as many messages a second as bare SQLite inserts
of the same rows, at the server's default durability (FULL). The searchable floor separates what
indexing the text costs at all from what the service derives beyond it.

Usage
-----
    python3 bench/bench_add.py                      # 1,000 Adds per path and level
    python3 bench/bench_add.py --adds 200           # a quick run
    python3 bench/bench_add.py --synchronous FULL   # the server's default only
    python3 bench/bench_add.py --lengths 10,100,1000 --length-adds 20

Results go to `bench_out/add.json` and `bench_out/add.md` (git-ignored) and the Markdown is
printed; progress goes to stderr. Exit status: 0 when the service reaches `--min-ratio` of the
bare floor's msg/s at FULL (or at the first level given), 1 otherwise, 2 on a usage error.
Standard library only.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from benchlib import (
    Samples,
    add_run_args,
    environment,
    environment_line,
    log,
    params,
    profile,
    profile_markdown,
    require_positive,
    run_and_report,
    sizes_arg,
)
from corpus import ADD_SIZE, conversation, generated

from aml_retriever.analysis.tokenizer import FTS_TOKENIZE
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import AddRequest, Message

PATHS = ("service", "bare", "searchable")
LEVELS = ("FULL", "NORMAL")
PROFILE_ADDS = 100
# Words a message, for Add throughput against message length: a short chat turn, a long one, an
# assistant's answer, a pasted page (the validator's limit is the Add's bytes, not the words).
LENGTHS = (10, 50, 300, 1000)
BARE_SCHEMA = ("CREATE TABLE messages (id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, "
               "role TEXT NOT NULL, content TEXT NOT NULL, timestamp_ms INTEGER NOT NULL)")
SEARCHABLE_SCHEMA = (f"CREATE VIRTUAL TABLE message_index USING fts5(content, content='', "
                     f"tokenize=\"{FTS_TOKENIZE}\")")
INSERT_MESSAGE = "INSERT INTO messages (session_id, role, content, timestamp_ms) VALUES (?, ?, ?, ?)"


# ---- the Adds ----------------------------------------------------------------------------


def user_adds(seed: int, user: int, count: int) -> list[AddRequest]:
    """`count` Adds of exactly ADD_SIZE messages of one user's chat history."""
    uid = f"add-user-{user}"
    stream = generated(seed + user, count * ADD_SIZE)
    return [AddRequest(f"r{i:06d}", uid, stream[i * ADD_SIZE].session_id,
                       tuple(g.message for g in stream[i * ADD_SIZE:(i + 1) * ADD_SIZE]))
            for i in range(count)]


def sized_adds(seed: int, user: int, count: int, words: int) -> list[AddRequest]:
    """`count` Adds of ADD_SIZE messages of exactly `words` words: one user's chat history run
    together and cut every `words` words (each message takes the role and time of the last turn
    it ends in)."""
    uid = f"length-user-{user}"
    stream = conversation(seed + user)
    adds = []
    for i in range(count):
        messages, session = [], ""
        for _ in range(ADD_SIZE):
            taken: list[str] = []
            while len(taken) < words:
                turn = next(stream)
                taken += turn.message.content.split()
            messages.append(Message(turn.message.role, " ".join(taken[:words]),
                                    turn.message.timestamp_ms))
            session = turn.session_id
        adds.append(AddRequest(f"r{i:06d}", uid, session, tuple(messages)))
    return adds


def round_robin(make: Callable[[int, int], list[AddRequest]], users: int,
                adds: int) -> tuple[list[AddRequest], list[AddRequest]]:
    """(first Add of each user, written untimed; `adds` timed Adds, users round-robin), from
    `make(user, count)`, a user's first `count` Adds."""
    per_user = [make(u, -(-adds // users) + 1) for u in range(users)]
    return [a[0] for a in per_user], [per_user[i % users][i // users + 1] for i in range(adds)]


def all_adds(seed: int, users: int, adds: int) -> tuple[list[AddRequest], list[AddRequest]]:
    """(first Add of each user, written untimed; the timed Adds, users round-robin)."""
    return round_robin(lambda user, count: user_adds(seed, user, count), users, adds)


# ---- the paths ---------------------------------------------------------------------------


class Writer(Protocol):
    def add(self, request: AddRequest) -> None: ...

    def close(self) -> None: ...


class ServiceWriter:
    """Everything an Add does, in-process."""

    def __init__(self, directory: Path, synchronous: str) -> None:
        self.svc = MemoryService.open(str(directory / "aml.db"), synchronous=synchronous)

    def add(self, request: AddRequest) -> None:
        self.svc.add(request)

    def close(self) -> None:
        self.svc.close()


class FloorWriter:
    """Raw sqlite3, one file per user as the service has, the same journal mode, durability and
    transaction per Add; `searchable` adds the FTS5 row of each message."""

    def __init__(self, directory: Path, synchronous: str, searchable: bool) -> None:
        self.directory, self.synchronous, self.searchable = directory, synchronous, searchable
        self.conns: dict[str, sqlite3.Connection] = {}

    def _conn(self, user_id: str) -> sqlite3.Connection:
        conn = self.conns.get(user_id)
        if conn is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.directory / f"{user_id}.db", isolation_level=None)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn.execute(BARE_SCHEMA)
            if self.searchable:
                conn.execute(SEARCHABLE_SCHEMA)
            self.conns[user_id] = conn
        return conn

    def add(self, request: AddRequest) -> None:
        conn = self._conn(request.user_id)
        rows = [(request.session_id, m.role, m.content, m.timestamp_ms) for m in request.messages]
        conn.execute("BEGIN IMMEDIATE")
        if self.searchable:
            for row in rows:
                rowid = conn.execute(INSERT_MESSAGE, row).lastrowid
                conn.execute("INSERT INTO message_index (rowid, content) VALUES (?, ?)",
                             (rowid, row[2]))
        else:
            conn.executemany(INSERT_MESSAGE, rows)
        conn.execute("COMMIT")

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()


def make_writer(path: str, directory: Path, synchronous: str) -> Writer:
    if path == "service":
        return ServiceWriter(directory, synchronous)
    return FloorWriter(directory, synchronous, searchable=path == "searchable")


# ---- measuring ---------------------------------------------------------------------------


def label(path: str, level: str) -> str:
    return f"{path} {level}"


def measure(root: Path, levels: Sequence[str], first: Sequence[AddRequest],
            timed: Sequence[AddRequest], block: int) -> dict[str, Samples]:
    """Every path writes `first` untimed, then `timed` in blocks; in each block every path
    writes the same Adds, the order of paths rotated block by block."""
    writers = {label(p, lv): make_writer(p, root / label(p, lv).replace(" ", "-"), lv)
               for lv in levels for p in PATHS}
    samples = {name: Samples(name) for name in writers}
    try:
        for writer in writers.values():
            for request in first:
                writer.add(request)
        names = list(writers)
        gc.collect()
        gc.disable()
        try:
            for number, start in enumerate(range(0, len(timed), block)):
                shift = number % len(names)
                for name in names[shift:] + names[:shift]:
                    writer, ns = writers[name], samples[name].ns
                    for request in timed[start:start + block]:
                        started = time.perf_counter_ns()
                        writer.add(request)
                        ns.append(time.perf_counter_ns() - started)
                if number % 5 == 4:
                    log(f"  {start + block:,}/{len(timed):,} Adds on every path")
        finally:
            gc.enable()
    finally:
        for writer in writers.values():
            writer.close()
    return samples


def throughput(samples: Samples, messages: int) -> float:
    return messages / (sum(samples.ns) / 1e9)


def ratios(stats: dict[str, dict[str, Any]], levels: Sequence[str], judged: str,
           min_ratio: float) -> list[dict[str, Any]]:
    rows = []
    for level in levels:
        service, bare, searchable = (stats[label(p, level)] for p in PATHS)
        ratio = service["msg_per_s"] / bare["msg_per_s"]
        rows.append({"synchronous": level, "service_bare": ratio,
                     "service_searchable": service["msg_per_s"] / searchable["msg_per_s"],
                     "searchable_bare": searchable["msg_per_s"] / bare["msg_per_s"],
                     "p50_service_bare": service["p50"] / bare["p50"],
                     "judged": level == judged, "passed": ratio >= min_ratio})
    return rows


def by_length(args: argparse.Namespace, root: Path) -> list[dict[str, Any]]:
    """Every path at the first synchronous level, for each message length, in fresh files."""
    level, rows = args.synchronous[0], []
    for words in args.lengths:
        log(f"{words}-word messages: timing {args.length_adds:,} Adds x {len(PATHS)} paths "
            f"at {level}")
        first, timed = round_robin(lambda user, count, w=words: sized_adds(args.seed, user, count, w),
                                   args.users, args.length_adds)
        messages = sum(len(a.messages) for a in timed)
        samples = measure(root / f"length-{words}", [level], first, timed, args.block)
        stats = {path: {**samples[label(path, level)].summary(),
                        "msg_per_s": throughput(samples[label(path, level)], messages)}
                 for path in PATHS}
        for s in stats.values():
            s["words_per_s"] = s["msg_per_s"] * words
        rows.append({"words": words, "adds": args.length_adds, "messages": messages,
                     "synchronous": level, "stats": stats,
                     "service_bare": stats["service"]["msg_per_s"] / stats["bare"]["msg_per_s"]})
        log(f"{words}-word messages: service {stats['service']['msg_per_s']:,.0f} msg/s, "
            f"{rows[-1]['service_bare']:.1%} of bare")
    return rows


def profile_service(root: Path, seed: int) -> dict[str, Any]:
    """PROFILE_ADDS Adds into a fresh store at NORMAL, so the profile shows the Python work
    rather than waits for the disk."""
    adds = user_adds(seed, 0, PROFILE_ADDS)
    svc = MemoryService.open(str(root / "profile" / "aml.db"), synchronous="NORMAL")
    try:
        return profile(lambda: [svc.add(a) for a in adds], len(adds), ("service.py", "add"))
    finally:
        svc.close()


# ---- reporting ---------------------------------------------------------------------------


def markdown(report: dict[str, Any]) -> str:
    p, stats = report["params"], report["stats"]
    lines = [
        "# Add throughput against SQLite's floors",
        "",
        f"- {p['adds']:,} timed Adds of {ADD_SIZE} messages ({report['messages']:,} messages) per "
        f"path and level, {p['users']} users round-robin, one file per user, WAL, one "
        f"transaction per Add; paths interleaved in blocks of {p['block']} Adds",
        "- service: in-process `MemoryService.add` (features, dates, links, segments, index "
        "terms, idempotency record); bare: INSERT of (session_id, role, content, timestamp) into "
        "a plain table; searchable: bare + a contentless FTS5 row of the content",
        "",
        "## Throughput and latency per Add (ms)",
        "",
        "| synchronous | path | msg/s | p50 | p95 | p99 | mean |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for level in p["synchronous"]:
        for path in PATHS:
            s = stats[label(path, level)]
            lines.append(f"| {level} | {path} | {s['msg_per_s']:,.0f} | {s['p50']:.3f} | "
                         f"{s['p95']:.3f} | {s['p99']:.3f} | {s['mean']:.3f} |")
    lines += ["", f"## Ratios (target: service >= {p['min_ratio']:.0%} of the bare floor's msg/s, "
              f"judged at {report['judged']})", "",
              "| synchronous | service / bare | service / searchable | searchable / bare | "
              "bare p50 / service p50 | verdict |",
              "|---|---:|---:|---:|---:|---|"]
    for row in report["ratios"]:
        verdict = "PASS" if row["passed"] else "FAIL"
        lines.append(f"| {row['synchronous']} | {row['service_bare']:.1%} | "
                     f"{row['service_searchable']:.1%} | {row['searchable_bare']:.1%} | "
                     f"{1 / row['p50_service_bare']:.1%} | "
                     f"{verdict if row['judged'] else f'({verdict}, not judged)'} |")
    if report.get("lengths"):
        level = report["lengths"][0]["synchronous"]
        lines += ["", f"## By message length (synchronous={level}, {ADD_SIZE} messages an Add)", "",
                  "| words a message | service msg/s | service words/s | service p50 ms an Add | "
                  "bare msg/s | searchable msg/s | service / bare |",
                  "|---:|---:|---:|---:|---:|---:|---:|"]
        for row in report["lengths"]:
            s = row["stats"]
            lines.append(f"| {row['words']:,} | {s['service']['msg_per_s']:,.0f} | "
                         f"{s['service']['words_per_s']:,.0f} | {s['service']['p50']:.2f} | "
                         f"{s['bare']['msg_per_s']:,.0f} | {s['searchable']['msg_per_s']:,.0f} | "
                         f"{row['service_bare']:.1%} |")
    prof = report.get("profile")
    if prof:
        lines += profile_markdown(prof, f"service Add, {PROFILE_ADDS} Adds of {ADD_SIZE} "
                                        "messages, synchronous=NORMAL")
    lines += ["", environment_line(report["env"]), ""]
    return "\n".join(lines)


# ---- command line ------------------------------------------------------------------------


def _levels(text: str) -> list[str]:
    levels = [s.strip().upper() for s in text.split(",") if s.strip()]
    if not levels or any(level not in LEVELS for level in levels):
        raise argparse.ArgumentTypeError(f"synchronous levels must be among {', '.join(LEVELS)}")
    return list(dict.fromkeys(levels))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench_add.py",
        description="Measure in-process Add throughput against raw SQLite inserts of the same "
                    "messages (bare, and with an FTS5 row), interleaved, at FULL and NORMAL.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--adds", type=int, default=1_000, help="timed Adds per path and level")
    parser.add_argument("--users", type=int, default=4, help="users the Adds go to, round-robin")
    parser.add_argument("--block", type=int, default=50,
                        help="Adds a path writes before the next path takes its turn")
    parser.add_argument("--synchronous", type=_levels, default=list(LEVELS),
                        help="comma-separated SQLite synchronous levels (FULL, NORMAL)")
    parser.add_argument("--min-ratio", type=float, default=0.5,
                        help="pass when service msg/s is at least this share of the bare floor's")
    parser.add_argument("--lengths", type=sizes_arg, default=list(LENGTHS),
                        help="words a message for the Adds by message length, comma-separated")
    parser.add_argument("--length-adds", type=int, default=50,
                        help="timed Adds per path and message length")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile pass")
    add_run_args(parser, "add",
                 "where the files are written (in a bench_add/ subdirectory)",
                 "keep the written files")
    args = parser.parse_args(argv)
    require_positive(parser, args, ("adds", "users", "block", "length_adds"))
    return args


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    loadavg_start = os.getloadavg()[0]
    shutil.rmtree(root, ignore_errors=True)  # every path writes into fresh files
    root.mkdir(parents=True)
    first, timed = all_adds(args.seed, args.users, args.adds)
    messages = sum(len(a.messages) for a in timed)
    log(f"timing {args.adds:,} Adds x {len(PATHS)} paths x {len(args.synchronous)} levels, "
        f"blocks of {args.block}")
    samples = measure(root, args.synchronous, first, timed, args.block)
    stats = {name: {**s.summary(), "msg_per_s": throughput(s, messages)}
             for name, s in samples.items()}
    judged = "FULL" if "FULL" in args.synchronous else args.synchronous[0]
    rows = ratios(stats, args.synchronous, judged, args.min_ratio)
    for row in rows:
        log(f"{row['synchronous']}: service {row['service_bare']:.1%} of bare, "
            f"{row['service_searchable']:.1%} of searchable")
    lengths = by_length(args, root)
    prof = None
    if not args.no_profile:
        log(f"profiling {PROFILE_ADDS} service Adds")
        prof = profile_service(root, args.seed)
    return {"params": params(args), "messages": messages, "stats": stats, "ratios": rows,
            "judged": judged, "lengths": lengths, "profile": prof,
            "env": environment(loadavg_start),
            "passed": all(r["passed"] for r in rows if r["judged"])}


def main(argv: Sequence[str] | None = None) -> int:
    return run_and_report("add", parse_args(argv), run, markdown)


if __name__ == "__main__":
    sys.exit(main())
