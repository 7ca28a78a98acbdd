"""The first stage of a Search: reading the user's indexes. `HitReader` reads the message hits
and the views built from them (windows and segments scored from the hits they hold, the turn
after a top hit, the second round's bridged hits), discounts long texts (`LONG_TOKENS`), orders
each lexical list with its segments' scores, and loads the rows every hit points at. `Hits` is
what it read."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aml_retriever.analysis import related
from aml_retriever.analysis.dates import period_span_ms
from aml_retriever.analysis.features import DATE_KEY, KEY_END
from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.engine.candidates import Term, TermIndex, best, held_counts, idf, tf_part
from aml_retriever.engine.held import Held
from aml_retriever.engine.hops import HOP_SEEDS, MIN_BRIDGE_IDF, bridge_terms
from aml_retriever.engine.query import QueryPlan
from aml_retriever.engine.rows import MessageRow, held_turns, load_rows
from aml_retriever.engine.said import message_of
from aml_retriever.engine.speakers import SpeakerTerm
from aml_retriever.storage import timeline
from aml_retriever.storage.store import rows_in
from aml_retriever.storage.timeline import Visibility
from aml_retriever.storage.views import Turn, windows_joining

# A text longer than this many index terms (words, or CJK unigrams and bigrams) has its lexical
# score scaled by LONG_TOKENS / length (to the power of the brevity weight). Chat turns stay below
# it (LoCoMo messages ~25 words, windows of three ~80: LoCoMo dev figures unchanged), long
# assistant replies do not (BEAM dev: median 557 words). BEAM dev, off -> on at 150: MRR .406 ->
# .503, b@1000w .188 -> .341, first result 772 -> 474 words; 100 and 200 measured alike.
LONG_TOKENS = 150
# Most messages said in one period a question names that are read (a day of chat holds tens; a
# month of a large memory may hold thousands, of which the first are read), and how long after
# it a message may still give a date in it ("four weeks ago": the relative dates analysis/dates.py
# resolves to a day reach back that far).
SAID_IN_READ = 2000
DATED_AFTER_MS = 35 * 86_400_000
# How many top lexical hits lend their next turn an adjacency boost.
ADJACENT_TO_TOP = 10
Window = tuple[int, ...]  # a window's members, in conversation order


@dataclass(frozen=True)
class Hits:
    """What the indexes returned for one Search: (id, BM25) lists and what they point at."""

    messages: list[tuple[int, float]]
    windows: list[tuple[Window, float]]
    segments: dict[int, float]
    options: list[tuple[int, float]]
    bridged: list[tuple[int, float]]  # the second round's hits (hops.py)
    following: dict[int, int]  # the turn after a top hit: {its id: the hit's rank}
    message_order: list[int]  # messages by BM25 mixed with their segment's
    window_order: list[Window]


class HitReader:
    """Reads one Search's hits into `rows`; kept for the Search, so a deeper reading does not
    read again the lengths a shallower one read. What it reads of the file is held for the
    Searches that follow while the file is unchanged (`held`, engine/held.py)."""

    def __init__(self, conn: sqlite3.Connection, config: RetrievalConfig, index: TermIndex,
                 visible: Visibility, rows: dict[int, MessageRow], held: Held) -> None:
        self.conn = conn
        self.config = config
        self.index = index
        self.visible = visible
        self.rows = rows
        self.held = held
        self._tokens: dict[int, int] = {}  # message id -> its length in index terms
        self._brevity = config.weight("brevity")
        # (question word, neighbour) of each word the `related` signal searched for (`_related`)
        self.related_words: list[tuple[str, str]] = []

    def read(self, plan: QueryPlan, depth: int, session_id: str | None) -> Hits:
        """Every index hit the signals switched on need, with the rows they point at loaded."""
        w = self.config.weight
        found = self._lexical(plan, depth * self.config.hit_depth, session_id)
        around = self._turns(found)
        self._measure([m for m, _ in found])
        messages = self.index.said.settle(
            sorted(((m, self._brief(score, (m,))) for m, score in found),
                   key=lambda hit: (-hit[1], hit[0])), _score, message_of)
        windows = self._windows_around(found, around, depth) if w("window") > 0 else []
        segments = self._segments_of(found, around) if w("segment") > 0 else {}
        messages = messages[:depth]
        options = (self.index.ranked(plan.options, depth, session_id)
                   if w("options") > 0 else [])
        following = (self._following([m for m, _ in messages[:ADJACENT_TO_TOP]], around)
                     if w("adjacency") > 0 else {})
        bridged = (self._bridged(plan, messages, {m for m, _ in found}, depth, session_id)
                   if w("hop") > 0 else [])
        load_rows(self.conn, self.rows,
                  {m for m, _ in messages} | {m for m, _ in options} | set(following)
                  | {m for window, _ in windows for m in window} | {m for m, _ in bridged},
                  self.held)
        if self.visible.hides:  # the index found only visible messages; these
            seen = self.visible.admits          # were reached along the conversation instead
            windows = [(window, score) for window, score in windows if all(map(seen, window))]
            following = {m: rank for m, rank in following.items() if seen(m)}
        return Hits(messages, windows, segments, options, bridged, following,
                    message_order=self._mixed_order(messages, segments, lambda m: m),
                    window_order=self._mixed_order(windows, segments, lambda window: window[-1]))

    def _lexical(self, plan: QueryPlan, limit: int, session_id: str | None) -> list[tuple[int, float]]:
        """The question's best `limit` messages. A speaker's name the conversation gives a role
        counts as said in that role's turns (speakers.SpeakerTerm), with the speaker signal on;
        a day or a month the question names, as written in the messages said in it, with the
        date signal on (`_said_in`)."""
        w = self.config.weight
        named = plan.speaker_roles and w("speaker") > 0
        said = self._said_in(plan, session_id) if plan.dates and w("date") > 0 else []
        near = self._related(plan)
        if not named and not said:
            return self.index.ranked(plan.lexical + near, limit, session_id)
        speaker_term = SpeakerTerm(self.conn, self.index, self.visible, self.held)
        terms, named_terms = speaker_term.split(plan) if named else (plan.lexical, [])
        scores = self.index.scores(tuple(terms) + near, limit, session_id)
        speaker_term.add(scores, named_terms, limit, session_id)
        self._add_said(scores, said)
        return best(scores, limit, self.index.said)

    def _related(self, plan: QueryPlan) -> tuple[Term, ...]:
        """For each of the question's words that the user's messages lack, the words nearest it
        in meaning (`QueryPlan.related`) that they hold, at most MOST_NEIGHBOURS a word, each
        searched at the `related` share of its word's weight; which word brought which is kept
        for `explain` (`related_words`).

        Only a word the memory lacks: a neighbour stands in for a word the conversation never
        used ("instruments" where it says "violin"). Expanding every word too moved LoCoMo
        leaderboard-format dev MRR .661 -> .666 and b@1000w .851 -> .858, but BEAM dev (long
        replies hold many neighbours) MRR .500 -> .490, b@1000w .484 -> .477; words held in at
        most 3 messages, LoCoMo .666 / .850."""
        share = self.config.weight("related")
        self.related_words = []
        if share <= 0:
            return ()
        searched = {t.text for t in plan.lexical}
        terms: list[Term] = []
        for term, near in plan.related:
            if self.index.doc_count(term) > 0:
                continue
            for word in related.held((n for n in near if n not in searched),
                                     lambda n: self.index.doc_count(Term("words", n)) > 0):
                searched.add(word)
                terms.append(Term("words", word, share * term.weight))
                self.related_words.append((term.text, word))
        return tuple(terms)

    def _said_in(self, plan: QueryPlan, session_id: str | None) -> list[tuple[str, set[int]]]:
        """For each day or month the question names, the messages of it (`_of`)."""
        found = []
        for period in plan.dates:
            span = period_span_ms(period) if len(period) > len("2023") else None
            if span is not None:
                dated = self._of(period, span, session_id)
                if dated:
                    found.append((period, dated))
        return found

    def _of(self, period: str, span: tuple[int, int], session_id: str | None) -> set[int]:
        """The messages of a period: said in it and giving no other date, or giving a date in it
        (the day, or a day of the month) and said in it or within DATED_AFTER of it ("three
        days ago" said on the 14th is of the 11th), at most SAID_IN_READ of each, as the Search
        may see them."""
        start, end = span
        said = set(timeline.said_between(self.conn, start, end, session_id, SAID_IN_READ))
        later = timeline.said_between(self.conn, end + 1, end + DATED_AFTER_MS, session_id,
                                      SAID_IN_READ)
        written = KEY_END + DATE_KEY + period
        found = {m for m, keys in rows_in(self.conn, "SELECT id, signal_keys FROM messages WHERE id",
                                          sorted(said | set(later)))
                 if written in keys or (m in said and KEY_END + DATE_KEY not in keys)}
        return {m for m in found if self.visible.admits(m)} if self.visible.hides else found

    def _add_said(self, scores: dict[int, float], said: list[tuple[str, set[int]]]) -> None:
        """A period the question names counts as written once in each of its messages (`_of`:
        "What did Jolene ask Deb on 13 March, 2023?", the answer said that day and never
        writing the date; "I ran 5 km yesterday", said the day after), with the IDF of as many
        messages."""
        for _, dated in said:
            weight = idf(self.index.size, len(dated))
            average = self.index.average_length
            for rowid, length in sorted(held_counts(self.conn, self.held, dated).items()):
                if length > 0:
                    scores[rowid] += weight * tf_part(length, average)

    def _bridged(self, plan: QueryPlan, messages: list[tuple[int, float]], lexical: set[int],
                 depth: int, session_id: str | None) -> list[tuple[int, float]]:
        """The second round: messages found by the terms the best hits lend (hops.py), less
        those the question's own terms found (they are ranked by those already)."""
        seeds = [m for m, _ in messages[:HOP_SEEDS]]
        load_rows(self.conn, self.rows, seeds, self.held)
        bridges = bridge_terms([self.rows[m].content for m in seeds], plan.lexical)
        return [hit for hit in self.index.ranked(bridges, depth, session_id, MIN_BRIDGE_IDF)
                if hit[0] not in lexical]

    def _turns(self, messages: list[tuple[int, float]]) -> dict[int, Turn]:
        """Where each hit sits in its conversation, as far as the signals on look: windows need
        the largest window's reach, the next turn (adjacency) one step, segments none."""
        w = self.config.weight
        reach = max(self.config.window_sizes, default=1) - 1 if w("window") > 0 else 0
        if w("adjacency") > 0:
            reach = max(reach, 1)
        if reach == 0 and w("segment") <= 0:
            return {}
        return held_turns(self.conn, self.held, [m for m, _ in messages], reach)

    def _windows_around(self, messages: list[tuple[int, float]], around: dict[int, Turn],
                        depth: int) -> list[tuple[Window, float]]:
        """The windows holding two or more message hits, scored by the sum of their hits' BM25
        (a window that joins two matching turns outscores either turn), discounted for length
        as a message is (`_brief`)."""
        score = defaultdict(float, messages)  # a window's other members score nothing
        held = windows_joining({m: around[m] for m, _ in messages}, self.config.window_sizes)
        self._measure([m for w in held for m in w])  # the members that are no hit: not yet read
        ranked = sorted(((w, self._brief(sum(map(score.__getitem__, w)), w)) for w in held),
                        key=lambda scored: (-scored[1], scored[0]))
        end = depth
        while 0 < end < len(ranked) and ranked[end][1] == ranked[end - 1][1]:
            end += 1  # a tie across the depth is settled in conversation order, then cut
        return self.index.said.settle(ranked[:end], _score, _members)[:depth]

    def _measure(self, ids: list[int]) -> None:
        """Read the index length of these messages, when brevity is on: the hits, then the
        members of the windows scored (reading every hit's neighbours read five rows a hit)."""
        if self._brevity > 0:
            missing = {m for m in ids if m not in self._tokens}
            self._tokens.update(held_counts(self.conn, self.held, missing))

    def _brief(self, score: float, members: tuple[int, ...]) -> float:
        """A lexical score discounted for length beyond LONG_TOKENS: BM25 normalises term
        frequency by length, but a long text still holds more of a question's words, and a
        reader's budget pays for every word of it (see LONG_TOKENS)."""
        weight = self._brevity
        if weight <= 0:
            return score
        tokens = self._tokens
        length = sum([tokens.get(m, 1) for m in members]) if len(members) > 1 else tokens.get(members[0], 1)
        return score * min(1.0, LONG_TOKENS / length) ** weight

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

        ranked = sorted(((h[0], mixed(h)) for h in hits), key=lambda h: (-h[1], h[0]))
        return [i for i, _ in self.index.said.settle(ranked, _score, _members)]


def _score(hit: tuple[Any, float]) -> float:
    return hit[1]


def _members(hit: tuple[Any, float]) -> tuple[int, ...]:
    """The messages of a scored hit: a message's id, or a window's members (in order)."""
    return hit[0] if isinstance(hit[0], tuple) else (hit[0],)
