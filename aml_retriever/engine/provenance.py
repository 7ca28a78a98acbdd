"""Why each result stands where it does, as its answer tells a caller: its flags (`flags`, the
signals that put it there) and, when the Search asks to explain, each fused list's part in its
score (`Explanation`, `Part`) and the words nearest in meaning to the question's that it holds
(`held_neighbours`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aml_retriever.analysis.tokenizer import light_stem, words_of
from aml_retriever.common.signals import SIGNAL_NAMES, RetrievalConfig
from aml_retriever.engine.fusion import Candidate
from aml_retriever.engine.rows import MessageRow
from aml_retriever.engine.scoring import Key


def flags(config: RetrievalConfig, rows: dict[int, MessageRow], lists: dict[str, list[Key]],
          segments: dict[int, float], candidates: Iterable[Candidate],
          arranged: set[Key]) -> dict[Key, tuple[str, ...]]:
    """Which signals put each candidate where it is: every list switched on that holds it, the
    segment when its conversation scored, and the versions when they moved it."""
    found: dict[Key, list[str]] = {}
    for name, keys in lists.items():
        if config.weight(name) > 0:
            for key in keys:
                found.setdefault(key, []).append(name)
    for candidate in candidates:
        if rows[candidate.members[-1]].segment_id in segments:
            found.setdefault(candidate.key, []).append("segment")
    for key in arranged:
        found.setdefault(key, []).append("versions")
    return {k: tuple(v) for k, v in found.items()}


@dataclass(frozen=True)
class Part:
    """One fused list's part in a result's score (for `explain`): the result's 1-based rank in the
    list (None when the list does not hold it), the list's weight, and its share of the score."""

    signal: str
    rank: int | None
    weight: float
    share: float


class Explanation:
    """The places of every candidate in the fused lists, read once a Search, and from them each
    result's parts."""

    def __init__(self, config: RetrievalConfig, lists: dict[str, list[Key]]) -> None:
        self.config = config
        self.ranks = self._ranks(lists)

    def _ranks(self, lists: dict[str, list[Key]]) -> dict[str, dict[Key, int]]:
        """Each fused list switched on, in the registry's order, as {candidate: 1-based rank}."""
        ranks: dict[str, dict[Key, int]] = {}
        for name in SIGNAL_NAMES:
            if name in lists and self.config.weight(name) > 0:
                ranked = ranks[name] = {}
                for rank, key in enumerate(lists[name], 1):
                    ranked.setdefault(key, rank)
        return ranks

    def parts(self, key: Key) -> tuple[Part, ...]:
        """What each fused list added to a candidate's score, weight / (k + rank), as a share of
        their sum (the fused score before supersession or versions moved it)."""
        added = {name: (ranked.get(key), self.config.weight(name)) for name, ranked in self.ranks.items()}
        terms = {name: 0.0 if rank is None else weight / (self.config.rrf_k + rank)
                 for name, (rank, weight) in added.items()}
        total = sum(terms.values())
        return tuple(Part(name, rank, weight, terms[name] / total if total > 0 else 0.0)
                     for name, (rank, weight) in added.items())


def held_neighbours(related: Sequence[tuple[str, str]], texts: Sequence[str]
                    ) -> list[dict[str, str]]:
    """Which question word brought which neighbour (the `related` signal's (word, neighbour)
    searched for) that these texts hold, compared as light stems."""
    if not related:
        return []
    stems = {light_stem(word) for text in texts for word in words_of(text)}
    return [{"word": word, "neighbour": near} for word, near in related
            if light_stem(near) in stems]
