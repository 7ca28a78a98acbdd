"""What a person reads of a memory: its users, a user's sessions and messages, page by page.

Every list is ordered by a key that no Add changes, and a page hands back an opaque cursor
holding the key of its last item (a keyset, never an offset), so paging while Adds arrive visits
every item that existed when the first page was read exactly once:

- users by when the store first took something of them (their first audit event), then id;
- a user's sessions by their first message (arrival order);
- a user's messages by time, then arrival (the conversation order of `recent`). Newest first,
  the first page also fixes the newest message id it saw, and later pages leave out anything
  stored after it; oldest first, a message stored meanwhile is shown when its place is past the
  cursor (an Add with the current time lands at the end, where the paging arrives).

A user's speakers (the names its conversation gives its roles, storage/speakers.py) are read
whole, with the evidence behind each name and the names left unattached: a handful of rows.

Reads never create a file: a user the store has never seen lists nothing. A cursor names its
listing (kind, order and filters): passed to another, or changed by hand, it is refused.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import sqlite3
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aml_retriever.analysis.dates import iso_utc
from aml_retriever.analysis.speakers import Evidence, Speakers
from aml_retriever.common.errors import InvalidField, NotFound
from aml_retriever.memory import cursors
from aml_retriever.memory.validation import ListQuery, is_text
from aml_retriever.storage import audit, resources
from aml_retriever.storage import speakers as stored
from aml_retriever.storage.migrations import SHARD_MIGRATIONS
from aml_retriever.storage.store import Store

# What each `status` filter keeps: `current` is what a default read sees (timeline.CURRENT),
# `proposed` what awaits a person's review (service.proposed), `all` every stored message.
STATUS_FILTERS = {
    "current": "retired_ms IS NULL AND trust = 'confirmed'",
    "proposed": "retired_ms IS NULL AND trust != 'confirmed'",
    "all": "1",
}
_COLUMNS = "id, content, timestamp_ms, role, session_id, trust, retired_ms"
_INT64 = (-(2**63), 2**63 - 1)
_BAD_CURSOR = "cursor must be a next_cursor this listing gave, passed back unchanged"
META_USER_ID = "user_id"  # the meta key of a user file that names its user (service.store_request)
LISTED_FROM = 5  # the first schema with what a listing reads of a user file (its audit)
# What a reading of the speakers shows: the first messages behind each attached name (enough to
# check the attachment by eye), and the names left unattached, the most mentioned first (why a
# name was not attached; a memory whose turns open with thousands of capitalised words still
# answers in a bounded page).
EVIDENCE_SHOWN = 5
CANDIDATES_SHOWN = 20
# Why a candidate past the names a reading takes (storage/speakers.MOST_NAMES) is attached to none.
NOT_READ = "not read: too many names"
# Each store's user files as last read: {path: (signature, sort key or None)} (Listing._keys).
_KEYS: weakref.WeakKeyDictionary[Store, dict[Path, tuple[tuple[int, ...], tuple[int, str] | None]]] = \
    weakref.WeakKeyDictionary()


class Cursor:
    """An opaque page cursor: a small JSON object naming its listing and the key of the last
    item shown, sealed with the store's cursor key (cursors.py). A listing of one user's is that
    user's as the file now is (`epoch`: its keyed-hash secret, which deleting the user
    replaces): another user's cursor, or one from before a deletion, is refused."""

    def __init__(self, kind: str, query: ListQuery, key: bytes, user_id: str = "",
                 epoch: str = "") -> None:
        listing = json.dumps([kind, query.order, query.status, query.session_id, user_id, epoch])
        self.listing = hashlib.sha256(listing.encode("utf-8")).hexdigest()[:16]
        self.key = key

    def encode(self, position: Sequence[Any]) -> str:
        data = json.dumps({"l": self.listing, "p": list(position)}, ensure_ascii=False,
                          separators=(",", ":")).encode("utf-8")
        return cursors.seal(self.key, data)

    def decode(self, text: str, shape: Sequence[type]) -> list[Any]:
        """The position a cursor holds, checked against the types this listing puts there (an
        int within SQLite's range, a string of valid Unicode, or None where `shape` allows)."""
        data = cursors.unseal(self.key, text)
        if data is None:
            raise InvalidField(_BAD_CURSOR, "cursor")
        try:
            found = json.loads(data, parse_constant=_refuse)
        except (ValueError, RecursionError):
            raise InvalidField(_BAD_CURSOR, "cursor") from None
        position = found.get("p") if isinstance(found, dict) else None
        if (not isinstance(found, dict) or set(found) != {"l", "p"} or found["l"] != self.listing
                or not isinstance(position, list) or len(position) != len(shape)
                or not all(_fits(value, kind) for value, kind in zip(position, shape, strict=True))):
            raise InvalidField(_BAD_CURSOR, "cursor")
        return position


def _refuse(name: str) -> Any:
    raise ValueError(name)


def _epoch(conn: sqlite3.Connection) -> str:
    """What a user's cursors are bound to besides the id: a digest of the file's secret, which
    deleting the user replaces (audit.py)."""
    return hashlib.sha256(audit.secret(conn)).hexdigest()[:16]


def _refuse_for_none(query: ListQuery) -> None:
    """A cursor for a user with no file: it was given for one since deleted."""
    if query.cursor is not None:
        raise InvalidField(_BAD_CURSOR, "cursor")


def _fits(value: Any, kind: type) -> bool:
    if value is None:
        return kind is type(None)
    if kind is int:
        return type(value) is int and _INT64[0] <= value <= _INT64[1]
    return type(value) is str and is_text(value)


class Listing:
    """The listings of one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    # ---- users ---------------------------------------------------------------------------

    def users(self, query: ListQuery) -> dict[str, Any]:
        """Users newest first (or oldest), by when the store first took something of them. Each
        user file's key is read once and kept while the file is unchanged (`_keys`); the page's
        users are read for their counts (read only, outside the pool of warm connections)."""
        cursor = Cursor("users", query, self.store.cursor_key)
        newest = query.order == "newest"
        after = None if query.cursor is None else tuple(cursor.decode(query.cursor, (int, str)))
        read: dict[Path, dict[str, Any]] = {}
        found = sorted(((key, path) for path, key in self._keys(read).items() if after is None
                        or (key < after if newest else key > after)), reverse=newest)
        page = found[:query.limit]
        users = [summary for _, path in page
                 if (summary := read.get(path) or _read_user(path)[1]) is not None]
        return {"users": users,
                "next_cursor": cursor.encode(page[-1][0]) if len(found) > query.limit else None}

    def _keys(self, read: dict[Path, dict[str, Any]]) -> dict[Path, tuple[int, str]]:
        """Every listed user file's sort key. A file is opened only when its signature (size and
        modification time of it and its write-ahead log) changed since it was last read: at 1,000
        users, opening every file took ~1 s a page, a stat of each ~20 ms. A key never changes
        while its user exists; what changes a file's key (deletion, then a new first Add) also
        grows and truncates its log, so the signature moves. What is read here is left in `read`
        for the page."""
        known = _KEYS.setdefault(self.store, {})
        keys, fresh = {}, {}
        for path in self.store.shard_paths():
            signature = _signature(path)
            if signature is None:
                continue
            cached = known.get(path)
            if cached is None or cached[0] != signature:
                key, summary = _read_user(path)
                cached = (signature, key)
                if summary is not None:
                    read[path] = summary
            fresh[path] = cached
            if cached[1] is not None:
                keys[path] = cached[1]
        _KEYS[self.store] = fresh
        return keys

    # ---- sessions ------------------------------------------------------------------------

    def sessions(self, user_id: str, query: ListQuery) -> dict[str, Any]:
        """A user's sessions newest first (or oldest), by when their first message arrived."""
        newest = query.order == "newest"
        rows: list[tuple[Any, ...]] = []
        next_cursor = None
        with self.store.connection(user_id, create=False) as conn:
            if conn is None:
                _refuse_for_none(query)
            else:
                with self.store.read(conn):
                    cursor = Cursor("sessions", query, self.store.cursor_key, user_id, _epoch(conn))
                    where, params = "1", []
                    if query.cursor is not None:
                        where = "f.first_id < ?" if newest else "f.first_id > ?"
                        params = cursor.decode(query.cursor, (int,))
                    rows = conn.execute(
                        "SELECT s.session_id, s.message_count, s.first_ms, s.last_ms, f.first_id "
                        "FROM sessions s JOIN (SELECT session_id, min(id) AS first_id FROM messages "
                        f"GROUP BY session_id) f USING (session_id) WHERE {where} "
                        f"ORDER BY f.first_id {'DESC' if newest else 'ASC'} LIMIT ?",
                        [*params, query.limit + 1]).fetchall()
                if len(rows) > query.limit:
                    next_cursor = cursor.encode([rows[query.limit - 1][4]])
        return {"user_id": user_id,
                "sessions": [{"session_id": s, "messages": n, "first_at": iso_utc(first),
                              "last_at": iso_utc(last)} for s, n, first, last, _ in rows[:query.limit]],
                "next_cursor": next_cursor}

    # ---- messages ------------------------------------------------------------------------

    def messages(self, user_id: str, query: ListQuery) -> dict[str, Any]:
        """A page of a user's messages (see the module's docstring for the order)."""
        newest = query.order == "newest"
        messages: list[dict[str, Any]] = []
        next_cursor = None
        with self.store.connection(user_id, create=False) as conn:
            if conn is None:
                _refuse_for_none(query)
            else:
                with self.store.read(conn):
                    cursor = Cursor("messages", query, self.store.cursor_key, user_id, _epoch(conn))
                    position = (None if query.cursor is None else cursor.decode(
                        query.cursor, (int, int, int if newest else type(None))))
                    newest_id = (position[2] if position else
                                 conn.execute("SELECT max(id) FROM messages").fetchone()[0] or 0)
                    rows = self._page(conn, query, position, newest_id if newest else None)
                    messages = _messages(conn, rows[:query.limit])
                if len(rows) > query.limit:
                    last = rows[query.limit - 1]
                    next_cursor = cursor.encode([last[2], last[0], newest_id if newest else None])
        return {"user_id": user_id, "messages": messages, "next_cursor": next_cursor}

    @staticmethod
    def _page(conn: sqlite3.Connection, query: ListQuery, position: list[Any] | None,
              newest_id: int | None) -> list[tuple[Any, ...]]:
        """One more row than the page holds (whether another page follows), from fixed clauses;
        every value is a parameter."""
        where, params = [STATUS_FILTERS[query.status]], []
        if query.session_id is not None:
            where.append("session_id = ?")
            params.append(query.session_id)
        if newest_id is not None:
            where.append("id <= ?")
            params.append(newest_id)
        if position is not None:
            where.append("(timestamp_ms, id) < (?, ?)" if newest_id is not None
                         else "(timestamp_ms, id) > (?, ?)")
            params += position[:2]
        direction = "DESC" if newest_id is not None else "ASC"
        return conn.execute(f"SELECT {_COLUMNS} FROM messages WHERE {' AND '.join(where)} "
                            f"ORDER BY timestamp_ms {direction}, id {direction} LIMIT ?",
                            [*params, query.limit + 1]).fetchall()

    def message(self, user_id: str, message_id: int) -> dict[str, Any]:
        """One stored message of the user, whatever its status; 404 when there is none."""
        with self.store.connection(user_id, create=False) as conn:
            if conn is not None:
                with self.store.read(conn):
                    rows = conn.execute(f"SELECT {_COLUMNS} FROM messages WHERE id = ?",
                                        (message_id,)).fetchall()
                    if rows:
                        return _messages(conn, rows)[0]
        raise absent(message_id)

    # ---- speakers ------------------------------------------------------------------------

    def speakers(self, user_id: str) -> dict[str, Any]:
        """The names the user's conversation gives its roles (roles and names in the order
        speakers.attach gives them), each role with the name the reader's view shows for it,
        each name with its counts and the first messages that give it; and the names found but
        not attached, with their counts by role and why each was not (too few messages, split
        between roles, a word rather than a name, one of several people...)."""
        attached: list[dict[str, Any]] = []
        candidates: list[dict[str, Any]] = []
        with self.store.connection(user_id, create=False) as conn:
            if conn is not None:
                with self.store.read(conn):
                    found = stored.read(conn)
                    given = _names_given(conn, sorted(found.roles))
                    written = found.written
                    attached = [{"role": role, "shown": found.shown_for(role), "names": [
                        {"name": written[name], **_attached(conn, found, given[name], name)}
                        for name in names]} for role, names in found.names.items()]
                    candidates = [_candidate(name, rows, found.rejected.get(name, NOT_READ))
                                  for name, rows in sorted(
                        ((name, rows) for name, rows in given.items() if name not in found.roles),
                        key=lambda item: (-sum(e.votes for e in item[1]), item[0]))]
        return {"user_id": user_id, "speakers": attached, "candidates": candidates}


def _names_given(conn: sqlite3.Connection, attached: list[str]) -> dict[str, list[Evidence]]:
    """How often each role is given the attached names, and the CANDIDATES_SHOWN most mentioned
    names besides them: by name, each name's roles most mentioned first."""
    marks = ",".join("?" * len(attached))
    given: dict[str, list[Evidence]] = {}
    for row in conn.execute(
            "SELECT name, role, addressed, introduced, written FROM speaker_names "
            f"WHERE name IN ({marks}) OR name IN (SELECT name FROM speaker_names "
            f"WHERE name NOT IN ({marks}) GROUP BY name "
            "ORDER BY sum(addressed + introduced) DESC, name LIMIT ?) "
            "ORDER BY name, addressed + introduced DESC, role",
            [*attached, *attached, CANDIDATES_SHOWN]):
        given.setdefault(row[0], []).append(Evidence(*row))
    return given


def _attached(conn: sqlite3.Connection, found: Speakers, rows: list[Evidence],
              name: str) -> dict[str, Any]:
    """An attached name's counts for its role and the first EVIDENCE_SHOWN messages that give
    it that role. evidence_of reads the name's mentions of every role, oldest first: reading as
    many more as the name's votes for other roles (which count every mention of them, and a
    message gives one name to one role once) leaves EVIDENCE_SHOWN of its own when it has them."""
    kept = found.evidence[name]
    others = sum(e.votes for e in rows if e.role != kept.role)
    ids = [message_id for message_id, role, _ in
           stored.evidence_of(conn, name, EVIDENCE_SHOWN + others) if role == kept.role]
    return {"addressed": kept.addressed, "introduced": kept.introduced,
            "evidence": [f"m{message_id}" for message_id in ids[:EVIDENCE_SHOWN]]}


def _candidate(name: str, rows: list[Evidence], why: str) -> dict[str, Any]:
    """A name attached to no role, as written where it is most given, with its counts by role
    and why it is attached to none (speakers.attach)."""
    return {"name": rows[0].written or name.title(),
            "roles": [{"role": e.role, "addressed": e.addressed, "introduced": e.introduced}
                      for e in rows], "why": why}


def absent(message_id: int) -> NotFound:
    return NotFound(f"this user has no message m{message_id} (it was forgotten, or never "
                    "stored)", "id")


def _messages(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    """Rows read with _COLUMNS as the listing shows them; a field with no value is left out."""
    requests = _request_ids(conn, [row[0] for row in rows])
    shown = []
    for message_id, content, timestamp, role, session_id, trust, retired in rows:
        item = {"id": f"m{message_id}", "content": content, "role": role,
                "session_id": session_id, "created_at": iso_utc(timestamp)}
        if message_id in requests:
            item["request_id"] = requests[message_id]
        item["trust"] = trust
        item["status"] = ("replaced" if retired is not None
                          else "proposed" if trust != "confirmed" else "current")
        shown.append(item)
    return shown


def _request_ids(conn: sqlite3.Connection, ids: list[int]) -> dict[int, str]:
    """The request id of each message: an Add's messages took consecutive ids from its
    `first_message_id` (one pass over the requests that can hold these ids)."""
    if not ids:
        return {}
    spans = sorted(conn.execute("SELECT first_message_id, stored, request_id FROM requests "
                                "WHERE first_message_id <= ? AND first_message_id + stored > ?",
                                (max(ids), min(ids))).fetchall())
    starts = [first for first, _, _ in spans]
    found = {}
    for message_id in ids:
        at = bisect.bisect_right(starts, message_id) - 1
        if at >= 0 and message_id < spans[at][0] + spans[at][1]:
            found[message_id] = spans[at][2]
    return found


def _signature(path: Path) -> tuple[int, ...] | None:
    """What changes whenever a user file is written: its size and time, and its log's."""
    try:
        main = os.stat(path)
    except FileNotFoundError:
        return None
    try:
        log = os.stat(f"{path}-wal")
        logged = (log.st_size, log.st_mtime_ns)
    except FileNotFoundError:
        logged = (-1, -1)
    return (main.st_ino, main.st_size, main.st_mtime_ns, *logged)


def _read_user(path: Path) -> tuple[tuple[int, str] | None, dict[str, Any] | None]:
    """One user file's sort key (first change, file name) and its listing (id, counts, last change),
    read only; (None, None) for a file that names no user (written before users were named, or
    emptied by deletion), is being made, or cannot be read (set aside by the next request that
    touches it)."""
    try:
        conn = sqlite3.connect(resources.read_only_uri(path), uri=True)
    except sqlite3.Error:
        return None, None
    try:
        # A file at an earlier schema (not opened since an upgrade) is listed all the same:
        # what is read here is as migration 5 made it.
        if not LISTED_FROM <= conn.execute("PRAGMA user_version").fetchone()[0] <= len(SHARD_MIGRATIONS):
            return None, None
        row = conn.execute(
            "SELECT (SELECT value FROM meta WHERE key = ?), "
            "(SELECT at_ms FROM audit ORDER BY seq LIMIT 1), "
            "(SELECT at_ms FROM audit ORDER BY seq DESC LIMIT 1), "
            "(SELECT coalesce(sum(message_count), 0) FROM sessions), "
            "(SELECT count(*) FROM sessions)", (META_USER_ID,)).fetchone()
    except sqlite3.OperationalError:
        if resources.out_of_descriptors():
            raise resources.overloaded() from None
        return None, None
    except sqlite3.DatabaseError:
        return None, None
    finally:
        conn.close()
    user_id, first_ms, last_ms, messages, sessions = row
    if user_id is None or first_ms is None:
        return None, None
    # Ties by the file's name (a hash of the id): a cursor as short for any id (one of 256
    # control characters made a cursor of 2,132 characters, past what a listing takes back).
    return (first_ms, path.stem), {"user_id": user_id, "messages": messages, "sessions": sessions,
                                   "last_activity": iso_utc(last_ms)}
