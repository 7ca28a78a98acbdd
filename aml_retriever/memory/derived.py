"""The rows derived from stored messages: a message's full-text row and speaker, and the links,
segments and speakers of its session. An Add writes them with its messages (writes.py); a
reindex (upkeep.py) and a removal (removal.py) derive them again.

What a session's messages derive depends only on the session's conversation order, never on
the order its Adds arrived in: an Add that lands before a stored message of its session has the
session's links, segments and speakers derived again in that order, as a reindex would."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence

from aml_retriever.analysis.features import Features, speaker_of
from aml_retriever.analysis.speakers import Mention, mentions
from aml_retriever.analysis.tokenizer import index_text
from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.engine.candidates import INDEXES
from aml_retriever.storage.speakers import LOOK_BACK, SpeakerRecorder, addressees, retract_mentions
from aml_retriever.storage.views import ViewBuilder

# A session's conversation order: by time, then by its Add's place among the session's Adds
# (analysis/sequence.py), then by id (an Add's messages take consecutive ids in their order in
# the Add).
SESSION_ORDER = "ORDER BY timestamp_ms, said, id"


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
            f"SELECT id, timestamp_ms FROM messages INDEXED BY messages_by_session "
            f"WHERE session_id = ? {SESSION_ORDER}", (session_id,)).fetchall())
    for session_id, segment_id in views.finish().items():
        conn.execute("UPDATE sessions SET open_segment_id = ? WHERE session_id = ?",
                     (segment_id, session_id))


def record_speakers(conn: sqlite3.Connection, recorder: SpeakerRecorder, session_id: str,
                    fresh: Mapping[int, Sequence[Mention]], stored_before: int, moved: bool) -> None:
    """Record the names a session's new messages (`fresh`: their mentions) give its speakers,
    each addressed name to the role `addressees` finds in the session's conversation order. When
    that order moved (`moved`: an Add landed before a stored message) or the session's opener
    may be answered only now (it held at most LOOK_BACK messages before: `stored_before`), every
    mention of the session is derived again, so the result is the same whatever order its Adds
    arrived in."""
    order = conn.execute(f"SELECT id, role FROM messages INDEXED BY messages_by_session "
                         f"WHERE session_id = ? {SESSION_ORDER}", (session_id,)).fetchall()
    whole = moved or stored_before <= LOOK_BACK
    said = dict(fresh)
    if whole:
        stored = [message_id for message_id, _ in order if message_id not in fresh]
        retract_mentions(conn, stored)
        said.update(_mentions_of(conn, stored))
    for (message_id, role), addressee in zip(order, addressees([r for _, r in order]), strict=True):
        if message_id in said:
            recorder.mention(message_id, role, said[message_id], addressee)


def _mentions_of(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, tuple[Mention, ...]]:
    """Stored messages' mentions, read from their text again (the names a text gives are not
    kept where no side was found for them)."""
    found = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        for message_id, role, content in conn.execute(
                f"SELECT id, role, content FROM messages WHERE id IN ({','.join('?' * len(chunk))})",
                chunk):
            found[message_id] = mentions(speaker_of(role, content)[1])
    return found
