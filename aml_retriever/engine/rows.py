"""The stored messages a Search reads: `MessageRow`, one message as every stage after the index
sees it, and `load_rows`, which reads the rows the hits point at once each a Search."""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from aml_retriever.engine.held import Held, text_bytes
from aml_retriever.storage.store import rows_in
from aml_retriever.storage.views import Turn, turns

# A held row besides its strings and its slot (engine/held.ENTRY_BYTES): the object, its dict of
# 16 fields and their numbers. With its strings measured (`row_bytes`), the estimate of a user's
# rows is what tracemalloc counts within 1% (LoCoMo dev conversation 26: 872 bytes a row, BEAM
# 100K conversations 1 and 5: 3,986 and 2,460); a flat 1,024 and the text alone counted
# LoCoMo's at 1.54x and left a role's, a session's and the keys' length uncounted.
ROW_BYTES = 256


# Not frozen: a Search makes one for every message it reads (about 570 on long messages at top_k
# 100), and a frozen dataclass of 13 fields takes 1.5 us to make against 0.2 us (each field set
# through object.__setattr__). Nothing changes a row once read.
@dataclass(eq=False)
class MessageRow:
    id: int
    session_id: str
    role: str
    content: str
    timestamp_ms: int
    segment_id: int | None
    marks: int  # features.MARK_*: whether it states an update, a date
    signal_keys: str  # its names, numbers, dates and speaker (features.Features.keys_text)
    recorded_ms: int
    valid_ms: int | None
    retired_ms: int | None
    superseded_by: int | None
    trust: str
    origin: str
    told: str | None  # the dates it gives relative to its day (features.Features.told_json)
    said: int  # its Add's place among its session's Adds (analysis/sequence.py)

    @cached_property
    def day(self) -> str:
        return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=self.timestamp_ms)).date().isoformat()


def load_rows(conn: sqlite3.Connection, rows: dict[int, MessageRow], ids: Iterable[int],
              held: Held) -> None:
    """Add to `rows` the messages of `ids` it does not hold yet: held ones as they were read
    (engine/held.py), the others read and held."""
    missing = [i for i in ids if i not in rows]
    if missing:
        rows.update(held.many("rows", missing, lambda unread: _read(conn, unread), row_bytes))


def _read(conn: sqlite3.Connection, ids: list[int]) -> dict[int, MessageRow]:
    return {row[0]: MessageRow(*row) for row in rows_in(
        conn, "SELECT id, session_id, role, content, timestamp_ms, segment_id, marks, "
        "signal_keys, recorded_ms, valid_ms, retired_ms, superseded_by, trust, origin, told, "
        "said FROM messages WHERE id", ids)}


def row_bytes(row: MessageRow) -> int:
    """What a held row costs: the object, its dict of fields and their numbers (ROW_BYTES), and
    its strings, each its own object as SQLite returns them (its text, keys, dates, role and
    session: a role or a session id can be 256 characters, the keys of a long message kilobytes)."""
    return (ROW_BYTES + text_bytes(row.content) + text_bytes(row.signal_keys) + text_bytes(row.told)
            + text_bytes(row.role) + text_bytes(row.session_id) + text_bytes(row.trust)
            + text_bytes(row.origin))


def held_turns(conn: sqlite3.Connection, held: Held, ids: Sequence[int], reach: int
               ) -> dict[int, Turn]:
    """`views.turns`, those held as read (engine/held.py), the others read and held."""
    return held.many(f"turns {reach}", ids, lambda unread: turns(conn, unread, reach), _turn_bytes)


def _turn_bytes(turn: Turn) -> int:
    """What a held turn costs besides its slot: the tuple, its run and the run's ints
    (tracemalloc, a BEAM dev user's 796 turns of reach 2: 309 bytes a turn with its slot)."""
    return 40 + 28 * len(turn.run)
