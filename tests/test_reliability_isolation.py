"""No read path returns or reveals another user's data, and deleting a user while Adds and Searches
of that user race with it leaves every Add whole or absent and, in the end, nothing of the user.

Randomized: many users with overlapping vocabularies and look-alike ids (case, accents written two
ways, a zero-width space, a slash) are checked on every read path (Search with and without options
and session filter, stats, delete, idempotency lookups), each check beside a populated control.
AML_PROPERTY_SCALE=20 runs twenty times the examples."""

from __future__ import annotations

import itertools
import os
import sqlite3
import threading
import time
from collections import Counter
from urllib.parse import quote

import pytest
from conftest import Client, start_app
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_support import broken_adds, integrity, open_user, request_contents, store_bytes, user_file

VOCABULARY = ("harbor", "lantern", "orchard", "violin", "glacier", "pepper", "compass", "meadow",
              "北京", "咖啡", "Zürich", "café")
# Distinct ids that a careless normaliser would merge: each must be its own user.
LOOK_ALIKE_IDS = ("ana", "Ana", "ANA", "ana ", " ana", "ána", "a\u0301na", "ana\u200b", "ana/1",
                  "ana%2F1", "\u0430na")
SCALE = max(1, int(os.environ.get("AML_PROPERTY_SCALE", "1")))
# FTS5 bookkeeping tables: no user rows of their own (the marker check covers their bytes).
SHADOW_SUFFIXES = ("_data", "_idx", "_docsize", "_config", "_content")


def user_tables(conn: sqlite3.Connection) -> list[str]:
    """Every table of a user file that holds rows of the user: all but bookkeeping."""
    names = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return [n for n in names if n not in ("meta", "sqlite_sequence")
            and not n.endswith(SHADOW_SUFFIXES)]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    app = start_app(tmp_path_factory.mktemp("isolation"))
    yield app
    app.stop()


worlds = st.lists(
    st.tuples(st.sampled_from(LOOK_ALIKE_IDS),
              st.lists(st.lists(st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=6),
                                min_size=1, max_size=3), min_size=1, max_size=3)),
    min_size=2, max_size=4, unique_by=lambda user: user[0])
example_numbers = itertools.count()


def contents(response) -> list[str]:
    assert response.status == 200, response.body
    return [item["content"] for item in response.body["data"]]


@settings(max_examples=12 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds)
def test_no_read_path_returns_or_reveals_another_users_data(http, world):
    n = next(example_numbers)
    users = {f"w{n}-{variant}": adds for variant, adds in world}
    marker = {user: f"own{n}x{i}" for i, user in enumerate(users)}
    stored: dict[str, list[str]] = {user: [] for user in users}
    for user, adds in users.items():
        for a, add in enumerate(adds):  # the same request ids under every user: different keys
            messages = [f"{marker[user]} {' '.join(words)}" for words in add]
            assert http.add(user, f"r{a}", messages, session=f"s{a % 2}").status == 200
            stored[user] += messages

    for user in users:
        own = set(stored[user])
        others = [m for other in users if other != user for m in (marker[other],)]
        for word in sorted({w for message in stored[user] for w in message.split()[1:]})[:4]:
            found = contents(http.search(user, word, top_k=100))
            assert found, (user, word)  # populated control: the user's own word is found
            assert all(marker[user] in text for text in found)
            assert not any(m in text for text in found for m in others)
            with_options = contents(http.search(user, word, top_k=100, options=list(VOCABULARY)))
            assert with_options and all(marker[user] in text for text in with_options)
            in_session = http.search(user, word, top_k=100, session_id="s0", filter_session=True)
            assert all(item["session_id"] == "s0" and marker[user] in item["content"]
                       for item in in_session.body["data"])
        for other_marker in others:  # another user's unique word finds nothing here...
            assert contents(http.search(user, other_marker)) == []
        assert contents(http.search(user, marker[user], top_k=100))  # ...while one's own does
        assert own >= {t for text in contents(http.search(user, marker[user], top_k=100))
                       for t in text.split("\n")}

    # Idempotency lookups: a request id another user used is free here, and nothing is revealed.
    first, second = list(users)[:2]
    fresh = f"{marker[first]} only the first user sent this"
    assert http.add(first, "only-first", [fresh]).status == 200
    stored[first].append(fresh)
    taken = http.add(second, "only-first", [f"{marker[second]} a different payload"])
    assert (taken.status, taken.body["replayed"]) == (200, False)  # not a 409: no hint
    stored[second].append(f"{marker[second]} a different payload")
    replay = http.add(first, "only-first", [fresh])
    assert (replay.status, replay.body["replayed"]) == (200, True)  # control: one's own is known
    conflict = http.add(first, "only-first", ["another payload"])
    assert conflict.status == 409 and marker[first] not in conflict.raw.decode()

    stats = http.request("GET", "/stats")
    assert set(stats.body) == {"users", "messages", "sessions", "requests", "store_bytes",
                               "damaged_user_files", "unreadable_user_files",
                               "quarantined_user_files"}
    assert not any(m.encode() in stats.raw or u.encode() in stats.raw
                   for u, m in marker.items())

    # Deleting one user removes exactly that user's rows; the others answer as before, to the score.
    gone = list(users)[-1]
    before = {user: http.search(user, "harbor lantern orchard 北京", top_k=100).body
              for user in users if user != gone}
    messages_before = stats.body["messages"]
    deleted = http.request("DELETE", "/users/" + quote(gone, safe=""))
    assert deleted.status == 200 and deleted.body["deleted"]["messages"] == len(stored[gone])
    assert contents(http.search(gone, marker[gone])) == []
    assert http.request("GET", "/stats").body["messages"] == messages_before - len(stored[gone])
    for user, answer in before.items():
        assert http.search(user, "harbor lantern orchard 北京", top_k=100).body == answer


RACE_MARKER = "zqracemark4417"
KEEP_MARKER = "keepmark9902"


def test_delete_racing_adds_and_searches_leaves_adds_whole_and_then_nothing(make_app):
    app = make_app(checkpoint_interval=0.1)
    db = app.store.path
    c = Client(app.port)
    assert c.add("bystander", "k1", [f"{KEEP_MARKER} stays", f"{KEEP_MARKER} stays too"]).status == 200
    stop = threading.Event()
    answers: Counter[str] = Counter()
    sent: dict[str, list[str]] = {}
    lock = threading.Lock()

    def add_loop(t: int) -> None:
        client = Client(app.port)
        for i in itertools.count():
            if stop.is_set():
                break
            if i % 4 == 3:  # retry an earlier Add: a replay, or stored again after a delete
                rid = f"a{t}-{i - 3}"
            else:
                rid = f"a{t}-{i}"
                with lock:
                    sent[rid] = [f"{RACE_MARKER} {rid} message {p} 竞态标记" for p in range(3)]
            response = client.add("racer", rid, sent[rid], session=f"s{t}")
            with lock:
                answers[f"add {response.status}"] += 1
        client.close()

    def search_loop() -> None:
        client = Client(app.port)
        while not stop.is_set():
            response = client.search("racer", RACE_MARKER, top_k=50)
            with lock:
                answers[f"search {response.status}"] += 1
            assert all(RACE_MARKER in item["content"] for item in response.body["data"])
        client.close()

    def delete_loop() -> None:
        client = Client(app.port)
        while not stop.is_set():
            with lock:
                answers[f"delete {client.request('DELETE', '/users/racer').status}"] += 1
            time.sleep(0.02)
        client.close()

    threads = [threading.Thread(target=add_loop, args=(t,)) for t in range(3)]
    threads += [threading.Thread(target=search_loop), threading.Thread(target=delete_loop)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert {key.split()[1] for key in answers} == {"200"}, answers  # never a 409 or a 500
    assert answers["add 200"] > 30 and answers["delete 200"] > 10  # control: they did race

    if user_file(db, "racer").exists():  # (a deletion last, its file unlinked: nothing left)
        conn = open_user(db, "racer")
        try:
            assert broken_adds(conn) == [] and integrity(conn) == []
            for rid, held in request_contents(conn).items():
                assert held == sent[rid]  # every surviving Add is whole
        finally:
            conn.close()

    assert c.request("DELETE", "/users/racer").status == 200
    again = c.add("racer", "a0-0", sent["a0-0"], session="s0")  # a retry after the delete
    assert (again.status, again.body["replayed"], again.body["stored"]) == (200, False, 3)
    found = "\n".join(c.contents("racer", RACE_MARKER, top_k=50)).split("\n")
    assert sorted(found) == sorted(sent["a0-0"])  # stored again, whole, and nothing else
    assert RACE_MARKER.encode() in store_bytes(db)  # control for the byte check below

    assert user_file(db, "racer").exists()  # control for the check below
    assert c.request("DELETE", "/users/racer").body["deleted"]["messages"] == 3
    if user_file(db, "racer").exists():  # held by the checkpoint pass: left emptied
        conn = open_user(db, "racer")
        try:
            tables = user_tables(conn)
            assert {"messages", "requests", "sessions", "views", "message_index"} <= set(tables)
            assert {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables} == \
                dict.fromkeys(tables, 0)
        finally:
            conn.close()
    deadline = time.monotonic() + 10
    while RACE_MARKER.encode() in store_bytes(db) and time.monotonic() < deadline:
        time.sleep(0.1)  # the planned checkpoint retries while a reader holds the file
    on_disk = store_bytes(db)
    assert RACE_MARKER.encode() not in on_disk and "竞态标记".encode() not in on_disk
    assert KEEP_MARKER.encode() in on_disk  # control: the bystander's bytes are all there
    assert c.contents("bystander", KEEP_MARKER) == [f"{KEEP_MARKER} stays", f"{KEEP_MARKER} stays too"]
    wal = user_file(db, "racer").with_name(user_file(db, "racer").name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0
