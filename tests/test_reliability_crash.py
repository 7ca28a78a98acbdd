"""A server killed with SIGKILL at random moments, with Adds from several clients in flight, loses
no acknowledged Add and leaves no partial one. After every restart on the same store: each Add
answered 200 is whole (every message, in order) and searchable, replaying any Add sent so far is a
200 (a replay when it was stored, never a 409 or a second copy), and every file passes SQLite's
integrity check and FTS5's.

At least 20 kill cycles run in the suite; AML_CRASH_CYCLES=500 runs more."""

from __future__ import annotations

import http.client
import json
import os
import random
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from reliability_support import ServerProcess, broken_adds, integrity, open_user, request_contents, user_file

CYCLES = max(20, int(os.environ.get("AML_CRASH_CYCLES", "20")))
CLIENTS = 4
USERS = ("crash-ana", "crash-ben", "崩溃-用户")
VOCABULARY = ("harbor", "lantern", "orchard", "violin", "glacier", "pepper", "compass", "meadow",
              "北京", "咖啡", "Zürich", "fjord")


@dataclass
class Add:
    user: str
    request_id: str
    body: bytes
    contents: list[str]
    marker: str


@dataclass
class Ledger:
    """What the clients sent: answered 200, or cut off by the kill (outcome unknown)."""

    acknowledged: dict[tuple[str, str], Add] = field(default_factory=dict)
    in_flight: list[Add] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def build_add(rng: random.Random, user: str, tag: str) -> Add:
    contents = []
    for position in range(rng.randint(1, 6)):
        words = " ".join(rng.choice(VOCABULARY) for _ in range(rng.randint(2, 12)))
        contents.append(f"mk{tag}p{position} {words}")
    messages = [{"role": rng.choice(["user", "assistant"]), "content": content,
                 # a third of the messages take the receive time, which a replay must not change
                 "timestamp": None if rng.random() < 0.3 else 1_700_000_000_000 + rng.randrange(10**9)}
                for content in contents]
    body = {"request_id": f"req-{tag}", "user_id": user, "session_id": f"session-{rng.randrange(3)}",
            "messages": messages}
    return Add(user, body["request_id"], json.dumps(body).encode(), contents, f"mk{tag}p0")


def post(conn: http.client.HTTPConnection, path: str, body: bytes) -> tuple[int, dict]:
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, json.loads(response.read())


def drive(port: int, cycle: int, client: int, seed: int, ledger: Ledger) -> None:
    """Send Adds back to back on one keep-alive connection until the server dies."""
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    n = 0
    while True:
        # one client writes to a user new in this cycle, so a kill can land while a file is created
        user = f"crash-new-{cycle}" if client == 0 and n < 3 else rng.choice(USERS)
        add = build_add(rng, user, f"{cycle}c{client}n{n}")
        n += 1
        try:
            status, answer = post(conn, "/add", add.body)
        except (OSError, http.client.HTTPException):
            with ledger.lock:
                ledger.in_flight.append(add)
            return
        with ledger.lock:
            if status == 200 and answer["stored"] == len(add.contents) and not answer["replayed"]:
                ledger.acknowledged[(add.user, add.request_id)] = add
            else:
                ledger.unexpected.append(f"{status} {answer}")


def verify_after_restart(server: ServerProcess, adds: list[Add], unknown: list[Add],
                         ledger: Ledger) -> None:
    """Replays and searches against the restarted server."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    for add in unknown:  # cut off mid-request: whole or absent; a retry stores it or replays it
        status, answer = post(conn, "/add", add.body)
        assert status == 200 and answer["stored"] == len(add.contents), (answer, server.lines)
        ledger.acknowledged[(add.user, add.request_id)] = add
    for add in adds:
        status, answer = post(conn, "/add", add.body)
        assert (status, answer.get("replayed"), answer.get("stored")) == (200, True, len(add.contents)), \
            (answer, server.lines)
        status, found = post(conn, "/search", json.dumps(
            {"user_id": add.user, "query": add.marker, "top_k": 5}).encode())
        assert status == 200, (found, server.lines)
        assert any(add.marker in item["content"] for item in found["data"]), add.request_id
    conn.close()


def verify_files(db: Path, ledger: Ledger, check_fts: bool) -> None:
    for user in {user for user, _ in ledger.acknowledged}:
        conn = open_user(db, user)
        try:
            assert [row[0] for row in conn.execute("PRAGMA integrity_check")] == ["ok"]
            if check_fts:
                assert integrity(conn) == []
            assert broken_adds(conn) == []
            stored = request_contents(conn)
        finally:
            conn.close()
        mine = {rid: add.contents for (owner, rid), add in ledger.acknowledged.items() if owner == user}
        assert stored == mine  # every acknowledged Add, byte for byte, once; nothing else


@pytest.mark.slow
def test_sigkill_mid_add_loses_no_acknowledged_add_and_leaves_no_partial_one(tmp_path):
    db = tmp_path / "aml.db"
    rng = random.Random(20260805)
    ledger = Ledger()
    previous: list[Add] = []
    unknown: list[Add] = []
    killed_mid_add = 0
    for cycle in range(CYCLES):
        server = ServerProcess(db)
        try:
            verify_after_restart(server, previous, unknown, ledger)
            if cycle % max(1, CYCLES // 20) == 0:  # about 20 full file checks however many cycles
                verify_files(db, ledger, check_fts=False)
            before = set(ledger.acknowledged)
            ledger.in_flight = []
            clients = [threading.Thread(target=drive, args=(server.port, cycle, c,
                                                            rng.randrange(2**32), ledger))
                       for c in range(CLIENTS)]
            for t in clients:
                t.start()
            time.sleep(rng.uniform(0.05, 0.35))
        finally:
            server.kill()
        for t in clients:
            t.join(timeout=30)
        assert ledger.unexpected == []
        killed_mid_add += bool(ledger.in_flight)
        previous = [ledger.acknowledged[key] for key in set(ledger.acknowledged) - before]
        unknown = list(ledger.in_flight)
    server = ServerProcess(db)
    try:
        verify_after_restart(server, previous, unknown, ledger)
    finally:
        assert server.stop() == 0
    verify_files(db, ledger, check_fts=True)
    catalog = sqlite3.connect(db)
    assert catalog.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    catalog.close()
    assert user_file(db, "crash-ana").exists() and len(ledger.acknowledged) > CYCLES  # control
    assert killed_mid_add >= CYCLES // 2  # the kills did land while Adds were in flight
    print(f"\ncrash cycles: {CYCLES}, acknowledged Adds: {len(ledger.acknowledged)}, "
          f"cycles killed with an Add in flight: {killed_mid_add}")
