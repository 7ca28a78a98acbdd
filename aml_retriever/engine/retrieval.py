"""The Search pipeline: candidate lists from the user's indexes, facts about each candidate,
feature rankings, weighted reciprocal-rank fusion, guarded supersession, and the selection of
distinct evidence. Every signal reads its weight from the RetrievalConfig; weight 0 is off."""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from aml_retriever.analysis.features import Features
from aml_retriever.analysis.tokenizer import index_text, reading_words, words_of
from aml_retriever.common.signals import SIGNAL_NAMES, RetrievalConfig
from aml_retriever.engine.candidates import Term, TermIndex, token_counts
from aml_retriever.engine.fusion import Candidate, WordBudget, rrf, select
from aml_retriever.engine.hops import HOP_SEEDS, MIN_BRIDGE_IDF, bridge_terms
from aml_retriever.engine.query import QueryPlan
from aml_retriever.engine.scoring import RANKERS, Facts, Key
from aml_retriever.engine.versions import DEPTH as VERSIONS_DEPTH
from aml_retriever.engine.versions import Statement, arrange, content_words, families
from aml_retriever.storage.store import rows_in
from aml_retriever.storage.timeline import CURRENT, ReadFilter, Visibility
from aml_retriever.storage.views import Turn, turns, windows_around

# Message hits read per candidate wanted: windows and segments are scored from the hits they
# hold, so they need more hits than the message list keeps. FTS5 scores every match whatever the
# LIMIT, so the deeper read costs little.
HIT_FACTOR = 4
# How much deeper the lists are read when the first reading leaves fewer than top_k results. A
# first reading short of top_k is short by little (top_k 100 on 1,000-message users: 84 to 99
# results), so twice as deep suffices: p95 19 -> 14 ms there against four times, with the same
# LoCoMo figures at top_k 100.
DEEPER = 2
# A text longer than this many index terms (words, or CJK unigrams and bigrams) has its lexical
# score scaled by LONG_TOKENS / length (to the power of the brevity weight). Chat turns stay below
# it (LoCoMo messages ~25 words, windows of three ~80: LoCoMo dev figures unchanged), long
# assistant replies do not (BEAM dev: median 557 words). BEAM dev, off -> on at 150: MRR .406 ->
# .503, b@1000w .188 -> .341, first result 772 -> 474 words; 100 and 200 measured alike.
LONG_TOKENS = 150
# How many top lexical hits lend their next turn an adjacency boost.
ADJACENT_TO_TOP = 10
# At full supersession weight, a statement older than a newer update of the same thing keeps this
# share of its fused score: demoted below the update, never removed.
SUPERSEDED_KEEP = 0.5
_WORD = re.compile(r"[^\W_]+")
Window = tuple[int, ...]  # a window's members, in conversation order


@dataclass(frozen=True)
class MessageRow:
    id: int
    session_id: str
    role: str
    content: str
    timestamp_ms: int
    segment_id: int | None
    features_json: str
    recorded_ms: int
    valid_ms: int | None
    retired_ms: int | None
    superseded_by: int | None
    trust: str
    origin: str

    @cached_property
    def features(self) -> Features:
        """Parsed on first use: only rankers the question needs read a message's features."""
        return Features.from_json(self.features_json)

    @cached_property
    def day(self) -> str:
        return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=self.timestamp_ms)).date().isoformat()

    @cached_property
    def entities(self) -> frozenset[str]:
        return frozenset(self.features.entities)

    @cached_property
    def numbers(self) -> frozenset[str]:
        return frozenset(self.features.numbers)


@dataclass(frozen=True)
class _Hits:
    """What the indexes returned for one Search: (id, BM25) lists and what they point at."""

    messages: list[tuple[int, float]]
    windows: list[tuple[Window, float]]
    segments: dict[int, float]
    options: list[tuple[int, float]]
    bridged: list[tuple[int, float]]  # the second round's hits (hops.py)
    following: dict[int, int]  # the turn after a top hit: {its id: the hit's rank}
    message_order: list[int]  # messages by BM25 mixed with their segment's
    window_order: list[Window]


@dataclass(frozen=True)
class Part:
    """One fused list's part in a result's score (for `explain`): the result's 1-based rank in the
    list (None when the list does not hold it), the list's weight, and its share of the score."""

    signal: str
    rank: int | None
    weight: float
    share: float


@dataclass(frozen=True)
class Result:
    candidate: Candidate
    score: float
    flags: tuple[str, ...]
    parts: tuple[Part, ...] | None = None  # only when the Search asked to explain


class Retrieval:
    """One Search over one user's file."""

    def __init__(self, conn: sqlite3.Connection, config: RetrievalConfig,
                 read: ReadFilter = CURRENT, explain: bool = False) -> None:
        self.conn = conn
        self.config = config
        self.read = read
        self.explain = explain  # each result carries its lists' parts in its score (`Part`)
        self.rows: dict[int, MessageRow] = {}
        self._tokens: dict[int, int] = {}  # message id -> its length in index terms
        self.words_returned: int | None = None  # the words packed, when a budget was given
        self._shared: dict[int, frozenset[str]] = {}  # message id -> the question's words it has
        self._wanted: frozenset[str] = frozenset()
        self._wanted_ascii: tuple[str, ...] = ()  # the question's ASCII words
        self._stems: tuple[dict[int, tuple[str, ...]], tuple[str, ...]] | None = None

    @cached_property
    def visible(self) -> Visibility:
        return Visibility.of(self.conn, self.read)

    @cached_property
    def index(self) -> TermIndex:
        return TermIndex(self.conn, self.visible.hides)

    def run(self, plan: QueryPlan, top_k: int, session_id: str | None,
            max_words: int | None = None) -> list[Result]:
        """The best `top_k` distinct pieces of evidence, within `max_words` words when given.
        When windows holding several messages or repeated contents leave fewer than `top_k`
        and the lists were cut at their depth, the lists are read again, deeper (not when the
        word budget is what cut the results short)."""
        depth = max(self.config.candidate_depth, top_k)
        self._want_words(plan.exact)
        while True:
            budget = WordBudget(max_words, self._words) if max_words else None
            results, exhausted = self._run(plan, top_k, session_id, depth, budget)
            self.words_returned = budget.used if budget else None
            if len(results) >= top_k or exhausted or (budget and budget.binding):
                return results
            depth *= DEEPER

    def _words(self, message_id: int) -> int:
        return reading_words(self.rows[message_id].content)

    def _run(self, plan: QueryPlan, top_k: int, session_id: str | None, depth: int,
             budget: WordBudget | None) -> tuple[list[Result], bool]:
        hits = self._hits(plan, depth, session_id)
        plan = replace(plan, speakers=self._named_speakers(plan))
        candidates = self._candidates(hits)
        lists, facts = self._lists(plan, hits, candidates)
        fused = rrf(lists, self.config.weights, self.config.rrf_k)
        self._demote_superseded(plan, fused, facts)
        arranged = self._order_versions(plan, fused) if self.config.weight("versions") > 0 else set()
        order = sorted((c for c, _ in candidates.values() if c.key in fused),
                       key=lambda c: (-fused[c.key], candidates[c.key][1], c.key))
        flags = self._flags(lists, hits.segments, [c for c, _ in candidates.values()])
        for key in arranged:
            flags[key] = (*flags.get(key, ()), "versions")
        contents = {m: row.content for m, row in self.rows.items()}
        # Messages that are candidates in their own right (a lexical, option or adjacency hit).
        own = {members[0] for view, members in candidates if view == "message"}
        ranks = self._ranks(lists) if self.explain else None
        results = [Result(chosen, fused[original.key], flags.get(original.key, ()),
                          None if ranks is None else self._parts(original.key, ranks))
                   for original, chosen in select(order, top_k, contents,
                                                  lambda m: m in own or self._matches(m, plan),
                                                  budget)]
        # Reading deeper can only add a result through a new message hit (select keeps nothing
        # whose messages match nothing), so a short message list means there is nothing more.
        return results, len(hits.messages) < depth

    def _hits(self, plan: QueryPlan, depth: int, session_id: str | None) -> _Hits:
        """Every index hit the signals switched on need, with the rows they point at loaded."""
        w = self.config.weight
        found = self.index.ranked(plan.lexical, depth * HIT_FACTOR, session_id)
        around = self._turns(found)
        self._measure(found, around)
        messages = sorted(((m, self._brief(score, (m,))) for m, score in found),
                          key=lambda hit: (-hit[1], hit[0]))
        windows = self._windows_around(found, around, depth) if w("window") > 0 else []
        segments = self._segments_of(found, around) if w("segment") > 0 else {}
        messages = messages[:depth]
        options = (self.index.ranked(plan.options, depth, session_id)
                   if w("options") > 0 else [])
        following = (self._following([m for m, _ in messages[:ADJACENT_TO_TOP]], around)
                     if w("adjacency") > 0 else {})
        bridged = (self._bridged(plan, messages, {m for m, _ in found}, depth, session_id)
                   if w("hop") > 0 else [])
        self._load_rows({m for m, _ in messages} | {m for m, _ in options} | set(following)
                        | {m for window, _ in windows for m in window} | {m for m, _ in bridged})
        if self.visible.hides:  # the index found only visible messages; these
            seen = self.visible.admits          # were reached along the conversation instead
            windows = [(w, score) for w, score in windows if all(map(seen, w))]
            following = {m: rank for m, rank in following.items() if seen(m)}
        return _Hits(messages, windows, segments, options, bridged, following,
                     message_order=self._mixed_order(messages, segments, lambda m: m),
                     window_order=self._mixed_order(windows, segments, lambda w: w[-1]))

    def _bridged(self, plan: QueryPlan, messages: list[tuple[int, float]], lexical: set[int],
                 depth: int, session_id: str | None) -> list[tuple[int, float]]:
        """The second round: messages found by the terms the best hits lend (hops.py), less
        those the question's own terms found (they are ranked by those already)."""
        seeds = [m for m, _ in messages[:HOP_SEEDS]]
        self._load_rows(seeds)
        bridges = bridge_terms([self.rows[m].content for m in seeds], plan.lexical)
        return [hit for hit in self.index.ranked(bridges, depth, session_id, MIN_BRIDGE_IDF)
                if hit[0] not in lexical]

    def _lists(self, plan: QueryPlan, hits: _Hits, candidates: dict[Key, tuple[Candidate, int]]
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

    # ---- explanation ---------------------------------------------------------------------

    def _ranks(self, lists: dict[str, list[Key]]) -> dict[str, dict[Key, int]]:
        """Each fused list switched on, in the registry's order, as {candidate: 1-based rank}."""
        ranks: dict[str, dict[Key, int]] = {}
        for name in SIGNAL_NAMES:
            if name in lists and self.config.weight(name) > 0:
                ranked = ranks[name] = {}
                for rank, key in enumerate(lists[name], 1):
                    ranked.setdefault(key, rank)
        return ranks

    def _parts(self, key: Key, ranks: dict[str, dict[Key, int]]) -> tuple[Part, ...]:
        """What each fused list added to a candidate's score, weight / (k + rank), as a share of
        their sum (the fused score before supersession or versions moved it)."""
        added = {name: (ranked.get(key), self.config.weight(name)) for name, ranked in ranks.items()}
        terms = {name: 0.0 if rank is None else weight / (self.config.rrf_k + rank)
                 for name, (rank, weight) in added.items()}
        total = sum(terms.values())
        return tuple(Part(name, rank, weight, terms[name] / total if total > 0 else 0.0)
                     for name, (rank, weight) in added.items())

    # ---- loading -------------------------------------------------------------------------

    def _turns(self, messages: list[tuple[int, float]]) -> dict[int, Turn]:
        """Where each hit sits in its conversation, as far as the signals on look: windows need
        the largest window's reach, the next turn (adjacency) one step, segments none."""
        w = self.config.weight
        reach = max(self.config.window_sizes, default=1) - 1 if w("window") > 0 else 0
        if w("adjacency") > 0:
            reach = max(reach, 1)
        if reach == 0 and w("segment") <= 0:
            return {}
        return turns(self.conn, [m for m, _ in messages], reach)

    def _windows_around(self, messages: list[tuple[int, float]], around: dict[int, Turn],
                        depth: int) -> list[tuple[Window, float]]:
        """The windows holding two or more message hits, scored by the sum of their hits' BM25
        (a window that joins two matching turns outscores either turn), discounted for length
        as a message is (`_brief`)."""
        score = defaultdict(float, messages)  # a window's other members score nothing
        best = sorted((-self._brief(sum(map(score.__getitem__, w)), w), w)
                      for w in windows_around(around, self.config.window_sizes)
                      if sum(1 for m in w if score[m] > 0) >= 2)[:depth]
        return [(w, -negated) for negated, w in best]

    def _measure(self, messages: list[tuple[int, float]], around: dict[int, Turn]) -> None:
        """Read the index length of every hit and of its neighbours, when brevity is on."""
        if self.config.weight("brevity") > 0:
            ids = {m for m, _ in messages} | {m for turn in around.values() for m in turn.run}
            self._tokens.update(token_counts(self.conn, [m for m in ids if m not in self._tokens]))

    def _brief(self, score: float, members: tuple[int, ...]) -> float:
        """A lexical score discounted for length beyond LONG_TOKENS: BM25 normalises term
        frequency by length, but a long text still holds more of a question's words, and a
        reader's budget pays for every word of it (see LONG_TOKENS)."""
        weight = self.config.weight("brevity")
        if weight <= 0:
            return score
        tokens = sum(self._tokens.get(m, 1) for m in members)
        return score * min(1.0, LONG_TOKENS / tokens) ** weight

    @staticmethod
    def _segments_of(messages: list[tuple[int, float]], around: dict[int, Turn]) -> dict[int, float]:
        """Each segment's score: the sum of its message hits' BM25."""
        totals: dict[int, float] = {}
        for message_id, score in messages:
            segment = around[message_id].segment_id
            if segment is not None:
                totals[segment] = totals.get(segment, 0.0) + score
        return totals

    @staticmethod
    def _following(hits: list[int], around: dict[int, Turn]) -> dict[int, int]:
        """The next message in conversation order after each top hit: {next id: hit's rank}."""
        following: dict[int, int] = {}
        for rank, hit in enumerate(hits, 1):
            nxt = around[hit].next_id
            if nxt is not None and nxt not in following:
                following[nxt] = rank
        return following

    def _load_rows(self, ids: Iterable[int]) -> None:
        missing = [i for i in ids if i not in self.rows]
        for row in rows_in(self.conn, "SELECT id, session_id, role, content, timestamp_ms, "
                           "segment_id, features, recorded_ms, valid_ms, retired_ms, superseded_by, "
                           "trust, origin FROM messages WHERE id", missing):
            self.rows[row[0]] = MessageRow(*row)

    def _named_speakers(self, plan: QueryPlan) -> frozenset[str]:
        """This user's speakers whose every name word the question contains."""
        if not plan.exact:
            return frozenset()
        known = {row[0] for row in self.conn.execute("SELECT speaker FROM speakers")}
        return frozenset(s for s in known if set(s.split()) <= plan.exact)

    # ---- ranking -------------------------------------------------------------------------

    def _mixed_order(self, hits: list[tuple[Any, float]], segments: dict[int, float],
                     last_of: Callable[[Any], int]) -> list[Any]:
        """Order hits by their own BM25 plus, weighted, the BM25 of the segment they sit in:
        a turn in a conversation that is about the question is more likely its evidence.
        Scores are divided by each list's best so the two scales meet."""
        if not hits:
            return []
        best = hits[0][1] or 1.0
        best_segment = max(segments.values(), default=0.0) or 1.0
        weight = self.config.weight("segment")

        def mixed(hit: tuple[Any, float]) -> float:
            segment = self.rows[last_of(hit[0])].segment_id
            return hit[1] / best + weight * segments.get(segment, 0.0) / best_segment

        return [i for i, _ in sorted(hits, key=lambda h: (-mixed(h), h[0]))]

    def _candidates(self, hits: _Hits) -> dict[Key, tuple[Candidate, int]]:
        """Every message and window that some list holds, with its lexical rank."""
        found: dict[Key, tuple[Candidate, int]] = {}
        unranked = len(hits.message_order) + 1
        for rank, m in enumerate(hits.message_order, 1):
            found[("message", (m,))] = (Candidate("message", m, (m,)), rank)
        for rank, w in enumerate(hits.window_order, 1):
            found[("window", w)] = (Candidate("window", w[-1], w), rank)
        for m in [m for m, _ in hits.options + hits.bridged] + list(hits.following):
            found.setdefault(("message", (m,)), (Candidate("message", m, (m,)), unranked))
        return found

    def _facts(self, candidate: Candidate, base_rank: int, following: dict[int, int],
               plan: QueryPlan) -> Facts:
        return Facts(
            key=candidate.key, base_rank=base_rank,
            rows=[self.rows[m] for m in candidate.members],
            words=self._shared_words(candidate.members)
            if self.config.weight("coverage") > 0 or plan.asks_current else frozenset(),
            follows_hit=following.get(candidate.members[0]) if candidate.view == "message" else None,
        )

    def _matches(self, message_id: int, plan: QueryPlan) -> bool:
        """Whether a message holds a word or an n-gram of the question (for a message beyond
        the lexical lists)."""
        if self._shared_words((message_id,)):
            return True
        content = self.rows[message_id].content
        return bool(plan.terms.grams) and not content.isascii() and bool(
            set(plan.terms.grams) & set(index_text(content).grams.split()))

    def _want_words(self, wanted: frozenset[str]) -> None:
        """Prepare `_shared_words` for the question's exact words: each ASCII one is looked for
        in ASCII text as a substring first (C speed, and most candidates lack most words), and
        only where it occurs is it checked to be a whole word. One alternation of every word run
        over every candidate's whole text took 28% of a top_k 100 Search on long messages (BEAM
        dev, profiled); the same words are found (a word is alphanumeric, so two whole-word
        occurrences never overlap)."""
        self._wanted = wanted
        self._shared.clear()
        self._stems = None
        self._wanted_ascii = tuple(w for w in sorted(wanted) if w.isascii())

    def _shared_words(self, members: tuple[int, ...]) -> frozenset[str]:
        """The question's exact words that a candidate contains, as the words column sees
        them (each message is read once per Search)."""
        shared: set[str] = set()
        for m in members:
            found = self._shared.get(m)
            if found is None:
                found = self._shared[m] = self._words_in(m, self.rows[m].content)
            shared |= found
        return frozenset(shared)

    def _words_in(self, message_id: int, content: str) -> frozenset[str]:
        """The question's words in a message's text. A word is looked for only in messages that
        hold its stem, when the lexical list read every such message: in most candidates most
        words are absent, and finding that scanned the whole text (top_k 100 on long messages,
        BEAM dev: 8 words looked for in each of 160 candidates of 460 words a Search)."""
        if not content.isascii():
            return self._wanted & _exact_words(content)
        if self._stems is None:
            self._stems = self._stem_holders()
        held, unknown = self._stems
        words = held.get(message_id, ()) + unknown
        if not words:
            return frozenset()
        lower = content.lower()
        return frozenset(w for w in words if _holds_word(lower, w))

    def _stem_holders(self) -> tuple[dict[int, tuple[str, ...]], tuple[str, ...]]:
        """The question's ASCII words by the messages holding their stems, for the words whose
        holders the lexical lists read in full, and the words whose holders are unknown."""
        held: dict[int, tuple[str, ...]] = defaultdict(tuple)
        unknown: list[str] = []
        for word in self._wanted_ascii:
            holders = self.index.holders(word)
            if holders is None:
                unknown.append(word)
            for message_id in holders or ():
                held[message_id] += (word,)
        return held, tuple(unknown)

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
        ranked = sorted((k for k in fused if k[0] == "message"), key=lambda k: (-fused[k], k))
        statements = []
        for key in ranked[:VERSIONS_DEPTH]:
            row = self.rows[key[1][0]]
            held = frozenset(question) & frozenset(content_words(_exact_words(row.content)))
            statements.append(Statement(key, (row.timestamp_ms, row.id), row.valid_ms, held))

        def weight(stem: str) -> float:
            return self.index.idf(Term("words", question[stem]))

        groups = families(statements, weight)
        moved: set[Key] = set()
        for group in groups:
            slots = sorted((fused[s.key] for s in group), reverse=True)
            for place, (statement, score) in enumerate(zip(arrange(group, plan.past, plan.period),
                                                           slots, strict=True)):
                # Equal slots still keep the arranged order: each later one a hair lower.
                fused[statement.key] = score - place * 1e-9
                moved.add(statement.key)
        self._lift_family(statements, groups, fused, weight)
        return moved

    @staticmethod
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

    def _flags(self, lists: dict[str, list[Key]], segments: dict[int, float],
               candidates: list[Candidate]) -> dict[Key, tuple[str, ...]]:
        """Which signals put each candidate where it is: the provenance a caller sees."""
        flags: dict[Key, list[str]] = {}
        for name, keys in lists.items():
            if self.config.weight(name) > 0:
                for key in keys:
                    flags.setdefault(key, []).append(name)
        for candidate in candidates:
            if self.rows[candidate.members[-1]].segment_id in segments:
                flags.setdefault(candidate.key, []).append("segment")
        return {k: tuple(v) for k, v in flags.items()}


_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")


def _holds_word(text: str, word: str) -> bool:
    """Whether lowercase ASCII `text` holds `word` as a whole word (no letter or digit on
    either side), found with str.find: most candidates lack most words, found at C speed."""
    at = text.find(word)
    while at >= 0:
        end = at + len(word)
        if (at == 0 or text[at - 1] not in _ALNUM) and (end == len(text) or text[end] not in _ALNUM):
            return True
        at = text.find(word, at + 1)
    return False


def _exact_words(text: str) -> frozenset[str]:
    """A message's words as the words column sees them (tokenizer.words_of), computed cheaply:
    only words with non-ASCII letters go through the full normalisation."""
    words = set()
    for word in _WORD.findall(text.casefold()):
        if word.isascii():
            words.add(word)
        else:
            words.update(words_of(word))
    return frozenset(words)
