"""Derived views of a session's conversation, linked to their source messages.

- `window`: `size` consecutive messages of one session (fewer at the start of a session, never
  just one), for every configured size, read at Search time from the conversation order: each
  message links to the one before and after it in its session (timestamp, then its Add's place
  among the session's Adds, `said`, then its order in its Add), so the
  windows around a hit are a few steps along the links (`turns`) and need no rows of their own.
  The links are set at Add time and kept right when a message arrives out of order or is
  forgotten, so windows span Add boundaries and follow the conversation as it now stands.
- `segment`: a run of a session's messages, closed by a silence longer than the configured gap or
  by the size cap; stored in `views` with its members, and each message records its segment.

Views are scored at Search time from the message hits they hold (see engine/hits.py), so they need
no full-text index of their own. A window's content is its messages' contents joined by newlines,
so every original message appears in it byte for byte.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.storage.store import rows_in

WINDOW_SEPARATOR = "\n"
# The index of each message's links and segment (shard migration 8).
_LINKS = "INDEXED BY messages_links"


@dataclass(frozen=True)
class Placement:
    """Where a new message goes in its session: its neighbours and its segment."""

    session_id: str
    timestamp_ms: int
    said: int  # its Add's place among the session's Adds (analysis/sequence.py)
    prev_id: int | None
    next_id: int | None
    segment_id: int


@dataclass
class _Segment:
    id: int
    start_ms: int
    end_ms: int
    members: list[int] = field(default_factory=list)


class ViewBuilder:
    """Places one Add's messages in their sessions: `place` before a message's row is written
    (it gives the links and segment the row holds), `placed` after, then `finish` once. A
    rebuild of stored sessions calls `rebuild` per session instead, then `finish`."""

    def __init__(self, conn: sqlite3.Connection, config: RetrievalConfig) -> None:
        self.conn = conn
        self.config = config
        self._segments: dict[int, _Segment] = {}
        self._open: dict[str, int | None] = {}
        # The last message of each session in conversation order, once known: an Add's messages
        # usually come in order, and then each one's predecessor is the one before it.
        self._tails: dict[str, tuple[int, tuple[int, int]]] = {}

    def place(self, session_id: str, timestamp_ms: int, said: int = 0) -> Placement:
        prev_id, next_id = self._neighbours(session_id, (timestamp_ms, said))
        segment = self._segment_for(session_id, timestamp_ms)
        return Placement(session_id, timestamp_ms, said, prev_id, next_id, segment.id)

    def placed(self, message_id: int, placement: Placement) -> None:
        """Link the new message's neighbours to it and add it to its segment (`place` chose)."""
        if placement.prev_id is not None:
            self.conn.execute("UPDATE messages SET next_id = ? WHERE id = ?",
                              (message_id, placement.prev_id))
        if placement.next_id is not None:
            self.conn.execute("UPDATE messages SET prev_id = ? WHERE id = ?",
                              (message_id, placement.next_id))
        else:
            self._tails[placement.session_id] = (message_id, (placement.timestamp_ms, placement.said))
        self._join(self._segments[placement.segment_id], message_id, placement.timestamp_ms)

    def rebuild(self, session_id: str, ordered: list[tuple[int, int]]) -> None:
        """Link a stored session's messages, given as (id, timestamp) in conversation order, and
        place them in segments again, one row write each (after a removal, or for `reindex`)."""
        ids = [message_id for message_id, _ in ordered]
        self.conn.executemany(
            "UPDATE messages SET prev_id = ?, next_id = ?, segment_id = ? WHERE id = ?",
            [(ids[i - 1] if i else None, ids[i + 1] if i + 1 < len(ids) else None,
              self._join_segment(session_id, timestamp, message_id), message_id)
             for i, (message_id, timestamp) in enumerate(ordered)])

    def _join_segment(self, session_id: str, timestamp_ms: int, message_id: int) -> int:
        segment = self._segment_for(session_id, timestamp_ms)
        self._join(segment, message_id, timestamp_ms)
        return segment.id

    @staticmethod
    def _join(segment: _Segment, message_id: int, timestamp_ms: int) -> None:
        segment.members.append(message_id)
        segment.end_ms = max(segment.end_ms, timestamp_ms)

    def _neighbours(self, session_id: str, said: tuple[int, int]) -> tuple[int | None, int | None]:
        """The messages before and after a new one in conversation order, (timestamp, said, id).
        The new message has the highest id yet, so it goes after every message of the same time
        and the same Add's place."""
        tail = self._tails.get(session_id)
        if tail is not None and said >= tail[1]:
            return tail[0], None
        before = self.conn.execute(
            "SELECT id FROM messages INDEXED BY messages_by_session WHERE session_id = ? "
            "AND (timestamp_ms, said) <= (?, ?) ORDER BY timestamp_ms DESC, said DESC, id DESC "
            "LIMIT 1", (session_id, *said)).fetchone()
        after = self.conn.execute(
            "SELECT id FROM messages INDEXED BY messages_by_session WHERE session_id = ? "
            "AND (timestamp_ms, said) > (?, ?) ORDER BY timestamp_ms, said, id LIMIT 1",
            (session_id, *said)).fetchone()
        return (before[0] if before else None), (after[0] if after else None)

    def _segment_for(self, session_id: str, timestamp_ms: int) -> _Segment:
        segment = self._open_segment(session_id)
        gap_ms = self.config.segment_gap_minutes * 60_000
        if (segment is None or timestamp_ms - segment.end_ms > gap_ms
                or timestamp_ms < segment.start_ms
                or len(segment.members) >= self.config.segment_max_messages):
            segment = self._new_segment(session_id, timestamp_ms)
        self._open[session_id] = segment.id
        return segment

    def _open_segment(self, session_id: str) -> _Segment | None:
        if session_id not in self._open:
            row = self.conn.execute("SELECT open_segment_id FROM sessions WHERE session_id = ?",
                                    (session_id,)).fetchone()
            self._open[session_id] = row[0] if row else None
        segment_id = self._open[session_id]
        if segment_id is None:
            return None
        if segment_id not in self._segments:
            start_ms, end_ms, members = self.conn.execute(
                "SELECT start_ms, end_ms, message_ids FROM views WHERE id = ?", (segment_id,)).fetchone()
            self._segments[segment_id] = _Segment(segment_id, start_ms, end_ms, json.loads(members))
        return self._segments[segment_id]

    def _new_segment(self, session_id: str, timestamp_ms: int) -> _Segment:
        segment_id = self.conn.execute(
            "INSERT INTO views (kind, session_id, message_ids, start_ms, end_ms) "
            "VALUES ('segment', ?, '[]', ?, ?)", (session_id, timestamp_ms, timestamp_ms)).lastrowid
        assert segment_id is not None
        segment = self._segments[segment_id] = _Segment(segment_id, timestamp_ms, timestamp_ms)
        return segment

    def finish(self) -> dict[str, int | None]:
        """Write every touched segment's members and span; returns each session's open segment
        (for the session cursor)."""
        for segment in self._segments.values():
            self.conn.execute("UPDATE views SET message_ids = ?, end_ms = ? WHERE id = ?",
                              (json.dumps(segment.members), segment.end_ms, segment.id))
        return self._open


class Turn(NamedTuple):
    """Where a message sits in its conversation: the run of up to `reach` messages each side of
    it in conversation order (fewer at the session's ends), its place in that run, its segment."""

    run: tuple[int, ...]
    at: int
    segment_id: int | None

    @property
    def next_id(self) -> int | None:
        return self.run[self.at + 1] if self.at + 1 < len(self.run) else None


def turns(conn: sqlite3.Connection, ids: Collection[int], reach: int) -> dict[int, Turn]:
    """The turns of these messages, each run read by following the links `reach` steps each way
    in the same query (a join per step), so any number of messages costs one query."""
    found: dict[int, Turn] = {}
    cut = 2 + reach
    for row in rows_in(conn, _turns_sql(reach), list(ids)):
        # A run ends at the first NULL: a session's end (no step joins past it).
        before, after = row[2:cut], row[cut:]
        if None in before:
            before = before[:before.index(None)]
        if None in after:
            after = after[:after.index(None)]
        found[row[0]] = Turn(before[::-1] + row[:1] + after, len(before), row[1])
    return found


def _turns_sql(reach: int) -> str:
    """SELECT id, segment_id, the `reach` ids before it (nearest first), the `reach` after, for
    `rows_in` to complete with the ids; every step read from the links index, not the table
    (SQLite would look each id up in the table, whose rows hold the messages' text)."""
    columns, joins = ["h.id", "h.segment_id"], []
    for link, alias in (("prev_id", "p"), ("next_id", "n")):
        source = "h"
        for step in range(1, reach + 1):
            columns.append(f"{source}.{link}")
            if step < reach:
                joins.append(f"LEFT JOIN messages {alias}{step} {_LINKS} "
                             f"ON {alias}{step}.id = {source}.{link}")
                source = f"{alias}{step}"
    return f"SELECT {', '.join(columns)} FROM messages h {_LINKS} {' '.join(joins)} WHERE h.id"


def windows_joining(hits: dict[int, Turn], sizes: Iterable[int]) -> set[tuple[int, ...]]:
    """Every window of the given sizes that holds two or more of the hits, as its members in
    conversation order (`hits` have runs of at least the largest size - 1 each side). A window
    of `size` messages ends at some message and holds it and the size - 1 before it, fewer at a
    session's start, never one alone. Found from the pairs of hits close enough to share one
    rather than from every window around every hit (a top_k 100 Search on long messages has 400
    hits and 1,200 windows around them, most holding one hit): each pair is met from its
    earlier hit, whose run reaches the later one, and a window holds both when it starts at or
    before the earlier one and ends at or after the later one."""
    found: set[tuple[int, ...]] = set()
    for turn in hits.values():
        run, at = turn.run, turn.at
        for size in sizes:
            for later in range(at + 1, min(at + size, len(run))):
                if run[later] in hits:
                    for end in range(later, min(at + size, len(run))):
                        found.add(run[max(0, end - size + 1):end + 1])
    return found


def session_places(conn: sqlite3.Connection, session_id: str) -> dict[int, int]:
    """Each stored message of a session by its place in the conversation, from 1 (the order of
    the conversation index: time, `said`, id), so that a reader can put the pieces of one session
    an answer returns back in order when their times are the same."""
    return {m: place for place, (m,) in enumerate(conn.execute(
        "SELECT id FROM messages INDEXED BY messages_by_session WHERE session_id = ? "
        "ORDER BY timestamp_ms, said, id", (session_id,)), 1)}
