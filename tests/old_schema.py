"""User files as earlier schema versions wrote them, for the upgrade tests: the tables their
migrations made and the rows their Add wrote, so an upgrade is tested on what a store in use holds."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

from reliability_support import user_file

from aml_retriever.analysis.features import Features, extract
from aml_retriever.analysis.tokenizer import index_text
from aml_retriever.storage.migrations import SHARD_FORMAT, SHARD_MIGRATIONS
from aml_retriever.storage.store import Store

# An Add as the tests write it: (request id, session id, [(role, content, timestamp ms)]).
OldAdd = tuple[str, str, list[tuple[str, str, int]]]
# Schema 4 read windows from the conversation order; before it, each was a row.
LAST_WITH_WINDOW_ROWS = 3


def features_json(features: Features) -> str:
    """Features as schemas 1 to 13 stored them with each message: a JSON array in field order,
    `[speaker, entities, numbers, dates, update]`, without the trailing fields at their defaults."""
    fields = [features.speaker, list(features.entities), list(features.numbers),
              list(features.dates), int(features.update)]
    while fields and not fields[-1]:
        fields.pop()
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))


def _restore_features(conn: sqlite3.Connection) -> None:
    """Undo migration 14: each message's features stored again, as schema 13 held them."""
    conn.execute("ALTER TABLE messages ADD COLUMN features TEXT NOT NULL DEFAULT ''")
    for message_id, role, content, timestamp in conn.execute(
            "SELECT id, role, content, timestamp_ms FROM messages").fetchall():
        conn.execute("UPDATE messages SET features = ? WHERE id = ?",
                     (features_json(extract(role, content, timestamp)), message_id))


# What each shard migration from 5 on added, undone: a current user file taken back to the
# schema before it, its rows kept (`take_back`). A new migration adds its line here.
_UNDO: dict[int, str | Callable[[sqlite3.Connection], None]] = {
    14: _restore_features,
    13: "SELECT 1;",  # dropped notes and speakers' evidence only
    12: """DROP INDEX messages_by_session; ALTER TABLE messages DROP COLUMN said;
           CREATE INDEX messages_by_session ON messages (session_id, timestamp_ms, id, role,
                                                         tokens, marks, told, retired_ms, trust);""",
    11: "SELECT 1;",  # rewrote keys only
    10: """DROP INDEX sessions_by_time; DROP INDEX messages_by_session;
           CREATE INDEX messages_by_session ON messages (session_id, timestamp_ms, id);""",
    9: """DROP TABLE speaker_mentions; DROP TABLE speaker_names; DROP TABLE roles;
          ALTER TABLE messages DROP COLUMN told;""",
    8: "DROP INDEX messages_links;",
    7: "ALTER TABLE messages DROP COLUMN marks; ALTER TABLE messages DROP COLUMN signal_keys;",
    6: "ALTER TABLE messages DROP COLUMN tokens;",
    5: """DROP TABLE audit; DROP TABLE tombstones; DROP INDEX messages_by_fingerprint;
          DROP INDEX messages_withheld; DELETE FROM meta WHERE key = 'secret';
          ALTER TABLE messages DROP COLUMN recorded_ms; ALTER TABLE messages DROP COLUMN valid_ms;
          ALTER TABLE messages DROP COLUMN retired_ms;
          ALTER TABLE messages DROP COLUMN superseded_by; ALTER TABLE messages DROP COLUMN origin;
          ALTER TABLE messages DROP COLUMN trust; ALTER TABLE messages DROP COLUMN fingerprint;""",
}


def take_back(path: Path, version: int) -> None:
    """A current user file as schema `version` (4 or later) left it: what every later migration
    added is dropped, and the file says it is at `version`, so opening it upgrades it again."""
    assert len(SHARD_MIGRATIONS) == max(_UNDO), "a new migration needs its line in _UNDO"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for done in range(len(SHARD_MIGRATIONS), version, -1):
            undo = _UNDO[done]
            if isinstance(undo, str):
                conn.executescript(undo)
            else:
                undo(conn)
        conn.execute(f"PRAGMA user_version = {version}")
    finally:
        conn.close()


def write_old_user(db: Path, user_id: str, version: int, adds: list[OldAdd]) -> None:
    """A store whose one user file is at schema `version` (1 to 3), holding `adds` as that
    version's Add stored them: every message with its request id and place, a window of three
    ending at each message (with its member links), one segment per session."""
    assert 1 <= version <= LAST_WITH_WINDOW_ROWS
    Store(db).close()  # the catalog, unchanged since
    path = user_file(db, user_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    for script in SHARD_MIGRATIONS[:version]:
        conn.executescript(script)
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)",
                     [("format", SHARD_FORMAT), ("created_by", "0.1.0")])
    for request_id, session_id, messages in adds:
        ids = [_add_message(conn, request_id, session_id, position, message)
               for position, message in enumerate(messages)]
        conn.execute("INSERT INTO requests VALUES (?, 'hash', ?, ?, 0, 0)",
                     (request_id, session_id, len(ids)))
        conn.execute("INSERT INTO sessions VALUES (?, ?, 0, 0, ?, NULL) ON CONFLICT (session_id) "
                     "DO UPDATE SET message_count = message_count + excluded.message_count, "
                     "last_message_id = excluded.last_message_id", (session_id, len(ids), ids[-1]))
    for (session_id,) in conn.execute("SELECT session_id FROM sessions").fetchall():
        members = [i for (i,) in conn.execute("SELECT id FROM messages WHERE session_id = ? "
                                              "ORDER BY timestamp_ms, id", (session_id,))]
        segment = conn.execute("INSERT INTO views (kind, session_id, message_ids, start_ms, end_ms) "
                               "VALUES ('segment', ?, ?, 0, 0)",
                               (session_id, json.dumps(members))).lastrowid
        conn.execute("UPDATE messages SET segment_id = ? WHERE session_id = ?", (segment, session_id))
        conn.execute("UPDATE sessions SET open_segment_id = ? WHERE session_id = ?",
                     (segment, session_id))
    conn.execute(f"PRAGMA user_version = {version}")
    conn.execute("COMMIT")
    conn.close()


def _add_message(conn: sqlite3.Connection, request_id: str, session_id: str, position: int,
                 message: tuple[str, str, int]) -> int:
    role, content, timestamp = message
    features = extract(role, content, timestamp)
    message_id = conn.execute(
        "INSERT INTO messages (session_id, role, content, timestamp_ms, timestamp_assigned, "
        "request_id, position, features) VALUES (?, ?, ?, ?, 0, ?, ?, ?)",
        (session_id, role, content, timestamp, request_id, position, features_json(features))).lastrowid
    assert message_id is not None
    if features.speaker:
        conn.execute("INSERT OR IGNORE INTO speakers VALUES (?)", (features.speaker,))
    terms = index_text(content)
    conn.execute("INSERT INTO message_index (rowid, words, grams) VALUES (?, ?, ?)",
                 (message_id, terms.words, terms.grams))
    order = [i for (i,) in conn.execute("SELECT id FROM messages WHERE session_id = ? "
                                        "ORDER BY timestamp_ms, id", (session_id,))]
    at = order.index(message_id)
    window = order[max(0, at - 2):at + 1]
    if len(window) > 1:
        view = conn.execute("INSERT INTO views (kind, session_id, message_ids, start_ms, end_ms) "
                            "VALUES ('window', ?, ?, 0, 0)", (session_id, json.dumps(window))).lastrowid
        conn.executemany("INSERT INTO window_members VALUES (?, ?)", [(m, view) for m in window])
    return message_id
