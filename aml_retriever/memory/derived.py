"""The rows derived from stored messages: a message's full-text row and speaker, and the links and
segments of its session. An Add writes them with its messages (writes.py); a reindex (upkeep.py)
and a removal (removal.py) derive them again."""

from __future__ import annotations

import json
import sqlite3

from aml_retriever.analysis.features import Features
from aml_retriever.analysis.tokenizer import index_text
from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.engine.candidates import INDEXES
from aml_retriever.storage.views import ViewBuilder


def index_message(conn: sqlite3.Connection, message_id: int, content: str,
                  features: Features) -> None:
    """The rows a Search finds a stored message by: its full-text row, and its speaker."""
    if features.speaker:
        conn.execute("INSERT OR IGNORE INTO speakers (speaker) VALUES (?)", (features.speaker,))
    terms = index_text(content)
    conn.execute("INSERT INTO message_index (rowid, words, grams) VALUES (?, ?, ?)",
                 (message_id, terms.words, terms.grams))


def empty_indexes(conn: sqlite3.Connection) -> None:
    """Delete every row of every full-text index."""
    for index in INDEXES:
        conn.execute(f"INSERT INTO {index} ({index}) VALUES ('delete-all')")


def rebuild_views(conn: sqlite3.Connection, config: RetrievalConfig, sessions: list[str]) -> None:
    """Link the messages of these sessions in conversation order and derive their segments
    again (for `forget`, the sessions it touched; for `reindex`, all of them)."""
    # One statement for any number of sessions: views has no index by session, so a
    # statement per session would read the whole table once per session.
    chosen = "SELECT value FROM json_each(?)"
    listed = (json.dumps(sessions),)
    conn.execute(f"DELETE FROM views WHERE session_id IN ({chosen})", listed)
    conn.execute(f"UPDATE sessions SET open_segment_id = NULL WHERE session_id IN ({chosen})",
                 listed)
    views = ViewBuilder(conn, config)
    for session_id in sessions:
        views.rebuild(session_id, conn.execute(
            "SELECT id, timestamp_ms FROM messages WHERE session_id = ? "
            "ORDER BY timestamp_ms, id", (session_id,)).fetchall())
    for session_id, segment_id in views.finish().items():
        conn.execute("UPDATE sessions SET open_segment_id = ? WHERE session_id = ?",
                     (segment_id, session_id))
