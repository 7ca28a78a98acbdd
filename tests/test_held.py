"""What a serving process holds of a user between Searches (engine/held.py): every answer is the
one a Search reading everything gives, byte for byte; a write in any process (an Add, a forget,
a review, a delete) is seen by the next Search of every process; the held states stay within
their budget; nothing held of one user reaches another."""

from __future__ import annotations

import gc
import itertools
import json
import sqlite3
import tracemalloc
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import Client, start_app
from reliability_support import serve

from aml_retriever.engine import window
from aml_retriever.engine.held import HELD_BYTES, Held, HeldUsers, content_bytes
from aml_retriever.memory import reader_view
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import AddRequest, Message, SearchRequest
from aml_retriever.settings import BY_NAME
from aml_retriever.storage import generation
from aml_retriever.storage import speakers as stored_speakers
from aml_retriever.storage.store import Store
from aml_retriever.storage.timeline import CURRENT, ReadFilter

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_700_000_000_000
DAY_MS = 86_400_000

# Two people over several days: names, numbers, dates, a long reply, repeated words.
SESSIONS = [
    ["Hey Mel! I adopted a dog named Biscuit on 3 May 2023.",
     "Caroline, that is wonderful. How old is Biscuit?",
     "She is 4 years old and loves the beach near Santa Cruz.",
     "I ran 5 km yesterday with my sister Ana."],
    ["Mel, I started pottery classes last week.",
     "Thanks, Caroline! Pottery sounds relaxing. " + "I keep a long journal of everything. " * 40,
     "My sister Ana gave me a violin for my birthday.",
     "The violin lessons start on Tuesday at 6 pm."],
    ["Biscuit chewed the violin case, can you believe it?",
     "Oh no! Did you fix the case?",
     "Yes, it cost 40 dollars at the music shop in May.",
     "Next month we go camping in Yosemite with Ana."],
]
# A session long enough that a term's list is cut at its depth (a Search of top_k 100 reads a
# term 400 deep, one of top_k 5 80 deep): what is held of one depth must not answer another.
DIARY = [f"diary entry {i}: walked Biscuit {i % 7} km and practised violin" for i in range(450)]
QUERIES = [
    "What is the name of Caroline's dog?", "When did Caroline adopt Biscuit?",
    "What did Mel say about pottery?", "How much did the violin case cost?",
    "Where does Biscuit love to go?", "What happened in May 2023?", "who is Ana",
    "violin lessons", "camping trip plans", "journal", "sister", "what did I run",
    "nothing here matches zzzz", "diary walked Biscuit", "how many km",
]


def add(svc: MemoryService, user: str, sessions: list[list[str]] = SESSIONS) -> None:
    for s, texts in enumerate(sessions):
        messages = tuple(Message("user" if i % 2 == 0 else "assistant", text,
                                 T0 + s * DAY_MS + i * 60_000) for i, text in enumerate(texts))
        svc.add(AddRequest(f"{user}-s{s}", user, f"s{s}", messages))


def answers(svc: MemoryService, user: str, **search: Any) -> list[str]:
    """Every query's answer as JSON, at several depths, explained and not, in a session."""
    found = []
    for query in QUERIES:
        for top_k, extra in ((5, {}), (100, {}), (10, {"explain": True}),
                             (10, {"session_id": "s1"}), (20, {"max_words": 60})):
            fields = {"session_id": None, **search, **extra}
            request = SearchRequest(query, user, top_k, (), **fields)
            found.append(json.dumps(svc.search(request), sort_keys=True))
    return found


@pytest.fixture
def services(tmp_path: Path):
    """Two services on one store: one holding, one reading everything every time."""
    made = []

    def make(**settings: Any) -> tuple[MemoryService, MemoryService]:
        held = MemoryService(Store(tmp_path / "aml.db"), **settings)
        bare = MemoryService(Store(tmp_path / "aml.db"), held_bytes=0, **settings)
        made.extend([held, bare])
        return held, bare

    yield make
    for svc in made:
        svc.close()


@pytest.mark.parametrize("settings", [{}, {"answer_window_tokens": 2000, "reader_view": True}],
                         ids=["ranked", "window and view"])
def test_held_answers_are_the_answers_read_afresh_byte_for_byte(services, settings):
    held, bare = services(**settings)
    add(held, "u", [*SESSIONS, DIARY])
    first = answers(held, "u")
    assert held.held.users == 1 and held.held.held_bytes > 0  # it holds, and from it:
    assert answers(held, "u") == first == answers(bare, "u")
    assert bare.held.users == 0
    assert any('"content"' in answer for answer in first)  # a populated control


def test_held_answers_of_a_read_that_withholds_are_the_answers_read_afresh(memory):
    kept = memory.remember("the deploy key lives in the vault", scope="local")["statement"]["id"]
    memory.update(kept, "the deploy key lives in the hardware token")
    memory.remember("the vault opens with the key on Mondays", scope="local", origin="agent")
    for read in (None, ReadFilter(include_history=True), ReadFilter(include_proposed=False)):
        held = [memory.recall(q, read=read) for q in ("deploy key", "vault", "key")]
        assert held == [memory.recall(q, read=read) for q in ("deploy key", "vault", "key")]
        service = memory._service("local", create=False)
        service.held.budget = 0  # read everything, every time
        try:
            assert held == [memory.recall(q, read=read) for q in ("deploy key", "vault", "key")]
        finally:
            service.held.budget = HELD_BYTES
    old = "the deploy key lives in the vault"  # control: the read withholds the replaced one
    history = memory.recall("deploy key", read=ReadFilter(include_history=True))["results"]
    assert old in [r["content"] for r in history]
    assert old not in [r["content"] for r in memory.recall("deploy key")["results"]]


def contents(svc: MemoryService, user: str, query: str) -> list[str]:
    return [item["content"] for item in svc.search(SearchRequest(query, user, 10, (), None))["data"]]


def test_every_write_is_seen_by_the_next_search_of_another_service(services):
    reader, writer = services()  # the reader holds; the writer is another process's service
    add(writer, "u")
    assert not any("marimba" in c for c in contents(reader, "u", "marimba"))
    writer.add(AddRequest("more", "u", "s9", (Message("user", "I bought a marimba", T0 + 9 * DAY_MS),)))
    assert any("marimba" in c for c in contents(reader, "u", "marimba"))
    violin = [c for c in contents(reader, "u", "violin birthday") if "birthday" in c]
    assert violin  # held now; then forgotten elsewhere
    with writer.store.connection("u", create=False) as conn:
        (target,) = conn.execute("SELECT id FROM messages WHERE content LIKE '%birthday%'").fetchone()
    assert writer.forget("u", [target], "test")["forgotten"]
    assert not any("birthday" in c for c in contents(reader, "u", "violin birthday"))
    before = reader.held.held_bytes
    writer.delete_user("u")
    assert contents(reader, "u", "violin") == [] and reader.held.held_bytes < before
    add(writer, "u", [["a new memory of a trombone"]])  # a new file under the same name
    assert contents(reader, "u", "trombone") == ["a new memory of a trombone"]
    assert contents(reader, "u", "violin") == []


def test_a_review_in_another_service_moves_what_is_held(tmp_path):
    from aml_retriever.agents.scopes import ScopedMemory

    first = ScopedMemory.at(tmp_path / "project", tmp_path / "account")
    second = ScopedMemory.at(tmp_path / "project", tmp_path / "account")
    try:
        proposed = first.remember("the staging host is db-7", origin="agent")["statement"]["id"]
        assert second.recall("staging host")["results"][0]["trust"] == "proposed"
        first.confirm(proposed)
        assert second.recall("staging host")["results"][0]["trust"] == "confirmed"
        first.reject(first.remember("the staging host is db-9", origin="agent")["statement"]["id"])
        assert [r["content"] for r in second.recall("staging host")["results"]] == [
            "the staging host is db-7"]
    finally:
        first.close()
        second.close()


def test_nothing_held_of_one_user_reaches_another(services):
    held, _ = services()
    add(held, "alice", [["alice keeps a green parrot", "the parrot talks"]])
    add(held, "bob", [["bob keeps a grey cat", "the cat sleeps"]])  # the same message ids
    assert contents(held, "alice", "parrot") and held.held.users == 1
    assert contents(held, "bob", "parrot") == []
    assert all("parrot" not in c for c in contents(held, "bob", "keeps talks sleeps"))
    assert any("cat" in c for c in contents(held, "bob", "keeps"))  # control
    assert held.held.users == 2


def test_the_held_states_stay_within_their_budget_least_recent_first(services, tmp_path):
    held, _ = services()
    for user in ("a", "b", "c"):
        add(held, user)
    contents(held, "a", "violin")
    one_user = held.held.held_bytes
    held.held.budget = int(one_user * 2.5)
    for user in ("a", "b", "c"):
        contents(held, user, "violin")
        assert held.held.held_bytes <= held.held.budget
    assert held.held.users == 2  # "a", the least recently searched, let go
    assert not held.held.holds(held.store.shard_path("a"))
    assert held.held.holds(held.store.shard_path("b")) and held.held.holds(held.store.shard_path("c"))
    assert held.held.of(held.store.shard_path("a"), None).stamp is None
    held.held.budget = one_user // 4  # one user alone outgrows it: nothing is held
    contents(held, "b", "violin")
    assert held.held.users == 0 and held.held.held_bytes == 0
    assert contents(held, "b", "violin")  # and Searches answer as before


def test_a_read_of_an_earlier_state_does_not_replace_the_state_held():
    users = HeldUsers()
    path = Path("/x.db")
    newer = users.of(path, generation.Stamp(1, 2, b"s", 7))
    older = users.of(path, generation.Stamp(1, 2, b"s", 6))
    assert older is not newer and older.stamp.generation == 6
    assert users.of(path, generation.Stamp(1, 2, b"s", 7)) is newer
    other_file = users.of(path, generation.Stamp(1, 3, b"s", 1))  # made again: another inode
    assert users.of(path, generation.Stamp(1, 3, b"s", 1)) is other_file
    assert users.of(path, None).stamp is None and users.users == 1


def test_every_write_moves_the_generation(services):
    held, _ = services()
    stamps = []

    def stamp() -> generation.Stamp:
        with held.store.connection("u", create=False) as conn:
            with held.store.read(conn):
                found = held.store.stamp(conn)
        assert found is not None
        stamps.append(found)
        return found

    add(held, "u")
    stamp()
    held.add(AddRequest("r2", "u", "s1", (Message("user", "one more", T0 + 5 * DAY_MS),)))
    stamp()
    held.forget("u", [1], "test")
    stamp()
    held.reindex()
    stamp()
    held.add(AddRequest("r2", "u", "s1", (Message("user", "one more", T0 + 5 * DAY_MS),)))  # replay
    stamp()
    generations = [s.generation for s in stamps]
    assert generations == [*sorted(set(generations))[:4], generations[3]]  # a replay writes nothing
    assert len(set(generations[:4])) == 4


def test_a_search_with_nothing_held_holds_what_it_read():
    held = Held()
    reads = []
    assert held.many("rows", [3, 1, 3], lambda ids: reads.append(ids) or {i: i * 10 for i in ids}) == {
        3: 30, 1: 10}
    assert held.many("rows", [1, 2], lambda ids: reads.append(ids) or {i: i for i in ids if i != 2}) == {
        1: 10}
    assert reads == [[3, 1], [2]] and held.bytes > 0
    assert held.one("index", "size", lambda: 5) == 5 == held.one("index", "size", lambda: 6)


def test_the_setting_holds_the_default_budget():
    assert BY_NAME["held_megabytes"].default * 2**20 == HELD_BYTES


def test_an_add_in_one_process_is_seen_by_the_next_search_in_another(tmp_path):
    writer = start_app(tmp_path)
    process, port = serve(tmp_path / "aml.db")
    a, b = Client(writer.port), Client(port)
    try:
        assert a.add("u", "r1", ["the harbour opens at dawn", "gulls over the harbour"]).status == 200
        for _ in range(3):  # the other process holds the user now
            assert len(b.contents("u", "harbour")) == 2
        assert a.add("u", "r2", ["a new pier in the harbour"]).status == 200
        assert any("a new pier" in c for c in b.contents("u", "harbour"))
        assert a.request("DELETE", "/users/u").status == 200
        assert b.contents("u", "harbour") == []
        assert a.add("u", "r3", ["the lighthouse"]).status == 200  # the same user, a new file
        assert b.contents("u", "lighthouse") == ["the lighthouse"]
        assert b.contents("u", "harbour") == []
    finally:
        a.close()
        b.close()
        writer.stop()
        process.terminate()
        process.wait(timeout=30)


def test_a_file_written_before_the_generation_counts_from_zero(tmp_path):
    svc = MemoryService(Store(tmp_path / "aml.db"))
    try:
        add(svc, "u")
        path = svc.store.shard_path("u")
        with sqlite3.connect(path) as raw:  # as an older version left it
            raw.execute("DELETE FROM meta WHERE key = ?", (generation.GENERATION,))
        raw.close()
        svc.held.drop(path)
        with svc.store.connection("u", create=False) as conn:
            with svc.store.read(conn):
                assert svc.store.stamp(conn).generation == 0
        assert contents(svc, "u", "violin")
        svc.add(AddRequest("r9", "u", "s1", (Message("user", "a cello too", T0 + 9 * DAY_MS),)))
        assert "a cello too" in contents(svc, "u", "cello")
    finally:
        svc.close()


def test_metrics_show_what_a_process_holds(tmp_path):
    app = start_app(tmp_path)
    client = Client(app.port)
    try:
        def gauge(name: str) -> float:
            with urllib.request.urlopen(f"http://127.0.0.1:{app.port}/metrics", timeout=30) as answer:
                text = answer.read().decode()
            (value,) = [line.split()[-1] for line in text.splitlines() if line.startswith(name + "{")]
            return float(value)

        assert gauge("aml_held_users") == 0 and gauge("aml_held_bytes") == 0
        assert client.add("u", "r1", ["the harbour opens at dawn"]).status == 200
        assert client.contents("u", "harbour")
        assert gauge("aml_held_users") == 1 and gauge("aml_held_bytes") > 0
    finally:
        client.close()
        app.stop()


def test_a_whole_outline_answers_a_fill_with_its_connection_closed(tmp_path):
    svc = MemoryService(Store(tmp_path / "aml.db"))
    try:
        add(svc, "u")
        conn = sqlite3.connect(svc.store.shard_path("u"))
        outline = window.Outline(conn, CURRENT, None)
        ids = sorted(outline.lines)
        conn.close()  # a later Search's fill uses it through another connection, or none
        assert outline.whole and len(ids) == sum(map(len, SESSIONS))
        assert list(outline.sessions()) == ["s0", "s1", "s2"]
        outline.load(ids)
        assert outline.first("s1") == ids[len(SESSIONS[0])]
        assert outline.step(ids[0], 1) == ids[1] and outline.step(ids[0], -1) is None
        outline.between(ids[0], ids[3])
    finally:
        svc.close()


def test_a_held_outline_reads_nothing_through_the_connection_it_was_read_on(services):
    held, bare = services(answer_window_tokens=2000, reader_view=True)
    add(held, "u")
    first = answers(held, "u")
    assert held.store.release_idle() > 0  # the connection the outline was read on is closed
    assert answers(held, "u") == first == answers(bare, "u")


# ---- what is held, counted as the memory it takes -------------------------------------------

# Names enough to fill a user's speakers (candidates read, none attached: a role given this many
# names is many people's), roles and session ids of 240 characters outside the BMP's Latin-1.
MANY_NAMES = ["".join(p).capitalize() for p in itertools.product("bcdfgk", "aeiou", "lmnr", "aeio")]
LONG_ROLE = "Ω" * 240


def many_names_and_long_roles(svc: MemoryService, sessions: int) -> None:
    for s in range(sessions):
        session = f"{'session ' * 30} {s}"
        texts = [(f"Hey {name}! We talked about the garden and the {name} trip, {name}.")
                 for name in (MANY_NAMES[(s * 40 + i) % len(MANY_NAMES)] for i in range(40))]
        messages = [Message(f"{LONG_ROLE} {i % 5}" if i % 2 == 0 else "user", text,
                            T0 + s * DAY_MS + i * 1000) for i, text in enumerate(texts)]
        for k in (0, 20):
            svc.add(AddRequest(f"r{s}-{k}", "u", session, tuple(messages[k:k + 20])))


def traced(work) -> int:
    """The bytes Python allocates in `work` and still holds after it."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        work()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_speakers_and_the_view_are_counted_as_the_memory_they_take(tmp_path):
    svc = MemoryService(Store(tmp_path / "aml.db"))
    try:
        many_names_and_long_roles(svc, 30)
        # A connection that keeps no statements; tracemalloc still counts its weak references
        # to the cursors it made (80 bytes a query, pruned every 200), hence the 0.85.
        conn = sqlite3.connect(svc.store.shard_path("u"), cached_statements=0)
        read: dict[str, Any] = {}
        reader_view.ReaderView.read(conn)  # the patterns compiled once
        spent = traced(lambda: read.update(speakers=stored_speakers.read(conn)))
        assert len(read["speakers"].rejected) >= 400  # control: the names were read
        assert 0.85 <= content_bytes(read["speakers"]) / spent <= 1.10  # (a flat 64 KiB: 1.5)
        spent = traced(lambda: read.update(view=reader_view.ReaderView.read(conn)))
        assert 0.85 <= reader_view.view_bytes(read["view"]) / spent <= 1.10
        conn.close()
    finally:
        svc.close()


@pytest.mark.parametrize("conversation", ["names and long roles", "the SESSIONS"])
def test_a_users_held_state_is_counted_as_the_memory_it_takes(tmp_path, conversation):
    svc = MemoryService(Store(tmp_path / "aml.db"), answer_window_tokens=117_760, reader_view=True)
    try:
        if conversation == "the SESSIONS":
            add(svc, "u", [*SESSIONS, DIARY])
            queries = QUERIES
        else:
            many_names_and_long_roles(svc, 12)
            queries = [f"What did {name} say about the garden trip?" for name in MANY_NAMES[:15]]
        svc.search(SearchRequest(queries[0], "u", 100, (), None))  # patterns compiled once
        svc.held.drop(svc.store.shard_path("u"))
        spent = traced(lambda: [svc.search(SearchRequest(q, "u", 100, (), None)) for q in queries])
        assert svc.held.users == 1
        assert 0.9 <= svc.held.held_bytes / spent <= 1.15, (svc.held.held_bytes, spent)
    finally:
        svc.close()
