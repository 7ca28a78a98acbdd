"""When each message was said: the order every tie between messages is broken by.

Two messages a Search scores alike (the same BM25 part, the same fused score, the same feature
strength) are taken in conversation order: when they were said, then by their Add's place among
its session's Adds (`said`, analysis/sequence.py), then by id, which within one Add is its order
in the Add. Never by id alone: ids are the arrival order, and a leaderboard's
client sends a conversation's Adds in parallel, so arrival differs from run to run. Measured on
a LoCoMo-Refined dev conversation fed in order and again with its Adds shuffled: with ties by
id, 104 of 138 questions were answered differently (the BM25 part of short turns ties often,
and a list cut at its depth kept different ones); by when they were said, none.

Timestamps are read only for the messages in a tie, and held for the Searches that follow
(engine/held.py), so most Searches read none: a list without ties reads nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from aml_retriever.engine.held import Held
from aml_retriever.storage.store import rows_in

T = TypeVar("T")
Said = tuple[int, int, int]  # (timestamp_ms, said, id): a message's place in conversation order


class SaidOrder:
    """The conversation order of one user's messages, read as ties need it."""

    def __init__(self, conn: sqlite3.Connection, held: Held) -> None:
        self.conn = conn
        self.held = held

    def of(self, ids: Iterable[int]) -> dict[int, Said]:
        """The place of each of these messages."""
        return self.held.many("said", ids, self._read)

    def _read(self, ids: list[int]) -> dict[int, Said]:
        return {m: (timestamp, said, m) for m, timestamp, said in rows_in(
            self.conn, "SELECT id, timestamp_ms, said FROM messages WHERE id", ids)}

    def settle(self, ranked: Sequence[T], score: Callable[[T], object],
               members: Callable[[T], Sequence[int]]) -> list[T]:
        """`ranked` (best first) with each run of equal `score` put in conversation order of
        its `members` (a message, or a window's messages in order)."""
        settled: list[T] = []
        start = 0
        while start < len(ranked):
            end = start + 1
            level = score(ranked[start])
            while end < len(ranked) and score(ranked[end]) == level:
                end += 1
            run = list(ranked[start:end])
            if len(run) > 1:
                said = self.of(m for item in run for m in members(item))
                run.sort(key=lambda item: [said.get(m, (0, 0, m)) for m in members(item)])
            settled.extend(run)
            start = end
        return settled


def message_of(hit: tuple[int, Any]) -> tuple[int]:
    """The members of a scored message, (id, score), for `SaidOrder.settle`."""
    return (hit[0],)


class Placed(Protocol):
    """A message read with its time (rows.MessageRow)."""

    id: int
    timestamp_ms: int
    said: int


def placed(rows: Mapping[int, Placed], members: Sequence[int]) -> tuple[Said, ...]:
    """The places in conversation order of messages whose rows are read."""
    return tuple(place(rows[m]) for m in members)


def place(row: Placed) -> Said:
    """A read message's place in conversation order."""
    return (row.timestamp_ms, row.said, row.id)
