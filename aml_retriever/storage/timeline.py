"""Which stored messages a read may see: the current memory, or the memory as it was.

Every message has two times (bi-temporal): when it was true from (its event time: the message
time, or the date a statement names, `valid_ms`) and when the memory recorded it
(`recorded_ms`); an update retires the version it replaces at its own record time
(`retired_ms`). A default read sees the current, confirmed memory. `as_of` sees what the memory
held at a past record time (what was recorded by then and not yet replaced; a forgotten message is
gone for every read, its text is not kept); `since` and `until` keep messages whose event time
falls in the range; `include_history` keeps replaced versions; `include_proposed` keeps
statements no person has confirmed yet; `kind` keeps one kind.

The rule is SQL (`ReadFilter.clause`). A Search resolves it once into the messages it must not
see: for a read with a time or a kind, one pass over the user's messages; for a default read,
only the replaced or unconfirmed statements, through their own index (none, in a memory where
nothing was ever replaced: the usual case costs one index probe). The index lookups then drop
what is hidden, and so does every other way a Search reaches a message (a window's neighbours,
the turn after a hit).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from aml_retriever.common.errors import InvalidField
from aml_retriever.storage import generation

# What a default read withholds, exactly as the messages_withheld index is defined, so asking
# whether there is any reads that index alone.
WITHHELD = "retired_ms IS NOT NULL OR trust != 'confirmed'"


@dataclass(frozen=True)
class ReadFilter:
    as_of_ms: int | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    include_history: bool = False
    include_proposed: bool = False
    kind: str | None = None

    def __post_init__(self) -> None:
        if None not in (self.since_ms, self.until_ms) and self.since_ms > self.until_ms:  # type: ignore[operator]
            raise InvalidField("since must not be later than until", "since")

    @property
    def selective(self) -> bool:
        """Whether it filters by a time or a kind (beyond withholding what a default read does)."""
        return (self.as_of_ms, self.since_ms, self.until_ms, self.kind) != (None, None, None, None)

    def clause(self) -> tuple[str, list[Any]]:
        """The rule as a SQL condition over `messages`, built from fixed fragments only."""
        parts, params = ["1"], []
        if self.as_of_ms is not None:
            parts.append("recorded_ms <= ?")
            params.append(self.as_of_ms)
            if not self.include_history:
                parts.append("(retired_ms IS NULL OR retired_ms > ?)")
                params.append(self.as_of_ms)
        elif not self.include_history:
            parts.append("retired_ms IS NULL")
        if not self.include_proposed:
            parts.append("trust = 'confirmed'")
        if self.since_ms is not None:
            parts.append("coalesce(valid_ms, timestamp_ms) >= ?")
            params.append(self.since_ms)
        if self.until_ms is not None:
            parts.append("coalesce(valid_ms, timestamp_ms) <= ?")
            params.append(self.until_ms)
        if self.kind is not None:
            parts.append("role = ?")
            params.append(self.kind)
        return " AND ".join(parts), params


CURRENT = ReadFilter()  # the current, confirmed memory: what a default read sees
# The ids one Search must not find, for the index lookups to exclude in SQL (`rowid NOT IN`):
# dropping them from each term's hits in Python read every hidden match. A connection's own
# table, with the state it was made for (HIDDEN_STATE), so that a default read reuses it until a
# change to what is withheld: made anew for each Search, it cost 1.36x the read at 2,000
# statements, half of them replaced (bench/bench_lifecycle.py).
HIDDEN_TABLE = "temp.hidden_messages"
HIDDEN_STATE = "temp.hidden_state"
# A count in `meta`, moved by every change to what a default read withholds (a statement
# replaced, confirmed, proposed or removed); absent while nothing ever was, so a memory of plain
# messages (every HTTP user) pays one primary-key lookup a Search.
GENERATION = "withheld_generation"


def withheld_changed(conn: sqlite3.Connection) -> None:
    """Note, inside the write that does it, that what a default read withholds may change."""
    generation.moved(conn, GENERATION)


@dataclass(frozen=True)
class Visibility:
    """One read's filter, resolved against the user's file: whether HIDDEN_TABLE holds messages
    it must not see (the index lookups exclude them, `admits` tells the rest of a Search)."""

    filter: ReadFilter
    hides: bool
    conn: sqlite3.Connection | None = None

    @classmethod
    def of(cls, conn: sqlite3.Connection, read: ReadFilter) -> Visibility:
        where, params = read.clause()
        if read.selective:
            # One pass over the messages for the whole Search: a condition inside every index
            # lookup scanned them once per term (8x the read on a 500-statement memory).
            return cls._made(conn, read, f"SELECT id FROM messages WHERE NOT ({where})", params,
                             state=None)
        generation = conn.execute("SELECT value FROM meta WHERE key = ?", (GENERATION,)).fetchone()
        if generation is None:
            return cls(read, False)
        state = json.dumps([generation[0], where, params])
        conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {HIDDEN_STATE} (state TEXT, hides INTEGER)")
        made = conn.execute(f"SELECT hides FROM {HIDDEN_STATE} WHERE state = ?", (state,)).fetchone()
        if made is not None:
            return cls(read, bool(made[0]), conn)
        # Only replaced or unconfirmed statements can be hidden: read through their own index.
        return cls._made(conn, read, f"SELECT id FROM messages INDEXED BY messages_withheld "
                                     f"WHERE ({WITHHELD}) AND NOT ({where})", params, state)

    @classmethod
    def _made(cls, conn: sqlite3.Connection, read: ReadFilter, select: str, params: list[Any],
              state: str | None) -> Visibility:
        conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {HIDDEN_TABLE} (id INTEGER PRIMARY KEY)")
        conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {HIDDEN_STATE} (state TEXT, hides INTEGER)")
        conn.execute(f"DELETE FROM {HIDDEN_TABLE}")
        conn.execute(f"INSERT INTO {HIDDEN_TABLE} (id) {select}", params)
        hides = conn.execute(f"SELECT EXISTS (SELECT 1 FROM {HIDDEN_TABLE})").fetchone()[0]
        conn.execute(f"DELETE FROM {HIDDEN_STATE}")
        if state is not None:  # a read by time or kind depends on every message: never reused
            conn.execute(f"INSERT INTO {HIDDEN_STATE} (state, hides) VALUES (?, ?)", (state, hides))
        return cls(read, bool(hides), conn)

    @cached_property
    def hidden(self) -> frozenset[int]:
        if not self.hides or self.conn is None:
            return frozenset()
        return frozenset(m for (m,) in self.conn.execute(f"SELECT id FROM {HIDDEN_TABLE}"))

    def admits(self, message_id: int) -> bool:
        return not self.hides or message_id not in self.hidden


def said_between(conn: sqlite3.Connection, start_ms: int, end_ms: int, session_id: str | None,
                 limit: int) -> list[int]:
    """The first `limit` messages said within a span (their timestamps), of one session when
    given, in time order; found through the sessions whose span meets it (a session's first
    and last time are kept beside it) and their messages in time order (`messages_by_session`),
    never by a scan of the messages."""
    return [row[0] for row in conn.execute(
        "SELECT m.id FROM sessions s JOIN messages m INDEXED BY messages_by_session "
        "ON m.session_id = s.session_id AND m.timestamp_ms BETWEEN ? AND ? "
        "WHERE s.first_ms <= ? AND s.last_ms >= ? AND (?5 IS NULL OR s.session_id = ?5) "
        "ORDER BY m.timestamp_ms, m.said, m.id LIMIT ?6",
        (start_ms, end_ms, end_ms, start_ms, session_id, limit))]


def latest_said(conn: sqlite3.Connection) -> int | None:
    """When the latest message of the memory was said (its sessions' last times)."""
    return conn.execute("SELECT max(last_ms) FROM sessions").fetchone()[0]
