"""Feature signals: small pure functions that rank candidates by one kind of evidence.

Each takes the query plan and the candidates' facts, and returns the keys of the candidates that
have the feature, best first (ties keep the lexical order, so a feature reorders only what it
knows about). They are registered by signal name in `RANKERS`; the weights live in signals.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property
from typing import Protocol

from aml_retriever.analysis.dates import covers
from aml_retriever.analysis.features import MARK_DATED, MARK_UPDATE, unnamed_turn
from aml_retriever.engine.keys import Needles, QuestionKeys
from aml_retriever.engine.query import QueryPlan

Key = tuple[str, tuple[int, ...]]  # fusion.Candidate.key: a view kind and its messages


class Evidence(Protocol):
    """One stored message as ranking reads it (rows.MessageRow)."""

    id: int
    timestamp_ms: int
    said: int
    role: str
    marks: int  # features.MARK_*
    signal_keys: str  # its names, numbers, dates and speaker (features.Features.keys_text)
    day: str  # the date it was said, "YYYY-MM-DD"


class Facts:
    """What ranking knows of one candidate (a message or a window), merged over its messages.
    Each feature fact is read only when a ranker asks for it: most questions name no number,
    date or speaker, so most facts of most candidates are never needed. The question's names,
    numbers, dates and speakers a candidate holds are looked up in its stored keys (keys.py)."""

    def __init__(self, key: Key, base_rank: int, rows: Sequence[Evidence], words: frozenset[str],
                 follows_hit: int | None, asked: QuestionKeys) -> None:
        self.key = key
        self.base_rank = base_rank  # its place in its own lexical list: every feature's tie-break
        self.rows = rows
        self.words = words  # the question's exact words it contains
        self.follows_hit = follows_hit  # rank of the strong hit it directly follows, if any
        self.asked = asked
        self.time_ms = rows[-1].timestamp_ms
        # The last tie-break: its kind of view, then its messages' places in conversation
        # order; never their ids, which are the order the Adds arrived in (engine/said.py).
        self.said = (key[0], tuple((r.timestamp_ms, r.said, r.id) for r in rows))

    def _holds(self, needles: Needles) -> frozenset[str]:
        """The question's values one of its messages' keys hold."""
        return frozenset(value for value, found_by in needles.items()
                         if any(n in r.signal_keys for r in self.rows for n in found_by))

    @cached_property
    def entities(self) -> frozenset[str]:
        """The question's names it holds."""
        return self._holds(self.asked.entities)

    @cached_property
    def numbers(self) -> frozenset[str]:
        """The question's numbers it holds."""
        return self._holds(self.asked.numbers)

    @cached_property
    def periods(self) -> frozenset[str]:
        """The question's periods that a date it states meets (dates.covers)."""
        return self._holds(self.asked.periods)

    @cached_property
    def dated(self) -> bool:
        """Whether it states a date."""
        return any(r.marks & MARK_DATED for r in self.rows)

    @property
    def day(self) -> str:
        """The date of its last message."""
        return self.rows[-1].day

    @cached_property
    def speakers(self) -> frozenset[str]:
        """The speakers the question names that said one of its messages: by the name its
        keys hold, or by its role, for a name the conversation gives that role (when its text
        names no speaker of its own)."""
        held = self._holds(self.asked.speakers)
        roles = self.asked.plan.speaker_roles
        if roles:
            held |= {name for name, role in roles if any(
                r.role == role and unnamed_turn(r.role, r.signal_keys) for r in self.rows)}
        return held

    @cached_property
    def update(self) -> bool:
        return any(r.marks & MARK_UPDATE for r in self.rows)


def _by(facts: Sequence[Facts], strength: Callable[[Facts], float]) -> list[Key]:
    scored = [(strength(f), f.base_rank, f.said, f.key) for f in facts]
    return [key for _, _, _, key in sorted((s for s in scored if s[0] > 0),
                                           key=lambda s: (-s[0], s[1], s[2]))]


def coverage(plan: QueryPlan, facts: Sequence[Facts]) -> list[Key]:
    """Share of the question's exact words present: rewards matching the words as written, where
    BM25 over stems also counts "runs" for "running"."""
    if not plan.exact:
        return []
    return _by(facts, lambda f: len(f.words) / len(plan.exact))


def entity(plan: QueryPlan, facts: Sequence[Facts]) -> list[Key]:
    """Names and titles the question shares with a candidate. The speakers' own names are left to
    the speaker signal: people address each other by name, so those mentions are noise here."""
    speaker_words = {w for s in plan.speakers for w in s.split()} | plan.speakers
    wanted = plan.entities - speaker_words
    return _by(facts, lambda f: len(wanted & f.entities)) if wanted else []


def number(plan: QueryPlan, facts: Sequence[Facts]) -> list[Key]:
    return _by(facts, lambda f: len(plan.numbers & f.numbers)) if plan.numbers else []


def date(plan: QueryPlan, facts: Sequence[Facts]) -> list[Key]:
    """A when-question favours candidates that state a date; a question naming a period favours
    candidates dated in it (by what they say, or by when they were said)."""
    def strength(f: Facts) -> float:
        named = sum(1 for p in plan.dates if covers(p, f.day) or p in f.periods)
        return named + (1.0 if plan.asks_when and f.dated else 0.0)

    return _by(facts, strength) if plan.asks_when or plan.dates else []


def speaker(plan: QueryPlan, facts: Sequence[Facts]) -> list[Key]:
    """Turns of a speaker the question names ("What did Caroline ...")."""
    return _by(facts, lambda f: len(plan.speakers & f.speakers)) if plan.speakers else []


def adjacency(plan: QueryPlan, facts: Sequence[Facts]) -> list[Key]:
    """The turn right after a strong hit, closer to the top hit first."""
    return _by(facts, lambda f: 1.0 / f.follows_hit if f.follows_hit else 0.0)


def recency(plan: QueryPlan, facts: Sequence[Facts]) -> list[Key]:
    return [f.key for f in sorted(facts, key=lambda f: (-f.time_ms, f.base_rank, f.said))]


def supersession(plan: QueryPlan, facts: Sequence[Facts]) -> list[Key]:
    """For a question about the current state, candidates that state an update, newest first.
    Guarded: silent for every other question (including historical ones, see query.py)."""
    if not plan.asks_current:
        return []
    # Only statements about the question's subject: an update must share a word with it.
    updates = [f for f in facts if f.update and f.words & plan.subject]
    return [f.key for f in sorted(updates, key=lambda f: (-f.time_ms, f.base_rank, f.said))]


def first_person(plan: QueryPlan, facts: Sequence[Facts]) -> list[Key]:
    """For a question in the first person, the user's own single messages in lexical order: what
    "I" said is in the user's turns, not in the replies that repeat its words at length."""
    if not plan.first_person:
        return []
    return _by(facts, lambda f: 1.0 if f.key[0] == "message" and f.rows[0].role == "user" else 0.0)


Ranker = Callable[[QueryPlan, Sequence[Facts]], list[Key]]
# Feature signals by name; every name is a signal of signals.SIGNALS.
RANKERS: dict[str, Ranker] = {
    "coverage": coverage, "entity": entity, "number": number, "date": date, "speaker": speaker,
    "adjacency": adjacency, "recency": recency, "supersession": supersession,
    "first_person": first_person,
}
