"""Versions of one fact: the statements that say different things about the same thing, put in
the order a question about it needs.

An agent restates a changed fact without saying it changed ("The project targets Python 3.10.",
months later "The project targets Python 3.12."), and a question about it rarely says "now". A
lexical ranking cannot tell the versions apart (they share the question's words alike), so it
leaves them in whatever order BM25 and ties give, often the oldest first. Here, among the best
candidates, statements that hold the same thing the question asks about are one
fact's versions (see `families`); they keep the ranks they hold together, but within them:

- a question about the present (most questions) gets the newest version first;
- "originally", "at first", "initially": the oldest first;
- "before", "used to", "previously": the version just before the newest, or just before the one
  naming a value the question names ("before Valkey");
- a period ("in 2021"): the version that held then: the latest one true by the period's end.

Versions come in the order they were said (conversation order, engine/said.py): an agent
records what it learns as it learns it, and a date a statement names ("as of 2022-10") says
since when it held, not that it is older news than what was said before it. That date answers
a period question.
Pure functions; reorder.py hands over the candidates. Measured on the agent-memory suite
(evaluation/agent_memory.py, restated facts, seeds 1-3, 40 topics): see signals.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from aml_retriever.analysis.dates import period_end_ms
from aml_retriever.analysis.stopwords import STOP_WORDS
from aml_retriever.analysis.tokenizer import light_stem

# How many of the best candidates are looked at: versions of the asked-about fact rank high, and
# this bounds the pairwise comparison.
DEPTH = 20
# A version holds at least this share of the IDF weight of the question words its group's
# leader holds.
MIN_SHARED_SHARE = 0.5
# A word most statements hold ("user" in a memory about the user) is no fact's subject. Lucene
# IDF 0.3 is a word in about three quarters of the memory: a fact restated three times in a
# memory of four still has its subject (python: .36), "user" across a user's memory has not (.07).
MIN_TOPIC_IDF = 0.3


def content_words(words: Iterable[str]) -> dict[str, str]:
    """The words that say what a statement is about (no stop words, no numbers: values), each
    under its light stem, with the form it was written in."""
    return {light_stem(w): w for w in sorted(words) if w not in STOP_WORDS and not w.isdigit()}


@dataclass(frozen=True)
class Statement:
    """One candidate as this module reads it."""

    key: object
    said: tuple[int, int, int]  # its place in conversation order (said.py): the order versions came in
    stated_ms: int | None  # the date it names as when it became true, if it names one
    asked: frozenset[str]  # the question's content words it holds (`content_words`)


def families(ranked: Sequence[Statement], weight: Callable[[str], float]) -> list[list[Statement]]:
    """Groups of two or more versions among `ranked` (best first), each in ranked order.

    What a version is about is read from the question: a statement holding question words is a
    group's leader, and the statements below it are its versions when they hold the rarest of
    those words (the thing asked about: "meeting" in "the user's meeting tool", not "user") and
    most of their weight (IDF in the memory): "the owner of the search module" groups with
    "Ingrid owns the search module", not with "the search engine" or "the auth module's owner"."""
    groups: list[list[Statement]] = []
    grouped: set[int] = set()
    depth = min(len(ranked), DEPTH)
    for place, leader in enumerate(ranked[:depth]):
        below = [i for i in range(place + 1, depth) if i not in grouped]
        # Words no other candidate holds name a value ("before containerd"), not the thing.
        subject = leader.asked & frozenset().union(*(ranked[i].asked for i in below))
        subject = frozenset(w for w in subject if weight(w) >= MIN_TOPIC_IDF)
        if place in grouped or not subject:
            continue
        topic = max(sorted(subject), key=weight)
        needed = MIN_SHARED_SHARE * sum(map(weight, subject))
        members = [i for i in below if topic in ranked[i].asked
                   and sum(map(weight, ranked[i].asked & subject)) >= needed]
        if members:
            grouped.update([place, *members])
            groups.append([leader, *(ranked[i] for i in members)])
    return groups


def arrange(group: list[Statement], past: str | None, period: str | None) -> list[Statement]:
    """The order a question wants one fact's versions in (see the module docstring)."""
    by_time = sorted(group, key=lambda s: s.said)
    newest_first = by_time[::-1]
    if period is not None:
        end = period_end_ms(period)
        held = [s for s in by_time if s.stated_ms is not None and end is not None
                and s.stated_ms <= end]
        return _first(held[-1], newest_first) if held else newest_first
    if past == "first":
        return by_time
    if past == "before":
        # A question word only one version holds names its value ("before Valkey").
        naming = [s for s in by_time if any(sum(word in other.asked for other in group) == 1
                                            for word in s.asked)]
        anchor = naming[-1] if naming else by_time[-1]
        earlier = [s for s in by_time if s.said < anchor.said]
        return _first(earlier[-1], newest_first) if earlier else newest_first
    return newest_first


def _first(chosen: Statement, rest: list[Statement]) -> list[Statement]:
    return [chosen, *[s for s in rest if s is not chosen]]
