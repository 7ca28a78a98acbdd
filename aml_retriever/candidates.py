"""Candidate messages from the user's full-text index, ranked by FTS5's BM25.

The index lives in the user's own file, so BM25's statistics (IDF, average length) are the
user's own: no other user's corpus can move a score.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from aml_retriever.tokenizer import match_expression, query_terms

# Column weights for bm25(): a word match and a two-character n-gram match count alike, so a
# query mixing scripts is not biased towards either column.
WORDS_WEIGHT = 1.0
GRAMS_WEIGHT = 1.0


@dataclass(frozen=True)
class Candidate:
    message_id: int
    score: float  # higher is better (FTS5's bm25() negated)


def bm25_candidates(conn: sqlite3.Connection, query: str, limit: int,
                    session_id: str | None = None) -> list[Candidate]:
    """The best `limit` messages for the query, best first, ties broken by message id."""
    expression = match_expression(query_terms(query))
    if expression is None:
        return []
    sql = ("SELECT rowid, bm25(message_index, ?, ?) AS rank_score FROM message_index "
           "WHERE message_index MATCH ?")
    params: list[object] = [WORDS_WEIGHT, GRAMS_WEIGHT, expression]
    if session_id is not None:
        sql += " AND rowid IN (SELECT id FROM messages WHERE session_id = ?)"
        params.append(session_id)
    sql += " ORDER BY rank_score, rowid LIMIT ?"
    params.append(limit)
    return [Candidate(rowid, -score) for rowid, score in conn.execute(sql, params)]
