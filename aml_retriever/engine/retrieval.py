"""The Search pipeline: `Retrieval` runs the stages of one Search in order. It reads the hits
(hits.py), makes the ranked lists from them and the facts about each candidate (facts.py, with
the question's words from words.py), fuses the lists by weighted reciprocal rank (fusion.py),
moves the fused scores for supersession and versions (reorder.py), and selects distinct
evidence, each result with its flags and, when asked, its parts in the score (provenance.py).
Every signal reads its weight from the RetrievalConfig; weight 0 is off."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, replace
from functools import cached_property

from aml_retriever.analysis.tokenizer import reading_words
from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.engine.candidates import TermIndex
from aml_retriever.engine.facts import Candidates, FusedLists, candidates_of
from aml_retriever.engine.fusion import Candidate, WordBudget, rrf, select
from aml_retriever.engine.held import Held
from aml_retriever.engine.hits import HitReader
from aml_retriever.engine.keys import QuestionKeys
from aml_retriever.engine.provenance import Explanation, Part, flags
from aml_retriever.engine.query import QueryPlan
from aml_retriever.engine.reorder import Reordering
from aml_retriever.engine.rows import MessageRow
from aml_retriever.engine.said import placed
from aml_retriever.engine.scoring import Key
from aml_retriever.engine.speakers import Named, named
from aml_retriever.engine.words import QuestionWords
from aml_retriever.storage.timeline import CURRENT, ReadFilter, Visibility

# How much deeper the lists are read when the first reading leaves fewer than top_k results. A
# first reading short of top_k is short by little (top_k 100 on 1,000-message users: 84 to 99
# results), so twice as deep suffices: p95 19 -> 14 ms there against four times, with the same
# LoCoMo figures at top_k 100.
DEEPER = 2


@dataclass(frozen=True)
class Result:
    candidate: Candidate
    score: float
    flags: tuple[str, ...]
    parts: tuple[Part, ...] | None = None  # only when the Search asked to explain


class Retrieval:
    """One Search over one user's file."""

    def __init__(self, conn: sqlite3.Connection, config: RetrievalConfig,
                 read: ReadFilter = CURRENT, explain: bool = False, held: Held | None = None
                 ) -> None:
        self.conn = conn
        # What earlier Searches of this state of the file read (engine/held.py); this one
        # reads what they did not and holds it for the next.
        self.held = held if held is not None else Held()
        self.config = config
        self.read = read
        self.explain = explain  # each result carries its lists' parts in its score (`Part`)
        self.rows: dict[int, MessageRow] = {}  # every message a stage read, by id
        self.words_returned: int | None = None  # the words packed, when a budget was given
        self.named = Named()  # the speakers the question names (engine/speakers.py)

    @cached_property
    def visible(self) -> Visibility:
        return Visibility.of(self.conn, self.read)

    @cached_property
    def index(self) -> TermIndex:
        withheld = self.read.clause() if self.visible.hides else None
        return TermIndex(self.conn, self.visible.hides, self.held,
                         None if withheld is None else (withheld[0], tuple(withheld[1])))

    @cached_property
    def _hits(self) -> HitReader:
        """The one stage kept over the deeper readings: it remembers the lengths it read."""
        return HitReader(self.conn, self.config, self.index, self.visible, self.rows, self.held)

    @property
    def related_words(self) -> list[tuple[str, str]]:
        """(question word, neighbour) of each word the `related` signal searched for."""
        return self._hits.related_words

    def run(self, plan: QueryPlan, top_k: int, session_id: str | None,
            max_words: int | None = None) -> list[Result]:
        """The best `top_k` distinct pieces of evidence, within `max_words` words when given.
        When windows holding several messages or repeated contents leave fewer than `top_k`
        and the lists were cut at their depth, the lists are read again, deeper (not when the
        word budget is what cut the results short)."""
        depth = max(self.config.candidate_depth, top_k)
        self.named = named(self.conn, plan, self.held)
        plan = replace(plan, speakers=self.named.names, speaker_roles=self.named.roles)
        words = QuestionWords(plan.exact, self.index, self.rows)  # each message read once a Search
        while True:
            budget = WordBudget(max_words, self._words) if max_words else None
            results, exhausted = self._run(plan, words, top_k, session_id, depth, budget)
            self.words_returned = budget.used if budget else None
            if len(results) >= top_k or exhausted or (budget and budget.binding):
                return results
            depth *= DEEPER

    def _words(self, message_id: int) -> int:
        return reading_words(self.rows[message_id].content)

    def _run(self, plan: QueryPlan, words: QuestionWords, top_k: int, session_id: str | None,
             depth: int, budget: WordBudget | None) -> tuple[list[Result], bool]:
        """One reading of the lists `depth` deep: the stages in order. Returns the results and
        whether reading deeper could add any."""
        hits = self._hits.read(plan, depth, session_id)
        candidates = candidates_of(hits)
        asked = QuestionKeys(plan)
        lists, facts = FusedLists(self.config, self.rows, words, asked).build(plan, hits, candidates)
        fused = rrf(lists, self.config.weights, self.config.rrf_k)
        arranged = Reordering(self.config, self.rows, self.index).apply(plan, fused, facts)
        flagged = flags(self.config, self.rows, lists, hits.segments,
                        (c for c, _ in candidates.values()), arranged)
        explanation = Explanation(self.config, lists) if self.explain else None
        results = [Result(chosen, fused[original.key], flagged.get(original.key, ()),
                          None if explanation is None else explanation.parts(original.key))
                   for original, chosen in self._select(plan, words, candidates, fused, top_k, budget)]
        # Reading deeper can only add a result through a new message hit (select keeps nothing
        # whose messages match nothing), so a short message list means there is nothing more.
        return results, len(hits.messages) < depth

    def _select(self, plan: QueryPlan, words: QuestionWords, candidates: Candidates,
                fused: dict[Key, float], top_k: int, budget: WordBudget | None
                ) -> list[tuple[Candidate, Candidate]]:
        """The distinct evidence among the fused candidates, best first (fusion.select), each
        as the candidate it was taken from and the one chosen."""
        order = sorted((c for c, _ in candidates.values() if c.key in fused),
                       key=lambda c: (-fused[c.key], candidates[c.key][1], c.view,
                                      placed(self.rows, c.members)))
        contents = {m: row.content for m, row in self.rows.items()}
        # Messages that are candidates in their own right (a lexical, option or adjacency hit).
        own = {members[0] for view, members in candidates if view == "message"}
        return select(order, top_k, contents, lambda m: m in own or words.matches(m, plan), budget)
