"""What does a message cost on disk and in memory, and how do costs grow with the store?

What it does
------------
For each store size (default 10,000, 100,000 and 1,000,000 messages in all), a store of words
users of ~1,000 messages each (`corpus.others_store`: built with `svc.add` in parallel processes,
once, shared with the other benchmarks and reused from a kept `--workdir`; a smaller store's users
are the first users of a larger one), and the largest size once more as users of
`--large-user-messages` (default 10,000) each, since what a server keeps in memory depends on
how big the files it has open are:

1. Bytes on disk: the catalog, every user file and any -wal/-shm left (none after a clean close:
   the WAL is checkpointed), per message, against the raw UTF-8 bytes of the messages' content;
   the target is at most 3.5x (issue 44; 4x before it). For one representative user of the
   largest store, the bytes of every table and index (SQLite's dbstat virtual table), so a
   reader sees where they go; and the file of a user of one short message, written into a new
   store (the target is at most 64 KiB: its schema and small tables).
2. Build rate: messages per second of the parallel build (svc.add, 20-message Adds).
3. Search latency in-process over random users: `--searches` Searches, each for a random user
   with a question from that user's messages, and, interleaved, the floor: one FTS5 query over
   that user's file. Both keep up to 64 connections open (the service's pool of idle
   connections), so a store of many users costs both paths the same file opens.
4. Server memory: the real server (`python3 -m aml_retriever serve`, default settings) over the
   store (its user files linked into a scratch store, so the shared one is never written), idle
   and then after `--rss-requests` requests from 16 keep-alive clients (every worker busy and
   more waiting, so the pool of idle connections fills): Searches spread over all users and 10% Adds to
   new users. VmRSS and VmHWM (the peak) from /proc; the target is a peak of at most 200 MB.

Why
---
Peers scan every row of a user on every query; this service answers from per-user indexes, and
must show that neither the disk nor the memory it takes for that grows out of proportion: bytes
per message stay flat with the store, Search time depends on the user, not the store, and the
server's memory is bounded by its connection caches and its held state, not by the data. That
bound is about the pool's idle connections (64) x the smaller of a user's file and SQLite's page
cache per connection (2 MB by default), plus the held budget (`--held-megabytes`, 64 MiB by
default), so stores of big users are measured too (docs/BENCHMARKS.md splits the peak kind by
kind).

Usage
-----
    python3 bench/bench_footprint.py --workdir /var/tmp/bench --keep   # 10k, 100k, 1M; reused
    python3 bench/bench_footprint.py --sizes 2000,10000 --searches 100 --rss-requests 500  # quick

Results go to `bench_out/footprint.json` and `bench_out/footprint.md` (git-ignored) and the
Markdown is printed; progress goes to stderr. Exit status: 0 when every size is within
`--max-bytes-ratio` of its raw content, the one-message user within 64 KiB and the server's
peak RSS within `--max-rss-mb`, 1 otherwise, 2 on a usage error. Standard library only.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import os
import random
import shutil
import sqlite3
import sys
import time
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_http import Phase, run_phase, summarize
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
    sizes_arg,
)
from corpus import (
    OthersPlan,
    OthersStore,
    link_users,
    others_store,
    shared_dir,
    store_bytes,
    user_files,
    word_adds,
    word_messages,
    word_queries,
)

from aml_retriever.engine.query import plan
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import SearchRequest
from aml_retriever.storage.pool import IDLE_CONNECTIONS
from aml_retriever.storage.store import Store

TOP_K = 10
FLOOR_SQL = ("SELECT rowid, bm25(message_index) FROM message_index WHERE message_index MATCH ? "
             "ORDER BY rank LIMIT ?")
QUERY_SOURCE_MESSAGES = 100  # questions come from each user's first messages (a cheap prefix)
QUERIES_PER_USER = 5
RSS_CLIENTS = 16  # more than the server's 4 workers: every one busy, the connection pool fills
RSS_ADD_SHARE = 0.1
# The smallest user file's target (issue 44): every table and index takes a page at least, so
# a user of one short message costs its schema and small tables.
ONE_MESSAGE_MAX_BYTES = 64 * 1024


def rw_connect(path: Path) -> sqlite3.Connection:
    """A connection that only reads but may write: closing it removes the -wal/-shm it made,
    where a read-only one would leave them beside the shared store's files."""
    return sqlite3.connect(f"{path.as_uri()}?mode=rw", uri=True, isolation_level=None)


# ---- bytes -------------------------------------------------------------------------------


def disk_and_content(path: Path) -> dict[str, Any]:
    """Bytes on disk, and the messages and raw content bytes they hold, read from every file."""
    messages = content = users = 0
    for file in user_files(path):
        conn = rw_connect(file)
        try:
            count, size = conn.execute(
                "SELECT count(*), coalesce(sum(length(CAST(content AS BLOB))), 0) FROM messages"
            ).fetchone()
        finally:
            conn.close()
        messages, content, users = messages + count, content + size, users + (count > 0)
    disk = store_bytes(path)
    return {"disk": disk, "messages": messages, "users": users, "content_bytes": content,
            "bytes_per_message": disk["total"] / messages,
            "content_per_message": content / messages, "ratio": disk["total"] / content}


def one_message_user(root: Path, seed: int) -> dict[str, Any]:
    """The smallest user: one short message written through the service into a new store, then
    closed (the WAL checkpointed). The bytes of its user file, and its pages."""
    path = root / "one-message" / "aml.db"
    shutil.rmtree(path.parent, ignore_errors=True)
    svc = MemoryService.open(str(path))
    try:
        svc.add(word_adds(seed, "one-message", 1)[0])
    finally:
        svc.close()
    (file,) = user_files(path)
    size = file.stat().st_size
    conn = rw_connect(file)
    try:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    return {"bytes": size, "pages": size // page_size, "page_size": page_size,
            "passed": size <= ONE_MESSAGE_MAX_BYTES}


def table_breakdown(file: Path) -> dict[str, Any]:
    """Bytes of every table and index of one user file (dbstat), with what its messages hold."""
    conn = rw_connect(file)
    try:
        rows = conn.execute("SELECT name, count(*), sum(pgsize), sum(payload) FROM dbstat "
                            "GROUP BY name ORDER BY 3 DESC, 1").fetchall()
        messages, content, keys = conn.execute(
            "SELECT count(*), sum(length(CAST(content AS BLOB))), "
            "sum(length(CAST(signal_keys AS BLOB))) FROM messages").fetchone()
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        freelist = conn.execute("PRAGMA freelist_count").fetchone()[0]
    finally:
        conn.close()
    return {"file_bytes": file.stat().st_size, "messages": messages, "content_bytes": content,
            "signal_keys_bytes": keys, "page_size": page_size, "free_pages": freelist,
            "tables": [{"name": n, "pages": pages, "bytes": size, "payload": payload}
                       for n, pages, size, payload in rows]}


# ---- Search ------------------------------------------------------------------------------


def user_questions(seed: int, store_plan: OthersPlan) -> dict[str, list[str]]:
    return {uid: word_queries(seed, word_messages(seed, uid, min(count, QUERY_SOURCE_MESSAGES)),
                              QUERIES_PER_USER)
            for uid, count in store_plan.users()}


class Floor:
    """One FTS5 query on the user's file, with connections kept as the service keeps them."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.conns: OrderedDict[str, sqlite3.Connection] = OrderedDict()

    def query(self, user_id: str, expression: str) -> list[Any]:
        conn = self.conns.get(user_id)
        if conn is None:
            conn = self.conns[user_id] = rw_connect(self.store.shard_path(user_id))
            while len(self.conns) > IDLE_CONNECTIONS:
                self.conns.popitem(last=False)[1].close()
        else:
            self.conns.move_to_end(user_id)
        return conn.execute(FLOOR_SQL, (expression, TOP_K)).fetchall()

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()


def measure_search(path: Path, questions: dict[str, list[str]], count: int,
                   seed: int) -> dict[str, Samples]:
    """`count` Searches of random users, each next to the floor for the same user and query,
    the order of the two alternating."""
    rng = random.Random(f"{seed}:footprint-search")
    users = sorted(questions)
    picks = [(u, rng.choice(questions[u])) for u in (rng.choice(users) for _ in range(count))]
    svc = MemoryService.open(str(path), synchronous="NORMAL")
    floor = Floor(svc.store)
    paths = [("service", lambda u, q: svc.search(SearchRequest(q, u, TOP_K, (), None))),
             ("floor", lambda u, q: floor.query(u, plan(q).expression or '""'))]
    samples = {name: Samples(name) for name, _ in paths}
    try:
        for u, q in picks[:min(50, count)]:  # warm-up: the code paths, not the files
            for _, call in paths:
                call(u, q)
        gc.collect()
        gc.disable()
        try:
            for i, (u, q) in enumerate(picks):
                for name, call in (paths if i % 2 == 0 else paths[::-1]):
                    started = time.perf_counter_ns()
                    call(u, q)
                    samples[name].ns.append(time.perf_counter_ns() - started)
        finally:
            gc.enable()
    finally:
        floor.close()
        svc.close()
    return samples


# ---- server memory -----------------------------------------------------------------------


def measure_server(others: OthersStore, scratch: Path, questions: dict[str, list[str]],
                   requests: int, seed: int, held_megabytes: int | None = None) -> dict[str, Any]:
    """Serve a linked copy of the store, load it, read VmRSS and VmHWM; with `held_megabytes`,
    the server holds that much of its users' reads (`--held-megabytes`: 0 holds nothing)."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    path = scratch / "aml.db"
    Store(path, synchronous="NORMAL").close()
    link_users(others.path, path)
    rng = random.Random(f"{seed}:footprint-rss")
    searches = [(u, q) for u, qs in questions.items() for q in qs]
    rng.shuffle(searches)
    try:
        held = () if held_megabytes is None else ("--held-megabytes", str(held_megabytes))
        with ServerProcess(path, scratch / "server.log", *held) as server, \
                multiprocessing.get_context("spawn").Pool(1) as pool:
            time.sleep(0.5)
            idle = server.memory_mb()
            phase = Phase("mix", RSS_CLIENTS, 0, server.port, server.proc.pid, seed,
                          searches=tuple(searches), search_share=1 - RSS_ADD_SHARE,
                          requests=max(1, requests // RSS_CLIENTS))
            load = summarize(pool.apply(run_phase, (phase,)), RSS_CLIENTS, "rss")
            loaded = server.memory_mb()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"idle_mb": idle["VmRSS"], "rss_mb": loaded["VmRSS"], "hwm_mb": loaded["VmHWM"],
            "requests": load["requests"], "errors": load["errors"], "req_per_s": load["req_per_s"],
            "search_p50_ms": load["ops"].get("search", {}).get("p50"),
            "server_cores": load["server_cores"]}


# ---- one size ----------------------------------------------------------------------------


def measure_size(args: argparse.Namespace, root: Path, size: int, per_user: int) -> dict[str, Any]:
    store_plan = OthersPlan(args.seed, size, per_user)
    others = others_store(shared_dir(root), store_plan, args.jobs)
    log(f"n={size:,}: bytes on disk and content")
    row: dict[str, Any] = {"size": size, "messages_per_user": per_user, "build": others.build,
                           **disk_and_content(others.path)}
    questions = user_questions(args.seed, store_plan)
    log(f"n={size:,}: {args.searches:,} Searches of random users, with the floor")
    samples = measure_search(others.path, questions, args.searches, args.seed)
    row["search_ms"] = {name: s.summary() for name, s in samples.items()}
    log(f"n={size:,}: server memory under {args.rss_requests:,} requests of {RSS_CLIENTS} clients")
    row["server"] = measure_server(others, root / f"serve-n{size}-u{per_user}", questions,
                                   args.rss_requests, args.seed, args.held_megabytes)
    row["passed_bytes"] = row["ratio"] <= args.max_bytes_ratio
    row["passed_rss"] = row["server"]["hwm_mb"] <= args.max_rss_mb
    log(f"n={size:,}: {row['bytes_per_message']:.0f} B/msg ({row['ratio']:.2f}x content), Search "
        f"p50 {row['search_ms']['service']['p50']:.2f} ms, server peak "
        f"{row['server']['hwm_mb']:.0f} MB")
    return row


# ---- reporting ---------------------------------------------------------------------------


def _shape(row: dict[str, Any]) -> str:
    return f"{row['users']:,} x {row['messages_per_user']:,}"


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def markdown(report: dict[str, Any]) -> str:
    p, rows = report["params"], report["sizes"]
    lines = [
        "# Footprint and growth: disk, memory and Search time at 10k, 100k and 1M messages"
        if [r["size"] for r in rows] == [10_000, 100_000, 1_000_000] else
        "# Footprint and growth: disk, memory and Search time by store size",
        "",
        f"- Stores of words users of ~{p['messages_per_user']:,} messages (about 20 words each), "
        f"written with svc.add in {p['jobs']} processes (20-message Adds, synchronous=NORMAL)",
        f"- Search: {p['searches']:,} Searches of random users (top_k {TOP_K}), the floor (one "
        f"FTS5 query on the user's file) interleaved; both keep {IDLE_CONNECTIONS} "
        "connections open",
        f"- Server: default settings over a linked copy of the store, {RSS_CLIENTS} keep-alive "
        f"clients, {p['rss_requests']:,} requests ({1 - RSS_ADD_SHARE:.0%} Searches of random "
        f"users, {RSS_ADD_SHARE:.0%} 20-message Adds to new users)",
        "",
        f"## Disk (target: at most {p['max_bytes_ratio']}x the raw content bytes)",
        "",
        "| messages | users x messages | disk MB | bytes / message | content bytes / message | "
        "disk / content | -wal + -shm MB | build s | build msg/s | verdict |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        b = r["build"]
        lines.append(f"| {r['messages']:,} | {_shape(r)} | {r['disk']['total'] / 1e6:,.1f} | "
                     f"{r['bytes_per_message']:,.0f} | {r['content_per_message']:,.0f} | "
                     f"{r['ratio']:.2f}x | {(r['disk']['wal'] + r['disk']['shm']) / 1e6:.1f} | "
                     f"{b['seconds']:,.1f}{' (reused)' if b.get('reused') else ''} | "
                     f"{b['messages_per_second']:,} | {_verdict(r['passed_bytes'])} |")
    lines += ["", "## Search over random users (ms, in-process)", "",
              "| messages | users x messages | service p50 | p95 | p99 | floor p50 | p95 | p99 | "
              "p50 / floor |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        s, f = r["search_ms"]["service"], r["search_ms"]["floor"]
        lines.append(f"| {r['messages']:,} | {_shape(r)} | {s['p50']:.3f} | {s['p95']:.3f} | "
                     f"{s['p99']:.3f} | {f['p50']:.3f} | {f['p95']:.3f} | {f['p99']:.3f} | "
                     f"{s['p50'] / f['p50']:.2f}x |")
    lines += ["", f"## Server memory (target: peak at most {p['max_rss_mb']} MB)", "",
              "| messages | users x messages | idle RSS MB | RSS after load MB | peak (VmHWM) MB | "
              "requests | req/s | Search p50 ms (HTTP) | server cores | errors | verdict |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        m = r["server"]
        lines.append(f"| {r['messages']:,} | {_shape(r)} | {m['idle_mb']:.0f} | {m['rss_mb']:.0f} | "
                     f"{m['hwm_mb']:.0f} | {m['requests']:,} | {m['req_per_s']:,.0f} | "
                     f"{m['search_p50_ms'] or 0:.2f} | {m['server_cores']:.2f} | {m['errors']} | "
                     f"{_verdict(r['passed_rss'])} |")
    one = report["one_message"]
    lines += ["", f"A user of one short message: {one['bytes']:,} bytes on disk ({one['pages']} pages "
              f"of {one['page_size']:,} bytes; target at most {ONE_MESSAGE_MAX_BYTES:,}): "
              f"{_verdict(one['passed'])}."]
    t = report["breakdown"]
    lines += ["", f"## Where the bytes go: one user of {t['messages']:,} messages (dbstat)", "",
              f"File {t['file_bytes']:,} bytes ({t['file_bytes'] / t['messages']:,.0f} a message); "
              f"content {t['content_bytes']:,} bytes, signal keys {t['signal_keys_bytes']:,} bytes; "
              f"page size {t['page_size']:,}, {t['free_pages']} free pages.", "",
              "| table or index | pages | bytes | bytes / message | share of file | payload bytes |",
              "|---|---:|---:|---:|---:|---:|"]
    for table in t["tables"]:
        lines.append(f"| {table['name']} | {table['pages']:,} | {table['bytes']:,} | "
                     f"{table['bytes'] / t['messages']:,.0f} | "
                     f"{table['bytes'] / t['file_bytes']:.1%} | {table['payload']:,} |")
    lines += ["", environment_line(report["env"]), ""]
    return "\n".join(lines)


# ---- command line ------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench_footprint.py",
        description="Measure bytes on disk per message against the raw content, Search time over "
                    "random users and the server's memory, at several store sizes.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--sizes", type=sizes_arg, default=[10_000, 100_000, 1_000_000],
                        help="comma-separated store sizes (messages in all)")
    parser.add_argument("--messages-per-user", type=int, default=1_000,
                        help="messages per user (sets the number of users)")
    parser.add_argument("--large-user-messages", type=int, default=10_000,
                        help="also measure the largest size as users of this many messages "
                             "(0: do not): bigger user files fill bigger connection caches")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="processes building a store")
    parser.add_argument("--searches", type=int, default=1_000,
                        help="in-process Searches of random users per size")
    parser.add_argument("--rss-requests", type=int, default=4_000,
                        help="requests sent to the server before its memory is read")
    parser.add_argument("--held-megabytes", type=int, default=None,
                        help="the server's --held-megabytes (default: its own default; 0 holds "
                             "nothing, as a server of many users asked at random mostly does)")
    parser.add_argument("--max-bytes-ratio", type=float, default=3.5,
                        help="pass when disk bytes are at most this times the content bytes")
    parser.add_argument("--max-rss-mb", type=float, default=200.0,
                        help="pass when the server's peak RSS is at most this many MB")
    add_run_args(parser, "footprint",
                 "where the stores are built (bench_footprint/ and shared/ in it)",
                 "keep the stores (a later run with the same --workdir reuses them)")
    args = parser.parse_args(argv)
    require_positive(parser, args, ("messages_per_user", "jobs", "searches", "rss_requests"))
    if args.large_user_messages < 0:
        parser.error("--large-user-messages must be at least 0")
    return args


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    loadavg_start = os.getloadavg()[0]
    root.mkdir(parents=True, exist_ok=True)
    shapes = [(size, args.messages_per_user) for size in args.sizes]
    if args.large_user_messages and args.large_user_messages != args.messages_per_user:
        shapes.append((args.sizes[-1], args.large_user_messages))
    rows = [measure_size(args, root, size, per_user) for size, per_user in shapes]
    largest = OthersPlan(args.seed, args.sizes[-1], args.messages_per_user)
    first_user = user_files(others_store(shared_dir(root), largest, args.jobs).path)[0]
    one = one_message_user(root, args.seed)
    return {"params": params(args), "sizes": rows, "breakdown": table_breakdown(first_user),
            "one_message": one, "env": environment(loadavg_start),
            "passed": one["passed"] and all(r["passed_bytes"] and r["passed_rss"] for r in rows)}


def main(argv: Sequence[str] | None = None) -> int:
    return run_and_report("footprint", parse_args(argv), run, markdown)


if __name__ == "__main__":
    sys.exit(main())
