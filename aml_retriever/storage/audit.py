"""The append-only audit log of every change to a user's memory, and the record of deletions.

Each user's file logs its own changes (the `audit` table): Add, remember, update, forget,
confirm, reject, import, each with its time, the transport that made it (actor: http, cli, mcp),
the message ids concerned, an Add's request id and a keyed hash of the content. The hash is an
HMAC with a secret kept in the same file: it tells two events about the same text apart from two
about different texts, but confirms nothing to someone without the file, and nothing to anyone
once deleting the user has replaced the secret. Triggers make the table refuse UPDATE and DELETE.

Deleting a user empties its file, audit log included (the one statement that may: it lifts the
guard inside its own transaction), and the catalog's `deletions` table records that a deletion
happened: when, and through which transport. Nothing there names the user, hashes its id or
counts what it held, so the record neither identifies anyone nor recovers anything.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import sqlite3
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from aml_retriever.analysis.dates import iso_utc
from aml_retriever.storage.migrations import AUDIT_DELETE_GUARD

log = logging.getLogger("aml_retriever.audit")
ACTORS = ("http", "cli", "mcp")
# A page of the log: as many events as a caller asks, at most this many.
MAX_PAGE = 1000
_COLUMNS = "seq, at_ms, action, actor, message_ids, request_id, content_hash"


def secret(conn: sqlite3.Connection) -> bytes:
    """This file's key for its keyed hashes (made with the file, replaced when it is emptied)."""
    return bytes.fromhex(conn.execute("SELECT value FROM meta WHERE key = 'secret'").fetchone()[0])


def keyed_hash(key: bytes, texts: Iterable[str]) -> str:
    """A keyed hash of one or more texts (an Add's contents, in order)."""
    digest = hmac.new(key, "\0".join(texts).encode("utf-8", "surrogatepass"), hashlib.sha256)
    return digest.hexdigest()[:32]


def record(conn: sqlite3.Connection, action: str, actor: str, message_ids: Sequence[int],
           request_id: str | None = None, contents: Sequence[str] = ()) -> None:
    """Append one event, inside the caller's write transaction (it commits with the change)."""
    content_hash = keyed_hash(secret(conn), contents) if contents else None
    conn.execute(f"INSERT INTO audit ({_COLUMNS.removeprefix('seq, ')}) VALUES (?, ?, ?, ?, ?, ?)",
                 (int(time.time() * 1000), action, actor, json.dumps(list(message_ids)),
                  request_id, content_hash))


def page(conn: sqlite3.Connection, after: int, limit: int,
         newest: bool = False) -> tuple[list[dict[str, Any]], int | None]:
    """Events after sequence number `after`, oldest first (newest first with `newest`: those
    before it, 0 meaning from the end), and the cursor of the next page (None when this one
    reaches the end)."""
    if newest:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM audit WHERE ? = 0 OR seq < ? "
                            "ORDER BY seq DESC LIMIT ?", (after, after, limit + 1)).fetchall()
    else:
        rows = conn.execute(f"SELECT {_COLUMNS} FROM audit WHERE seq > ? ORDER BY seq LIMIT ?",
                            (after, limit + 1)).fetchall()
    events = [_event(row) for row in rows[:limit]]
    return events, (events[-1]["seq"] if len(rows) > limit else None)


def of_messages(conn: sqlite3.Connection, message_ids: Iterable[int]) -> list[dict[str, Any]]:
    """Every event that concerns one of these messages, oldest first."""
    wanted = json.dumps(sorted(set(message_ids)))
    rows = conn.execute(f"SELECT {_COLUMNS} FROM audit WHERE EXISTS (SELECT 1 FROM "
                        "json_each(audit.message_ids) AS m WHERE m.value IN (SELECT value FROM "
                        "json_each(?))) ORDER BY seq", (wanted,)).fetchall()
    return [_event(row) for row in rows]


def erase(conn: sqlite3.Connection) -> None:
    """Empty the log and replace the file's secret, inside a user's deletion transaction: the
    guard is dropped and made again within it, so no other writer ever sees the log unguarded."""
    conn.execute("DROP TRIGGER audit_refuses_deletes")
    conn.execute("DELETE FROM audit")
    conn.execute("DELETE FROM sqlite_sequence WHERE name = 'audit'")
    conn.execute(AUDIT_DELETE_GUARD)
    conn.execute("UPDATE meta SET value = lower(hex(randomblob(32))) WHERE key = 'secret'")


def record_deletion(catalog: Path, actor: str) -> None:
    """Note in the catalog that a user was deleted: the time and the transport, nothing more.
    The deletion itself is done: a catalog that cannot take the note (a full disk) is logged,
    never a reason to answer that the user was not deleted."""
    try:
        conn = sqlite3.connect(catalog, isolation_level=None, timeout=15)
        try:
            conn.execute("INSERT INTO deletions (at_ms, actor) VALUES (?, ?)",
                         (int(time.time() * 1000), actor))
        finally:
            conn.close()
    except sqlite3.Error as exc:
        log.warning("a user was deleted, but the catalog could not record it: %s", exc)


def _event(row: tuple[Any, ...]) -> dict[str, Any]:
    seq, at_ms, action, actor, message_ids, request_id, content_hash = row
    event: dict[str, Any] = {"seq": seq, "at": iso_utc(at_ms), "action": action, "actor": actor,
                             "message_ids": [f"m{m}" for m in json.loads(message_ids)]}
    if request_id is not None:
        event["request_id"] = request_id
    if content_hash is not None:
        event["content_hash"] = content_hash
    return event
