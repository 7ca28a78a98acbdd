"""Candidate lists from the user's full-text indexes, each ranked by FTS5's BM25.

The indexes live in the user's own file, so BM25's statistics (IDF, average length) are the
user's own: no other user's corpus can move a score.
"""

from __future__ import annotations

import sqlite3

# Column weights for bm25(): a word match and a two-character n-gram match count alike, so a
# query mixing scripts is not biased towards either column.
WORDS_WEIGHT = 1.0
GRAMS_WEIGHT = 1.0
# The FTS5 tables a candidate list can come from (fixed names: never built from input).
INDEXES = ("message_index",)


def ranked(conn: sqlite3.Connection, index: str, expression: str | None, limit: int,
           session_id: str | None = None) -> list[tuple[int, float]]:
    """The best `limit` rows of one index as (rowid, score), best first; score is the negated
    bm25() so higher is better; ties broken by rowid."""
    if expression is None or limit <= 0:
        return []
    assert index in INDEXES
    sql = (f"SELECT rowid, bm25({index}, ?, ?) AS rank_score FROM {index} "
           f"WHERE {index} MATCH ?")
    params: list[object] = [WORDS_WEIGHT, GRAMS_WEIGHT, expression]
    if session_id is not None:
        sql += " AND rowid IN (SELECT id FROM messages WHERE session_id = ?)"
        params.append(session_id)
    sql += " ORDER BY rank_score, rowid LIMIT ?"
    params.append(limit)
    return [(rowid, -score) for rowid, score in conn.execute(sql, params)]
