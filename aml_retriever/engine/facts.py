"""The second stage of a Search: from the hits to the ranked lists fusion reads. The candidates
(every message and window some list holds, `candidates_of`), and `FusedLists`: the lexical
lists, the facts about each candidate (with the question's keys looked up in theirs, keys.py)
and one list per feature signal switched on (scoring.py)."""

from __future__ import annotations

from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.engine.fusion import Candidate
from aml_retriever.engine.hits import Hits
from aml_retriever.engine.keys import QuestionKeys
from aml_retriever.engine.query import QueryPlan
from aml_retriever.engine.rows import MessageRow
from aml_retriever.engine.scoring import RANKERS, Facts, Key
from aml_retriever.engine.words import QuestionWords

Candidates = dict[Key, tuple[Candidate, int]]  # every candidate, with its lexical rank


def candidates_of(hits: Hits) -> Candidates:
    """Every message and window that some list holds, with its lexical rank."""
    found: Candidates = {}
    unranked = len(hits.message_order) + 1
    for rank, m in enumerate(hits.message_order, 1):
        found[("message", (m,))] = (Candidate("message", m, (m,)), rank)
    for rank, w in enumerate(hits.window_order, 1):
        found[("window", w)] = (Candidate("window", w[-1], w), rank)
    for m in [m for m, _ in hits.options + hits.bridged] + list(hits.following):
        found.setdefault(("message", (m,)), (Candidate("message", m, (m,)), unranked))
    return found


class FusedLists:
    """The ranked lists of one question, from its hits and the facts about its candidates."""

    def __init__(self, config: RetrievalConfig, rows: dict[int, MessageRow],
                 words: QuestionWords, asked: QuestionKeys) -> None:
        self.config = config
        self.rows = rows
        self.words = words
        self.asked = asked

    def build(self, plan: QueryPlan, hits: Hits, candidates: Candidates
              ) -> tuple[dict[str, list[Key]], list[Facts]]:
        """Every ranked list fusion reads (the lexical ones, then one per feature signal on), and
        the facts the features were read from."""
        lists: dict[str, list[Key]] = {
            "lexical": [("message", (m,)) for m in hits.message_order],
            "window": [("window", w) for w in hits.window_order],
            "options": [("message", (m,)) for m, _ in hits.options],
            "hop": [("message", (m,)) for m, _ in hits.bridged],
        }
        rankers = [(name, ranker) for name, ranker in RANKERS.items() if self.config.weight(name) > 0]
        if not rankers:
            return lists, []
        facts = [self._facts(c, rank, hits.following, plan) for c, rank in candidates.values()]
        for name, ranker in rankers:
            lists[name] = ranker(plan, facts)
        return lists, facts

    def _facts(self, candidate: Candidate, base_rank: int, following: dict[int, int],
               plan: QueryPlan) -> Facts:
        return Facts(
            key=candidate.key, base_rank=base_rank,
            rows=[self.rows[m] for m in candidate.members],
            words=self.words.shared(candidate.members)
            if self.config.weight("coverage") > 0 or plan.asks_current else frozenset(),
            follows_hit=following.get(candidate.members[0]) if candidate.view == "message" else None,
            asked=self.asked,
        )
