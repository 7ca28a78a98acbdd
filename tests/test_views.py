"""Views are derived at Add time, linked to their sources, and span Add boundaries."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_support import broken_links, open_user

from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import AddRequest, Message
from aml_retriever.storage.views import Turn, turns, windows_joining

MINUTE = 60_000


@pytest.fixture
def svc(tmp_path: Any) -> Any:
    config = RetrievalConfig().with_values(window_sizes=(2, 3), segment_gap_minutes=30,
                                           segment_max_messages=4)
    service = MemoryService.open(str(tmp_path / "aml.db"), retrieval=config, synchronous="NORMAL")
    yield service
    service.close()


def add(svc, request_id, session, *timed):
    svc.add(AddRequest(request_id, "u", session, tuple(Message("user", c, t) for t, c in timed)))


def views(svc, kind):
    conn = open_user(svc.store.path, "u")
    return [json.loads(row[0]) for row in conn.execute(
        "SELECT message_ids FROM views WHERE kind = ? ORDER BY id", (kind,))]


def windows_around(hits: dict[int, Turn], sizes: Any) -> set[tuple[int, ...]]:
    """The definition of a window: every window of the given sizes that holds a hit (the ones
    ending at it or at one of the next size - 1 messages), never one message alone."""
    found: set[tuple[int, ...]] = set()
    for turn in hits.values():
        run, at = turn.run, turn.at
        for size in sizes:
            for end in range(at, min(at + size, len(run))):
                window = run[max(0, end - size + 1):end + 1]
                if len(window) > 1:
                    found.add(window)
    return found


def windows(svc, hits, sizes=(2, 3)):
    around = turns(open_user(svc.store.path, "u"), hits, max(sizes) - 1)
    return sorted(windows_around(around, sizes))


def test_windows_span_add_boundaries_in_conversation_order(svc):
    add(svc, "r1", "s", (0, "one"), (MINUTE, "two"))
    add(svc, "r2", "s", (2 * MINUTE, "three"))
    add(svc, "r3", "other", (3 * MINUTE, "elsewhere"))
    assert windows(svc, [1]) == [(1, 2), (1, 2, 3)]
    assert windows(svc, [3]) == [(1, 2, 3), (2, 3)]
    assert windows(svc, [1, 2, 3, 4]) == [(1, 2), (1, 2, 3), (2, 3)]  # never one message alone
    assert windows(svc, [2], sizes=(3,)) == [(1, 2), (1, 2, 3)]  # fewer at the session's start
    assert windows(svc, [4]) == []  # a session of one message has no window


def test_windows_follow_the_conversation_when_a_message_arrives_late(svc):
    add(svc, "r1", "s", (0, "one"), (2 * MINUTE, "three"), (3 * MINUTE, "four"))
    add(svc, "r2", "s", (MINUTE, "two, sent late"))  # id 4, said between one and three
    add(svc, "r3", "s", (3 * MINUTE, "five, at the same minute as four"))  # id 5: after 3
    assert windows(svc, [4], sizes=(3,)) == [(1, 4), (1, 4, 2), (4, 2, 3)]
    assert windows(svc, [5], sizes=(2,)) == [(3, 5)]
    assert broken_links(open_user(svc.store.path, "u")) == []


def test_forget_and_reindex_keep_every_link_in_conversation_order(svc):
    add(svc, "r1", "s", (0, "one"), (MINUTE, "two"), (2 * MINUTE, "three"), (3 * MINUTE, "four"))
    add(svc, "r2", "t", (0, "elsewhere"), (MINUTE, "and on"))
    add(svc, "r3", "s", (MINUTE // 2, "between one and two"))
    svc.forget("u", [2, 5], "forget")
    conn = open_user(svc.store.path, "u")
    assert broken_links(conn) == []
    assert windows(svc, [7], sizes=(3,)) == [(1, 7), (1, 7, 3), (7, 3, 4)]
    assert windows(svc, [6]) == []  # its session is down to one message
    svc.reindex()
    assert broken_links(conn) == []


def test_segments_split_at_a_silence_and_at_the_size_cap(svc):
    add(svc, "r1", "s", (0, "a"), (MINUTE, "b"))
    add(svc, "r2", "s", (2 * MINUTE, "c"), (3 * MINUTE, "d"), (4 * MINUTE, "e"))  # cap of 4
    add(svc, "r3", "s", (2 * 60 * MINUTE, "f"))  # two hours of silence
    assert views(svc, "segment") == [[1, 2, 3, 4], [5], [6]]
    conn = open_user(svc.store.path, "u")
    assert conn.execute("SELECT open_segment_id FROM sessions").fetchone()[0] is not None


def test_windows_are_results_with_their_sources(svc):
    add(svc, "r1", "s", (0, "Which band did you see?"), (MINUTE, "Radiohead, in Lisbon."))
    svc.retrieval = RetrievalConfig(weights={"lexical": 1.0, "window": 2.0})
    from aml_retriever.memory.validation import SearchRequest

    top = svc.search(SearchRequest("band Lisbon", "u", 5, (), None))["data"][0]
    assert top["view"] == "window"
    assert top["content"] == "Which band did you see?\nRadiohead, in Lisbon."
    assert top["source_message_ids"] == ["m1", "m2"]
    assert top["created_at"] == "1970-01-01T00:00:00Z"


def test_reindex_rebuilds_views_and_index_for_new_settings(tmp_path, capsys):
    from aml_retriever.cli import main
    from aml_retriever.common.errors import StoreError
    from aml_retriever.memory.validation import SearchRequest

    db = str(tmp_path / "aml.db")
    old = MemoryService.open(db, retrieval=RetrievalConfig().with_values(segment_max_messages=2))
    add(old, "r1", "s", (0, "Which band did you see?"), (MINUTE, "Radiohead, in Lisbon."),
        (2 * MINUTE, "Great show"))
    assert views(old, "segment") == [[1, 2], [3]]
    old.close()
    with pytest.raises(StoreError, match="run `reindex`"):
        MemoryService.open(db)  # the default settings make other segments: refused, not mixed
    assert main(["reindex", "--db", db]) == 0
    assert '"messages": 3' in capsys.readouterr().out
    new = MemoryService.open(db)
    assert views(new, "segment") == [[1, 2, 3]]
    data = new.search(SearchRequest("Radiohead", "u", 5, (), None))["data"]
    assert "Radiohead, in Lisbon." in data[0]["content"]
    new.close()


def test_window_sizes_are_read_at_search_time_and_need_no_reindex(tmp_path):
    from aml_retriever.memory.validation import SearchRequest

    db = str(tmp_path / "aml.db")
    first = MemoryService.open(db)
    add(first, "r1", "s", (0, "Which band?"), (MINUTE, "Radiohead."), (2 * MINUTE, "Where?"),
        (3 * MINUTE, "In Lisbon."))
    first.close()
    wide = MemoryService.open(db, retrieval=RetrievalConfig(weights={"lexical": 1.0, "window": 2.0},
                                                            window_sizes=(4,)))
    top = wide.search(SearchRequest("band Lisbon", "u", 5, (), None))["data"][0]
    assert top["source_message_ids"] == ["m1", "m2", "m3", "m4"]
    wide.close()


# An Add as the property test draws it: (session, [minutes of its messages]), then forgets.
_adds = st.lists(st.tuples(st.sampled_from(["s", "t"]),
                           st.lists(st.integers(0, 6), min_size=1, max_size=4)),
                 min_size=1, max_size=8)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(adds=_adds, forgets=st.lists(st.integers(1, 32), max_size=4))
def test_links_follow_conversation_order_after_any_adds_and_forgets(tmp_path_factory, adds, forgets):
    """Late messages, equal times and several Adds per session: every link is where the
    conversation order (time, then arrival) puts it, and every window is consecutive in it."""
    config = RetrievalConfig().with_values(window_sizes=(2, 3))
    svc = MemoryService.open(str(tmp_path_factory.mktemp("links") / "aml.db"), retrieval=config,
                             synchronous="OFF")
    try:
        for n, (session, minutes) in enumerate(adds):
            add(svc, f"r{n}", session, *((m * MINUTE, f"turn {n}.{i}") for i, m in enumerate(minutes)))
        if forgets:
            svc.forget("u", forgets, "forget")
        conn = open_user(svc.store.path, "u")
        assert broken_links(conn) == []
        order = {}
        for session in ("s", "t"):
            order[session] = [i for (i,) in conn.execute(
                "SELECT id FROM messages WHERE session_id = ? ORDER BY timestamp_ms, id", (session,))]
        runs = {tuple(ids[i:i + size]) for ids in order.values() for size in (2, 3)
                for i in range(len(ids) - 1)}
        ids = [i for ids in order.values() for i in ids]
        assert set(windows(svc, ids)) == {r for r in runs if len(r) > 1}
    finally:
        svc.close()


@given(st.lists(st.integers(1, 12), min_size=1, max_size=6), st.sets(st.integers(0, 80)),
       st.sets(st.integers(1, 4), min_size=1, max_size=3))
@settings(max_examples=300, deadline=None)
def test_the_windows_joining_hits_are_the_windows_around_them_that_hold_two(lengths, picked, sizes):
    """What a Search scores (windows of two or more hits, found from pairs of hits) is exactly
    what the windows around every hit hold with two or more hits in them."""
    sessions, first = [], 1
    for length in lengths:  # consecutive ids, a session after another
        sessions.append(list(range(first, first + length)))
        first += length
    reach = max(sizes) - 1
    around = {}
    for session in sessions:
        for at, m in enumerate(session):
            lo = max(0, at - reach)
            around[m] = Turn(tuple(session[lo:at + reach + 1]), at - lo, None)
    hits = {m: turn for m, turn in around.items() if m in picked}
    expected = {w for w in windows_around(hits, sizes) if sum(m in hits for m in w) >= 2}
    assert windows_joining(hits, sizes) == expected
