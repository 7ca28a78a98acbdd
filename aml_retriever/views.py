"""Derived views, built at Add time inside the Add's transaction and linked to their sources.

- `window`: for each new message, the window of `size` consecutive messages of its session that
  ends at it (fewer at the start of a session, never just one). Windows span Add boundaries: the
  predecessors are read from the session's stored order (timestamp, arrival). `window_members`
  records which windows hold each message.
- `segment`: a run of a session's messages, closed by a silence longer than the configured gap or
  by the size cap; each message records its segment.

Views are scored at Search time from the message hits they hold (see retrieval.py), so they need
no full-text index of their own. A window's content is its messages' contents joined by newlines,
so every original message appears in it byte for byte.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field

from aml_retriever.signals import RetrievalConfig

WINDOW_SEPARATOR = "\n"


@dataclass
class NewMessage:
    id: int
    session_id: str
    timestamp_ms: int


@dataclass
class _Segment:
    id: int
    start_ms: int
    end_ms: int
    members: list[int] = field(default_factory=list)


class ViewBuilder:
    """Builds the views of one Add's messages; call `add` per message, then `finish`."""

    def __init__(self, conn: sqlite3.Connection, config: RetrievalConfig) -> None:
        self.conn = conn
        self.config = config
        self._segments: dict[int, _Segment] = {}
        self._open: dict[str, int | None] = {}
        self._placed: list[tuple[int, int]] = []  # (segment id, message id), written by finish

    def add(self, message: NewMessage) -> None:
        made: set[tuple[int, ...]] = set()
        for size in sorted(self.config.window_sizes):
            self._add_window(message, size, made)
        self._join_segment(message)

    def _add_window(self, message: NewMessage, size: int, made: set[tuple[int, ...]]) -> None:
        """The window of `size` ending at the message; near a session's start, where a larger
        size has no more predecessors than a smaller one, the same window is not made twice."""
        previous = self.conn.execute(
            "SELECT id, timestamp_ms FROM messages WHERE session_id = ? AND id != ? AND "
            "(timestamp_ms < ? OR (timestamp_ms = ? AND id < ?)) "
            "ORDER BY timestamp_ms DESC, id DESC LIMIT ?",
            (message.session_id, message.id, message.timestamp_ms, message.timestamp_ms,
             message.id, size - 1)).fetchall()
        members = [row[0] for row in reversed(previous)] + [message.id]
        if not previous or tuple(members) in made:
            return
        made.add(tuple(members))
        view_id = self.conn.execute(
            "INSERT INTO views (kind, session_id, message_ids, start_ms, end_ms) "
            "VALUES ('window', ?, ?, ?, ?)",
            (message.session_id, json.dumps(members), previous[-1][1], message.timestamp_ms)
        ).lastrowid
        self.conn.executemany("INSERT INTO window_members (message_id, view_id) VALUES (?, ?)",
                              [(m, view_id) for m in members])

    def _join_segment(self, message: NewMessage) -> None:
        segment = self._open_segment(message.session_id)
        gap_ms = self.config.segment_gap_minutes * 60_000
        if (segment is None or message.timestamp_ms - segment.end_ms > gap_ms
                or message.timestamp_ms < segment.start_ms
                or len(segment.members) >= self.config.segment_max_messages):
            segment = self._new_segment(message)
        segment.members.append(message.id)
        segment.end_ms = max(segment.end_ms, message.timestamp_ms)
        self._open[message.session_id] = segment.id
        self._placed.append((segment.id, message.id))

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

    def _new_segment(self, message: NewMessage) -> _Segment:
        segment_id = self.conn.execute(
            "INSERT INTO views (kind, session_id, message_ids, start_ms, end_ms) "
            "VALUES ('segment', ?, '[]', ?, ?)",
            (message.session_id, message.timestamp_ms, message.timestamp_ms)).lastrowid
        assert segment_id is not None
        segment = self._segments[segment_id] = _Segment(segment_id, message.timestamp_ms,
                                                        message.timestamp_ms)
        return segment

    def finish(self) -> dict[str, int | None]:
        """Write each message's segment and every touched segment's members and span; returns
        each session's open segment (for the session cursor)."""
        self.conn.executemany("UPDATE messages SET segment_id = ? WHERE id = ?", self._placed)
        for segment in self._segments.values():
            self.conn.execute("UPDATE views SET message_ids = ?, end_ms = ? WHERE id = ?",
                              (json.dumps(segment.members), segment.end_ms, segment.id))
        return self._open
