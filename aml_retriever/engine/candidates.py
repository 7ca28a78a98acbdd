"""Candidate lists from the user's full-text index, ranked by BM25 with weighted terms.

The index lives in the user's own file, so BM25's statistics (IDF, average length) are the
user's own: no other user's corpus can move a score.

FTS5's bm25() is not used as is, for two reasons measured on public data:

- Its IDF, `log((N - df + 0.5) / (df + 0.5))`, is clamped to ~0 for a term in more than half of
  the user's messages. In a small memory that is the very name the question asks about: in a
  nine-message memory where five messages speak of 表弟, every one of them scored 0 and a message
  sharing only the particle 了 came first (MemDaily dev, simple questions: MRR .54; with the Lucene
  IDF below, the character-bigram reference reaches .68 on the same memories).
- It weighs every term alike, so a question that chats for two sentences before it asks is
  ranked by the chatter (see query.py for how a question's terms get their weights).

So each term is asked of FTS5 alone, which returns its best messages with their bm25() part,
`idf_fts5 * tf_part`; dividing by FTS5's IDF (computed from the same N and df) leaves `tf_part`,
the saturated, length-normalised frequency (k1 1.2, b 0.75), and the score of a message is
`sum(weight * idf_lucene * tf_part)` over the question's terms, with the Lucene IDF
`log(1 + (N - df + 0.5) / (df + 0.5))`, which stays positive. The work is one index lookup per
term, the same doclists the single OR query reads.
"""

from __future__ import annotations

import itertools
import math
import sqlite3
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from aml_retriever.analysis.tokenizer import quote
from aml_retriever.engine.held import Held
from aml_retriever.engine.said import SaidOrder, message_of
from aml_retriever.storage.store import rows_in
from aml_retriever.storage.timeline import HIDDEN_TABLE

# A term FTS5 finds in more than half the messages gets this IDF from bm25() (fts5_aux.c).
FTS5_IDF_FLOOR = 1e-6
# bm25()'s constants (fts5_aux.c), for a part FTS5 does not compute itself (engine/speakers.py).
K1, B = 1.2, 0.75
# The FTS5 table the lists come from (a fixed name: never built from input).
INDEX = "message_index"
INDEXES = (INDEX,)
# Most terms one Search looks up: a bound on the work one request can ask of FTS5, far above a
# real question's content terms (LoCoMo dev: at most 14; a 300-character Chinese question with an
# aside: about 250 unigrams and bigrams). Past it, the most informative terms are kept.
MAX_QUERY_TERMS = 64
# The per-connection table of the index's terms and how many messages hold each (fts5vocab).
VOCAB = "temp.message_vocab"
VOCAB_SQL = f"CREATE VIRTUAL TABLE IF NOT EXISTS {VOCAB} USING fts5vocab(main, {INDEX}, row)"


@dataclass(frozen=True)
class Term:
    """One query term: its index column ('words' or 'grams'), its text and how much it counts."""

    column: str
    text: str
    weight: float = 1.0

    @property
    def expression(self) -> str:
        """The term as an FTS5 MATCH expression: one quoted string in its own column, so no FTS5
        syntax in a query is ever obeyed."""
        return f"{self.column} : {quote(self.text)}"


def index_size(conn: sqlite3.Connection) -> int:
    """How many messages the index holds (FTS5's own row count: its 'averages' record)."""
    row = conn.execute(f"SELECT block FROM {INDEX}_data WHERE id = 1").fetchone()
    return _varints(row[0])[0] if row and row[0] else 0


def average_length(conn: sqlite3.Connection) -> float:
    """The mean length of a message in index terms, every column (FTS5's 'averages' record)."""
    row = conn.execute(f"SELECT block FROM {INDEX}_data WHERE id = 1").fetchone()
    counts = _varints(row[0]) if row and row[0] else []
    return sum(counts[1:]) / counts[0] if counts and counts[0] else 1.0


def best(scores: dict[int, float], limit: int, said: SaidOrder) -> list[tuple[int, float]]:
    """The best `limit` scored messages, best first, ties in conversation order (said.py);
    none scoring 0."""
    ranked = sorted(((rowid, score) for rowid, score in scores.items() if score > 0),
                    key=lambda item: (-item[1], item[0]))
    return cut(ranked, limit, said)


def cut(ranked: list[tuple[int, float]], limit: int, said: SaidOrder) -> list[tuple[int, float]]:
    """The first `limit` of scored messages ranked best first, the messages that tie in
    conversation order: the same whatever order they arrived in (a tie across the cut keeps
    the ones said first)."""
    end = limit
    while 0 < end < len(ranked) and ranked[end][1] == ranked[end - 1][1]:
        end += 1  # the whole run of ties at the cut, to choose among
    return said.settle(ranked[:end], _score, message_of)[:limit]


def _score(hit: tuple[int, float]) -> float:
    return hit[1]


def tf_part(length: int, average: float) -> float:
    """bm25()'s part of a term found once in a message of `length` terms (k1 1.2, b 0.75, as
    FTS5's)."""
    return (K1 + 1) / (1 + K1 * (1 - B + B * length / average))


def idf(n: int, df: int) -> float:
    """The Lucene IDF of a term `df` of `n` messages hold: positive however common it is."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


class TermIndex:
    """A Search's view of the user's full-text index: its size, each term's document count and
    each term's list are read once, however many lists and deeper readings ask for them, and
    kept for the Searches that follow while the file is unchanged (`held`, engine/held.py)."""

    def __init__(self, conn: sqlite3.Connection, hides: bool = False, held: Held | None = None,
                 withheld: object = None) -> None:
        self.conn = conn
        self.hides = hides  # whether timeline.HIDDEN_TABLE holds messages this read must not find
        self.held = held if held is not None else Held()
        self.withheld = withheld  # what the read withholds, when it `hides` (a key of the lists)
        self.said = SaidOrder(conn, self.held)  # the order of ties (said.py)
        self._chosen: dict[tuple[Term, ...], list[Term]] = {}
        self._holders: dict[str, frozenset[int]] = {}  # a word -> every message holding its stem

    @cached_property
    def size(self) -> int:
        return self.held.one("index", "size", lambda: index_size(self.conn))

    def ranked(self, terms: tuple[Term, ...], limit: int, session_id: str | None = None,
               min_idf: float = 0.0) -> list[tuple[int, float]]:
        """The best `limit` messages for these terms (at most MAX_QUERY_TERMS of them, see
        `informative`) as (rowid, score), best first, ties broken by rowid; a message is a
        candidate when it is among the best `limit` of one term. A term whose IDF is below
        `min_idf` counts for nothing."""
        return best(self.scores(terms, limit, session_id, min_idf), limit, self.said)

    def scores(self, terms: tuple[Term, ...], limit: int, session_id: str | None = None,
               min_idf: float = 0.0) -> dict[int, float]:
        """Every message among the best `limit` of one of these terms, with its score over them
        all (`ranked` before its cut)."""
        scores: dict[int, float] = defaultdict(float)
        if not terms or limit <= 0:
            return scores
        n = self.size
        for term in self.informative(terms):
            if min_idf > 0 and idf(n, self.doc_count(term)) < min_idf:
                continue  # counted before it is scored: scoring a common term costs most
            hits = self._hits(term, limit, session_id)
            if not hits:
                continue
            weight = term.weight * self.idf(term)
            fts5_idf = self.fts5_idf(term)
            for rowid, part in hits:
                scores[rowid] += weight * part / fts5_idf
        return scores

    def fts5_idf(self, term: Term) -> float:
        """The IDF FTS5's bm25() gives the term (clamped near 0 past half the messages)."""
        n, df = self.size, self.doc_count(term)
        return max(FTS5_IDF_FLOOR, math.log((n - df + 0.5) / (df + 0.5)))

    @cached_property
    def average_length(self) -> float:
        """The mean length of a message in index terms (FTS5's own, every column)."""
        return self.held.one("index", "average", lambda: average_length(self.conn))

    def idf(self, term: Term) -> float:
        """The term's Lucene IDF in this memory (counted once a Search)."""
        return idf(self.size, self.doc_count(term))

    def informative(self, terms: tuple[Term, ...]) -> list[Term]:
        """The question's terms, or past MAX_QUERY_TERMS those that say most: the heavier first
        (the ask's before the aside's), then the rarer in the user's own memory, then the
        earlier. A term the vocabulary does not list as written (a word FTS5 stems, or one the
        memory lacks) counts as rare: keeping it costs one empty lookup. Chosen once a Search."""
        if len(terms) <= MAX_QUERY_TERMS:
            return list(terms)
        if terms not in self._chosen:
            self._chosen[terms] = self._most_informative(terms)
        return self._chosen[terms]

    def _most_informative(self, terms: tuple[Term, ...]) -> list[Term]:
        self.conn.execute(VOCAB_SQL)
        marks = ",".join("?" * len(terms))
        df = dict(self.conn.execute(f"SELECT term, doc FROM {VOCAB} WHERE term IN ({marks})",
                                    [t.text for t in terms]).fetchall())
        ranked_terms = sorted(enumerate(terms),
                              key=lambda it: (-it[1].weight, df.get(it[1].text, 0), it[0]))
        return [t for _, t in sorted(ranked_terms[:MAX_QUERY_TERMS])]

    def _hits(self, term: Term, limit: int, session_id: str | None) -> tuple[tuple[int, float], ...]:
        """One term's best messages with their bm25() part (positive: higher is better). When
        they are every match (fewer than `limit`), the term's count is known, and the messages
        holding a word's stem (`holders`)."""
        key = (term, session_id, self.withheld)
        read: tuple[int, tuple[tuple[int, float], ...]] | None = self.held.get("hits", key)
        if read is not None and (read[0] >= limit or len(read[1]) < read[0]):
            # Read as deep or deeper, or every match: the best `limit` are its first (the order
            # is total: part, then conversation order).
            found = read[1][:limit]
        else:
            found = self._read_hits(term, limit, session_id)
            self.held.keep("hits", key, (limit, found), _list_bytes)
        if len(found) < limit and session_id is None and not self.hides:
            self.held.keep("df", (term.column, term.text), len(found))  # every match read: its count is known
            if term.column == "words":
                self._holders.setdefault(term.text, self.held.one(
                    "holders", key, lambda: frozenset(rowid for rowid, _ in found), _set_bytes))
        return found

    def _read_hits(self, term: Term, limit: int, session_id: str | None
                   ) -> tuple[tuple[int, float], ...]:
        """The term's best `limit` messages, ties in conversation order (`cut`): one more is
        read to see whether a tie crosses the depth, and only then every hit of the tied part
        (the lists of short turns often tie: the same length, the word once)."""
        sql = f"SELECT rowid, -bm25({INDEX}) AS part FROM {INDEX} WHERE {INDEX} MATCH ?"
        params: list[object] = [term.expression]
        if session_id is not None:
            sql += " AND rowid IN (SELECT id FROM messages WHERE session_id = ?)"
            params.append(session_id)
        if self.hides:
            sql += f" AND rowid NOT IN (SELECT id FROM {HIDDEN_TABLE})"
        sql += " ORDER BY part DESC, rowid"
        found = self.conn.execute(sql + " LIMIT ?", [*params, limit + 1]).fetchall()
        if 0 < limit < len(found) and found[limit][1] == found[limit - 1][1]:
            boundary = found[limit][1]
            found = list(itertools.takewhile(lambda hit: hit[1] >= boundary,
                                             self.conn.execute(sql, params)))
        return tuple(cut(found, limit, self.said))

    def holders(self, word: str) -> frozenset[int] | None:
        """Every message whose words column holds the word's stem, when a list of this Search
        read them all (a word FTS5 finds in fewer messages than the list's depth); else None.
        A message outside it cannot hold the word."""
        return self._holders.get(word)

    def doc_count(self, term: Term) -> int:
        """How many messages hold the term (FTS5's df for it), held by column and text: a
        term searched at another weight (an aside's, a neighbour's) is counted once."""
        return self.held.one("df", (term.column, term.text), lambda: self.conn.execute(
            f"SELECT count(*) FROM {INDEX} WHERE {INDEX} MATCH ?",
            (term.expression,)).fetchone()[0])


def _list_bytes(read: tuple[int, tuple[tuple[int, float], ...]]) -> int:
    """What a held list costs: the tuple, and each hit's pair, int and float (tracemalloc)."""
    hits = read[1]
    return 96 + 8 * len(hits) + HIT_BYTES * len(hits)


def _set_bytes(ids: frozenset[int]) -> int:
    return 216 + 40 * len(ids)


# A hit held in a list: its pair (56 bytes), its rowid (28) and its part (24).
HIT_BYTES = 108


def token_counts(conn: sqlite3.Connection, ids: list[int]) -> dict[int, int]:
    """How many index terms each message has (FTS5's own document sizes, every column)."""
    return {rowid: sum(_varints(size)) for rowid, size in
            rows_in(conn, f"SELECT id, sz FROM {INDEX}_docsize WHERE id", ids)}


def held_counts(conn: sqlite3.Connection, held: Held, ids: Iterable[int]) -> dict[int, int]:
    """`token_counts`, those held as read (engine/held.py), the others read and held."""
    return held.many("tokens", sorted(ids), lambda unread: token_counts(conn, unread))


def _varints(blob: bytes) -> list[int]:
    """Every SQLite varint of a blob of small ones (a document size per column)."""
    values, value = [], 0
    for byte in blob:
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            values.append(value)
            value = 0
    return values
