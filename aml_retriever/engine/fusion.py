"""Weighted reciprocal-rank fusion of ranked lists, and the final selection of results.

RRF adds, for every list a candidate appears in, the list's weight divided by (k + its rank): it
needs no score calibration between lists as different as BM25 scores and feature matches, and a
candidate near the top of several lists beats one that tops a single list.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass


def rrf(lists: Mapping[str, Sequence[Hashable]], weights: Mapping[str, float],
        k: float) -> dict[Hashable, float]:
    """Fused score of every candidate: sum over lists of weight / (k + rank), rank from 1."""
    fused: dict[Hashable, float] = {}
    for name, ranking in lists.items():
        weight = weights.get(name, 0.0)
        if weight <= 0:
            continue
        for rank, key in enumerate(ranking, 1):
            fused[key] = fused.get(key, 0.0) + weight / (k + rank)
    return fused


@dataclass(frozen=True)
class Candidate:
    """A message or a window, by the ids of the messages it holds (in conversation order). A
    window's view id is the message it ends at; it keeps that id when cut to fewer messages."""

    view: str
    view_id: int
    members: tuple[int, ...]

    @property
    def key(self) -> tuple[str, tuple[int, ...]]:
        """What it is: a kind of view and its messages (windows of two sizes that hold the same
        messages are one candidate)."""
        return (self.view, self.members)


@dataclass
class WordBudget:
    """A reader's budget of words for one Search's results (`max_words`): a result is taken
    only when all of it fits in what is left; one that does not is left out, never cut."""

    limit: int
    words_of: Callable[[int], int]  # a message's words (tokenizer.reading_words)
    used: int = 0
    binding: bool = False  # a result was left out for want of room

    def take(self, members: tuple[int, ...]) -> bool:
        cost = sum(self.words_of(m) for m in members)
        if self.used + cost > self.limit:
            self.binding = True
            return False
        self.used += cost
        return True


def select(order: Sequence[Candidate], top_k: int, content_of: Mapping[int, str],
           matches: Callable[[int], bool],
           budget: WordBudget | None = None) -> list[tuple[Candidate, Candidate]]:
    """Walk the fused order and return each piece of evidence once. A message counts as returned
    when it, or a message with the same content, was returned before; a window holding some
    returned messages is cut to the new ones (so a message and the window holding it are never
    both returned, and no two results carry the same content). A candidate whose new messages
    match none of the query (`matches`) is skipped: what made a window rank was returned already,
    and its leftover neighbours would only spend the reader's budget. With a `budget`, a result
    that does not fit is left out and its messages stay free for a later, shorter result.
    Returns (candidate, what is returned of it)."""
    covered: set[int] = set()
    seen: set[str] = set()
    chosen: list[tuple[Candidate, Candidate]] = []
    for candidate in order:
        fresh: list[int] = []
        contents: set[str] = set()
        for m in candidate.members:
            if m not in covered and content_of[m] not in seen and content_of[m] not in contents:
                fresh.append(m)
                contents.add(content_of[m])
        if not any(matches(m) for m in fresh):
            covered.update(candidate.members)
            seen.update(contents)
            continue
        returned = candidate
        if len(fresh) == 1:
            returned = Candidate("message", fresh[0], (fresh[0],))
        elif len(fresh) < len(candidate.members):
            returned = Candidate(candidate.view, candidate.view_id, tuple(fresh))
        if budget is not None and not budget.take(returned.members):
            continue
        covered.update(candidate.members)
        seen.update(contents)
        chosen.append((candidate, returned))
        if len(chosen) == top_k:
            break
    return chosen
