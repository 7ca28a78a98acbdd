"""Which stored messages a read may see: the current memory, or the memory as it was.

Every message has two times (bi-temporal): when it was true from (its event time: the message
time, or the date a statement names, `valid_ms`) and when the memory recorded it
(`recorded_ms`); an update retires the version it replaces at its own record time
(`retired_ms`). A default read sees the current, confirmed memory. `as_of` sees what the memory
held at a past record time (what was recorded by then and not yet replaced; a forgotten message is
gone for every read, its text is not kept); `since` and `until` keep messages whose event time
falls in the range; `include_history` keeps replaced versions; `include_proposed` keeps
statements no person has confirmed yet; `kind` keeps one kind.

The same rule is written twice, as SQL for the index lookups and as Python for the rows a
Search reaches by other ways (a window's neighbours, the turn after a hit); a test holds the two
to the same answers.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any, Protocol

from aml_retriever.errors import InvalidField

# What a default read withholds, exactly as the messages_withheld index is defined, so asking
# whether there is any reads that index alone.
WITHHELD = "retired_ms IS NOT NULL OR trust != 'confirmed'"


class Versioned(Protocol):
    """The lifecycle columns of a message row, as the Python side of the rule reads them."""

    role: str
    timestamp_ms: int
    recorded_ms: int
    valid_ms: int | None
    retired_ms: int | None
    trust: str


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

    def admits(self, row: Versioned) -> bool:
        """The rule of `clause`, for one row already read."""
        event = row.timestamp_ms if row.valid_ms is None else row.valid_ms
        if self.as_of_ms is not None:
            if row.recorded_ms > self.as_of_ms:
                return False
            if not self.include_history and row.retired_ms is not None and \
                    row.retired_ms <= self.as_of_ms:
                return False
        elif not self.include_history and row.retired_ms is not None:
            return False
        return ((self.include_proposed or row.trust == "confirmed")
                and (self.since_ms is None or event >= self.since_ms)
                and (self.until_ms is None or event <= self.until_ms)
                and (self.kind is None or row.role == self.kind))


CURRENT = ReadFilter()  # the current, confirmed memory: what a default read sees


@dataclass(frozen=True)
class Visibility:
    """One read's filter, resolved against the user's file: the SQL condition the index lookups
    add (None when every message is visible, the usual case, so a default read pays nothing)."""

    filter: ReadFilter
    condition: tuple[str, list[Any]] | None

    @classmethod
    def of(cls, conn: sqlite3.Connection, read: ReadFilter) -> Visibility:
        if not read.selective and not conn.execute(
                f"SELECT EXISTS (SELECT 1 FROM messages WHERE {WITHHELD})").fetchone()[0]:
            return cls(read, None)
        return cls(read, read.clause())

    def admits(self, row: Versioned) -> bool:
        return self.condition is None or self.filter.admits(row)
