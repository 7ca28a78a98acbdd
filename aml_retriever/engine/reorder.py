"""The stage after fusion: fused scores moved where the question's time needs them. For a question
about the present, statements older than an update of the same thing are demoted (guarded
supersession); the versions of one fact among the best candidates are put in the order the
question asks for (versions.py), and the first of them lifted above a best candidate that only
shares a common word with the question."""

from __future__ import annotations

from collections.abc import Callable

from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.engine.candidates import Term, TermIndex
from aml_retriever.engine.query import QueryPlan
from aml_retriever.engine.rows import MessageRow
from aml_retriever.engine.said import place, placed
from aml_retriever.engine.scoring import Facts, Key
from aml_retriever.engine.versions import DEPTH as VERSIONS_DEPTH
from aml_retriever.engine.versions import Statement, arrange, content_words, families
from aml_retriever.engine.words import exact_words

# At full supersession weight, a statement older than a newer update of the same thing keeps this
# share of its fused score: demoted below the update, never removed.
SUPERSEDED_KEEP = 0.5


class Reordering:
    """Moves fused scores in place, after fusion and before selection."""

    def __init__(self, config: RetrievalConfig, rows: dict[int, MessageRow], index: TermIndex) -> None:
        self.config = config
        self.rows = rows
        self.index = index

    def apply(self, plan: QueryPlan, fused: dict[Key, float], facts: list[Facts]) -> set[Key]:
        """Supersession, then versions when that signal is on; returns the keys versions moved."""
        self._demote_superseded(plan, fused, facts)
        return self._order_versions(plan, fused) if self.config.weight("versions") > 0 else set()

    def _demote_superseded(self, plan: QueryPlan, fused: dict[Key, float], facts: list[Facts]) -> None:
        """For a current-state question: once a newer candidate states an update, older candidates
        that share the question's words with it lose part of their score (never all of it)."""
        weight = min(1.0, self.config.weight("supersession"))
        if weight <= 0 or not plan.asks_current:
            return
        ranked_facts = sorted((f for f in facts if f.key in fused), key=lambda f: -fused[f.key])
        updates = [f for f in ranked_facts[:20] if f.update and f.words & plan.subject]
        if not updates:
            return
        newest = max(updates, key=lambda f: f.time_ms)
        subject = newest.words & plan.subject
        for f in ranked_facts:
            if f.time_ms < newest.time_ms and f.key != newest.key and subject & f.words:
                fused[f.key] *= 1.0 - weight * (1.0 - SUPERSEDED_KEEP)

    def _order_versions(self, plan: QueryPlan, fused: dict[Key, float]) -> set[Key]:
        """Put each fact's versions among the best candidates in the order the question needs
        (versions.py), in the ranks they hold together; returns the keys it moved."""
        question = content_words(plan.subject)  # light stem -> the word as the question wrote it
        statements = self._statements(question, fused)

        def weight(stem: str) -> float:
            return self.index.idf(Term("words", question[stem]))

        groups = families(statements, weight)
        moved: set[Key] = set()
        for group in groups:
            slots = sorted((fused[s.key] for s in group), reverse=True)
            for rank, (statement, score) in enumerate(zip(arrange(group, plan.past, plan.period),
                                                          slots, strict=True)):
                # Equal slots still keep the arranged order: each later one a hair lower.
                fused[statement.key] = score - rank * 1e-9
                moved.add(statement.key)
        _lift_family(statements, groups, fused, weight)
        return moved

    def _statements(self, question: dict[str, str], fused: dict[Key, float]) -> list[Statement]:
        """The best message candidates, best first, each with the question's words it holds."""
        ranked = sorted((k for k in fused if k[0] == "message"),
                        key=lambda k: (-fused[k], placed(self.rows, k[1])))
        statements = []
        for key in ranked[:VERSIONS_DEPTH]:
            row = self.rows[key[1][0]]
            held = frozenset(question) & frozenset(content_words(exact_words(row.content)))
            statements.append(Statement(key, place(row), row.valid_ms, held))
        return statements


def _lift_family(statements: list[Statement], groups: list[list[Statement]],
                 fused: dict[Key, float], weight: Callable[[str], float]) -> None:
    """When the best candidate is no fact's version and lacks the rarest question word the
    versions hold, it matched on a word the question shares with other things ("written" in
    "What is the frontend written in?"): the versions' first goes above it. Agent-memory
    suite, restated (seeds 1-3): past questions .738 -> .803 first, present unchanged;
    paraphrased present .550 -> .558, past .306 -> .319."""
    if not statements or not groups:
        return
    top = statements[0]
    if any(top in g for g in groups):
        return
    held = [w for g in groups for s in g for w in s.asked]
    if not held:
        return
    rarest = max(sorted(set(held)), key=weight)
    if rarest in top.asked:
        return
    group = next(g for g in groups if any(rarest in s.asked for s in g))
    first = max(group, key=lambda s: fused[s.key])
    fused[first.key] = fused[top.key] + 1e-6
