"""The question's signal keys in the user's memory: which messages hold each of its names,
numbers, dates and speakers, read by key from what every Add stored (`signal_keys`, written by
memory/derived.py), so no candidate's features are parsed at Search time. A kind is read only
when a ranker asks for it: most questions name no number, date or speaker.

Parsing each candidate's stored features took 14% of a top_k 100 Search on long messages (BEAM
dev, profiled, 160 candidates of 460 words each); reading the question's keys is one indexed
lookup a key, whatever the number of candidates."""

from __future__ import annotations

import sqlite3
from functools import cached_property

from aml_retriever.analysis.features import DATE_KEY, ENTITY_KEY, NUMBER_KEY, SPEAKER_KEY
from aml_retriever.engine.query import QueryPlan

Holders = dict[str, frozenset[int]]  # a question's value -> the messages holding it


class HeldKeys:
    """One Search's view of the stored keys of its question (`plan`, with its speakers named)."""

    def __init__(self, conn: sqlite3.Connection, plan: QueryPlan) -> None:
        self.conn = conn
        self.plan = plan

    @cached_property
    def entities(self) -> Holders:
        return {e: self._holding(ENTITY_KEY + e) for e in sorted(self.plan.entities)}

    @cached_property
    def numbers(self) -> Holders:
        return {n: self._holding(NUMBER_KEY + n) for n in sorted(self.plan.numbers)}

    @cached_property
    def speakers(self) -> Holders:
        return {s: self._holding(SPEAKER_KEY + s) for s in sorted(self.plan.speakers)}

    @cached_property
    def periods(self) -> Holders:
        """Each period the question names -> the messages stating a date it covers or that
        covers it (dates.covers: "2023-05" and "2023-05-20" meet, so do "2023" and "2023-05")."""
        return {p: self._dated_within(p) | self._dated_around(p) for p in self.plan.dates}

    def _holding(self, key: str) -> frozenset[int]:
        return frozenset(m for (m,) in self.conn.execute(
            "SELECT message_id FROM signal_keys WHERE key = ?", (key,)))

    def _dated_within(self, period: str) -> frozenset[int]:
        """Messages stating a date that starts with the period: the keys from DATE_KEY + period
        up to the next prefix (the period's last character moved one on)."""
        if not period:
            return frozenset()
        after = period[:-1] + chr(ord(period[-1]) + 1)
        return frozenset(m for (m,) in self.conn.execute(
            "SELECT message_id FROM signal_keys WHERE key >= ? AND key < ?",
            (DATE_KEY + period, DATE_KEY + after)))

    def _dated_around(self, period: str) -> frozenset[int]:
        """Messages stating a date the period starts with (a year or month holding the day)."""
        prefixes = [DATE_KEY + period[:end] for end in range(1, len(period))]
        if not prefixes:
            return frozenset()
        marks = ",".join("?" * len(prefixes))
        return frozenset(m for (m,) in self.conn.execute(
            f"SELECT message_id FROM signal_keys WHERE key IN ({marks})", prefixes))
