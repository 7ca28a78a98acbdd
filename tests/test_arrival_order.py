"""A memory does not depend on the order its Adds arrived in: the same messages with the same
timestamps give the same answers (contents and order) and the same derived rows (links, segments,
speakers) whether a conversation's Adds came in order, shuffled one at a time, or all at once in
parallel over HTTP, as a leaderboard's client sends them; `reindex` derives the same. Ids may
differ (they are the arrival order); what a reader reads may not."""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import random
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import Client, start_app
from old_schema import take_back
from reliability_support import user_file

from aml_retriever.engine.candidates import cut
from aml_retriever.engine.keys import QuestionKeys
from aml_retriever.engine.query import plan
from aml_retriever.engine.said import SaidOrder
from aml_retriever.engine.scoring import Facts, adjacency
from aml_retriever.evaluation.backends import InProcess
from aml_retriever.memory.service import MemoryService

DAY_MS = 86_400_000
START_MS = 1_683_554_160_000  # Mon 8 May 2023, 13:56 UTC
# Short turns of one length that say the same words: their BM25 parts tie, so the lists are cut
# among equals, and a window or segment takes its turns from either side of an Add's edge.
OPENERS = ("Hey Mel! How was the lake?", "Hi Caroline, the lake was lovely.",
           "Thanks, Mel! I went to the lake too.", "Yeah, Caroline, the lake is great.")
TURNS = ("I went to the lake {n} times.", "The lake was cold on day {n}.",
         "We painted the lake {n} times.", "The kids swam in the lake {n} times.",
         "Thanks, Caroline! The lake trip {n} was fun.", "Wow, Mel, lake number {n}!",
         # No word of a question: found only through the words the best hits lend (the hop
         # round), where many are ranked alike and the features' lists tie among them.
         "I painted a vase {n}.", "We painted the fence {n}.", "The kids swam {n} laps.")
QUESTIONS = ("How many times did Caroline go to the lake?", "When did Melanie paint the lake?",
             "What did the kids do at the lake?", "Was the lake cold?", "What did Mel say to Caroline?",
             "thanks lake", "lake", "What did Caroline paint at the lake?",
             "When did the kids swim at the lake?")


def conversation(user: str, one_time: bool = False) -> list[dict[str, Any]]:
    """Six sessions of 30 turns of two speakers (a silence splits each in two segments), each
    sent as Adds of 7 turns: a session spans five Adds. `one_time`: every turn of a session
    stamped with the session's time, as a sender that knows only a session's date does (its
    order is then its Adds' numbers, `s0-1` before `s0-2`, and each turn's place in its Add)."""
    adds = []
    for session in range(6):
        turns = list(OPENERS) + [TURNS[(session + i) % len(TURNS)].format(n=i) for i in range(26)]
        start = START_MS + session * 7 * DAY_MS
        messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": text,
                     "timestamp": start if one_time else
                     start + i * 60_000 + (2 * 3_600_000 if i >= 15 else 0)}
                    for i, text in enumerate(turns)]
        # The first session opens with an Add of its opener alone: its answer comes later.
        edges = [0, 1] if session == 0 else [0]
        edges += [*range(edges[-1] + 7, len(messages), 7), len(messages)]
        for part, (begin, end) in enumerate(itertools.pairwise(edges)):
            adds.append({"request_id": f"s{session}-{part}", "user_id": user,
                         "session_id": f"s{session}", "messages": messages[begin:end]})
    return adds


def answers(search: Any, user: str) -> list[list[str]]:
    """Each question's answer at top_k 100 (the lists hold every match) and 5 (they are cut at
    80, among turns whose parts tie)."""
    return [[item["content"] for item in search({"user_id": user, "query": q, "top_k": k})]
            for q in QUESTIONS for k in (100, 5)]


def derived(path: Path) -> dict[str, Any]:
    """What a user's file derived from its messages, each row named by contents, not ids."""
    conn = sqlite3.connect(path)
    try:
        text = dict(conn.execute("SELECT id, content FROM messages"))
        segments: dict[int, list[str]] = {}
        for message_id, segment in conn.execute("SELECT id, segment_id FROM messages"):
            segments.setdefault(segment, []).append(text[message_id])
        return {
            "links": sorted((text[m], text.get(p), text.get(n)) for m, p, n in
                            conn.execute("SELECT id, prev_id, next_id FROM messages")),
            "segments": sorted(sorted(members) for members in segments.values()),
            "mentions": sorted((text[m], name, role, kind) for m, name, role, kind in conn.execute(
                "SELECT message_id, name, role, kind FROM speaker_mentions")),
            "names": sorted(conn.execute("SELECT * FROM speaker_names")),
            "roles": sorted(conn.execute("SELECT * FROM roles")),
        }
    finally:
        conn.close()


def in_process(store: Path, adds: list[dict[str, Any]]) -> InProcess:
    backend = InProcess(store, answer_window_tokens=4000, reader_view=True)
    for add in adds:
        backend.add(add)
    return backend


def test_shuffled_adds_give_the_same_answers_and_rows_as_adds_in_order(tmp_path):
    adds = conversation("u")
    shuffled = adds[:]
    random.Random(7).shuffle(shuffled)
    assert [a["request_id"] for a in shuffled] != [a["request_id"] for a in adds]  # control
    ordered = in_process(tmp_path / "a.db", adds)
    arrived = in_process(tmp_path / "b.db", shuffled)
    try:
        expected = answers(ordered.search, "u")
        assert all(expected) and len({len(a) for a in expected}) > 1  # real, varied answers
        assert answers(arrived.search, "u") == expected
        rows = derived(user_file(tmp_path / "a.db", "u"))
        assert rows["mentions"] and len(rows["segments"]) == 12  # control: names and silences
        assert derived(user_file(tmp_path / "b.db", "u")) == rows
    finally:
        ordered.close()
        arrived.close()


def test_a_session_said_at_one_instant_keeps_its_order_whatever_order_its_adds_came_in(tmp_path):
    adds = conversation("u", one_time=True)
    shuffled = adds[:]
    random.Random(5).shuffle(shuffled)
    ordered = in_process(tmp_path / "a.db", adds)
    arrived = in_process(tmp_path / "b.db", shuffled)
    try:
        assert answers(arrived.search, "u") == answers(ordered.search, "u")
        rows = derived(user_file(tmp_path / "b.db", "u"))
        assert rows == derived(user_file(tmp_path / "a.db", "u"))
        # The conversation in its sender's order: each turn linked to the one written after it.
        first = {text: after for text, _, after in rows["links"]}
        assert first["Hey Mel! How was the lake?"] == "Hi Caroline, the lake was lovely."
        assert first[TURNS[2].format(n=2)] == TURNS[3].format(n=3)  # across Adds s0-0, s0-1
    finally:
        ordered.close()
        arrived.close()


def test_an_upgraded_file_orders_its_messages_by_their_adds_numbers(tmp_path):
    backend = in_process(tmp_path / "a.db", conversation("u", one_time=True))
    backend.close()
    path = user_file(tmp_path / "a.db", "u")
    take_back(path, 11)  # as the release before wrote it: no `said`
    upgraded = InProcess(tmp_path / "a.db")
    assert upgraded.search({"user_id": "u", "query": "lake", "top_k": 5})  # opened: upgraded
    upgraded.close()
    conn = sqlite3.connect(path)
    try:
        said = dict(conn.execute("SELECT content, said FROM messages"))
        requests = dict(conn.execute("SELECT first_message_id, request_id FROM requests"))
    finally:
        conn.close()
    assert said["Hey Mel! How was the lake?"] == 0  # request s0-0
    assert said[TURNS[2].format(n=2)] == 1  # the 8th turn of session 0: request s0-1
    assert set(said.values()) == {int(r.rsplit("-", 1)[1]) for r in requests.values()}


def test_reindex_derives_what_the_adds_derived_in_order(tmp_path):
    ordered = in_process(tmp_path / "a.db", conversation("u"))
    shuffled = conversation("u")
    random.Random(3).shuffle(shuffled)
    arrived = in_process(tmp_path / "b.db", shuffled)
    expected = answers(ordered.search, "u")
    ordered.close()
    arrived.close()
    service = MemoryService.open(str(tmp_path / "b.db"))
    try:
        service.reindex()
    finally:
        service.close()
    assert derived(user_file(tmp_path / "b.db", "u")) == derived(user_file(tmp_path / "a.db", "u"))
    again = InProcess(tmp_path / "b.db", answer_window_tokens=4000, reader_view=True)
    try:
        assert answers(again.search, "u") == expected
    finally:
        again.close()


@pytest.mark.parametrize("seed", [1, 2])
def test_adds_sent_sixteen_at_once_over_http_answer_as_adds_sent_in_order(tmp_path, seed):
    app = start_app(tmp_path, answer_window_tokens=4000, reader_view=True)
    try:
        client = Client(app.port)
        for add in conversation("ordered"):
            assert client.post("/add", add).status == 200
        racing = conversation("racing")
        random.Random(seed).shuffle(racing)

        def send(add: dict[str, Any]) -> int:
            return Client(app.port).post("/add", add).status

        with cf.ThreadPoolExecutor(16) as pool:
            assert set(pool.map(send, racing)) == {200}

        def search(user: str) -> Any:
            return lambda body: client.post("/search", {**body, "user_id": user}).body["data"]

        assert answers(search("racing"), "racing") == answers(search("ordered"), "ordered")
        assert derived(user_file(app.store.path, "racing")) == derived(user_file(app.store.path, "ordered"))
    finally:
        app.stop()


@dataclass
class Row:
    """A stored message as ranking reads it (engine/scoring.Evidence)."""

    id: int
    timestamp_ms: int
    said: int = 0
    role: str = "user"
    marks: int = 0
    signal_keys: str = ""
    day: str = "2023-05-08"


def test_a_features_list_orders_candidates_alike_by_when_they_were_said_not_their_ids():
    asked = QuestionKeys(plan("What did she say next?"))
    # Two turns after a top hit, ranked alike and neither in a lexical list: the one said
    # first (id 9, which arrived last) comes first.
    said_later = Facts(("message", (3,)), 50, [Row(3, START_MS + 60_000)], frozenset(), 1, asked)
    said_first = Facts(("message", (9,)), 50, [Row(9, START_MS)], frozenset(), 1, asked)
    assert adjacency(asked.plan, [said_later, said_first]) == [("message", (9,)), ("message", (3,))]


def test_a_list_cut_among_equal_scores_keeps_those_said_first():
    class Times:
        def many(self, kind: str, ids: Any, read: Any) -> dict[int, tuple[int, int]]:
            # Arrival order (ids) is the reverse of conversation order.
            return {m: (START_MS - m, 0, m) for m in ids}

    said = SaidOrder(None, Times())  # type: ignore[arg-type]
    ranked = [(1, 2.0), (2, 1.0), (3, 1.0), (4, 1.0), (5, 0.5)]
    assert cut(ranked, 3, said) == [(1, 2.0), (4, 1.0), (3, 1.0)]
    assert cut(ranked, 5, said) == [(1, 2.0), (4, 1.0), (3, 1.0), (2, 1.0), (5, 0.5)]
