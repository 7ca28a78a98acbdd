"""Views are derived at Add time, linked to their sources, and span Add boundaries."""

from __future__ import annotations

import json
from typing import Any

import pytest
from reliability_support import open_user

from aml_retriever.service import MemoryService
from aml_retriever.signals import RetrievalConfig
from aml_retriever.validation import AddRequest, Message

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


def test_windows_span_add_boundaries_in_conversation_order(svc):
    add(svc, "r1", "s", (0, "one"), (MINUTE, "two"))
    add(svc, "r2", "s", (2 * MINUTE, "three"))
    add(svc, "r3", "other", (3 * MINUTE, "elsewhere"))
    assert views(svc, "window") == [[1, 2], [2, 3], [1, 2, 3]]


def test_segments_split_at_a_silence_and_at_the_size_cap(svc):
    add(svc, "r1", "s", (0, "a"), (MINUTE, "b"))
    add(svc, "r2", "s", (2 * MINUTE, "c"), (3 * MINUTE, "d"), (4 * MINUTE, "e"))  # cap of 4
    add(svc, "r3", "s", (2 * 60 * MINUTE, "f"))  # two hours of silence
    assert views(svc, "segment") == [[1, 2, 3, 4], [5], [6]]
    conn = open_user(svc.store.path, "u")
    assert conn.execute("SELECT open_segment_id FROM sessions").fetchone()[0] is not None


def test_window_members_link_every_window_to_its_messages(svc):
    add(svc, "r1", "s", (0, "one"), (MINUTE, "two"), (2 * MINUTE, "three"))
    conn = open_user(svc.store.path, "u")
    members = conn.execute("SELECT message_id, view_id FROM window_members ORDER BY view_id, "
                           "message_id").fetchall()
    windows = conn.execute("SELECT id, message_ids FROM views WHERE kind = 'window' ORDER BY id")
    assert members == [(m, view_id) for view_id, ids in windows for m in sorted(json.loads(ids))]


def test_windows_are_results_with_their_sources(svc):
    add(svc, "r1", "s", (0, "Which band did you see?"), (MINUTE, "Radiohead, in Lisbon."))
    svc.retrieval = RetrievalConfig(weights={"lexical": 1.0, "window": 2.0})
    from aml_retriever.validation import SearchRequest

    top = svc.search(SearchRequest("band Lisbon", "u", 5, (), None))["data"][0]
    assert top["view"] == "window"
    assert top["content"] == "Which band did you see?\nRadiohead, in Lisbon."
    assert top["source_message_ids"] == ["m1", "m2"]
    assert top["created_at"] == "1970-01-01T00:00:00Z"


def test_reindex_rebuilds_views_and_index_for_new_settings(tmp_path, capsys):
    from aml_retriever.cli import main
    from aml_retriever.errors import StoreError
    from aml_retriever.validation import SearchRequest

    db = str(tmp_path / "aml.db")
    old = MemoryService.open(db, retrieval=RetrievalConfig().with_values(window_sizes=(2,)))
    add(old, "r1", "s", (0, "Which band did you see?"), (MINUTE, "Radiohead, in Lisbon."),
        (2 * MINUTE, "Great show"))
    old.close()
    with pytest.raises(StoreError, match="run `reindex`"):
        MemoryService.open(db)  # the default settings make other windows: refused, not mixed
    assert main(["reindex", "--db", db]) == 0
    assert '"messages": 3' in capsys.readouterr().out
    new = MemoryService.open(db)
    assert views(new, "window") == [[1, 2], [1, 2, 3]]
    data = new.search(SearchRequest("Radiohead", "u", 5, (), None))["data"]
    assert "Radiohead, in Lisbon." in data[0]["content"]
    new.close()
