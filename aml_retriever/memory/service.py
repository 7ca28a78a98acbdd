"""The memory service: Add, Search, delete and stats over a Store. Transports call this."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aml_retriever import __version__
from aml_retriever.analysis.dates import iso_utc
from aml_retriever.analysis.features import Features, extract
from aml_retriever.analysis.tokenizer import index_text
from aml_retriever.common.errors import IdempotencyConflict, StorageFull, UserStoreDamaged
from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.engine.candidates import INDEXES
from aml_retriever.engine.query import plan
from aml_retriever.engine.retrieval import Result, Retrieval
from aml_retriever.memory.validation import AddRequest, SearchRequest
from aml_retriever.storage import audit, resources
from aml_retriever.storage.store import Store
from aml_retriever.storage.timeline import CURRENT, ReadFilter, withheld_changed
from aml_retriever.storage.views import WINDOW_SEPARATOR, ViewBuilder

# The columns a single message is read with (`_messages`), in the order `_row` takes them.
MESSAGE_COLUMNS = ("id, content, timestamp_ms, role, session_id, origin, trust, recorded_ms, "
                    "coalesce(valid_ms, timestamp_ms), retired_ms, superseded_by")


@dataclass(frozen=True)
class Stamp:
    """What the lifecycle records of a stored message beyond what the Add sent (lifecycle.py):
    an HTTP Add's messages are a person's, confirmed, with no text hash, true from their time."""

    origin: str = "user"
    trust: str = "confirmed"
    fingerprint: bytes | None = None
    valid_ms: int | None = None


class MemoryService:
    def __init__(self, store: Store, provenance: bool = True,
                 retrieval: RetrievalConfig | None = None,
                 default_max_words: int | None = None) -> None:
        self.store = store
        self.provenance = provenance
        self.retrieval = retrieval or RetrievalConfig()
        self.default_max_words = default_max_words  # the budget of a Search that names none

    @classmethod
    def open(cls, path: str, retrieval: RetrievalConfig | None = None, provenance: bool = True,
             synchronous: str = "FULL") -> MemoryService:
        """A service over the store at `path` (created if absent): the in-process entry point."""
        retrieval = retrieval or RetrievalConfig()
        return cls(Store(path, synchronous, retrieval), provenance, retrieval)

    def close(self) -> None:
        self.store.close()

    # ---- Add -----------------------------------------------------------------------------

    def add(self, request: AddRequest, actor: str = "http") -> dict[str, Any]:
        """Store an Add atomically; answer only once it is committed and searchable."""
        payload_hash = request.payload_hash()
        received_ms = int(time.time() * 1000)
        with self.store.connection(request.user_id, create=True) as conn:
            assert conn is not None
            with self.store.write(conn):
                # Checked inside the write transaction: concurrent retries serialise on it and
                # exactly one of them writes.
                prior = conn.execute("SELECT payload_hash, stored, timestamps_assigned FROM "
                                     "requests WHERE request_id = ?",
                                     (request.request_id,)).fetchone()
                if prior is not None:
                    if prior[0] != payload_hash:
                        raise IdempotencyConflict("request_id was already used for a different "
                                                  "payload by this user", "request_id")
                    return self._added(request, prior[1], prior[2], replayed=True)
                assigned, first_id = self.store_request(conn, request, payload_hash, received_ms)
                audit.record(conn, "add", actor, range(first_id, first_id + len(request.messages)),
                             request.request_id, [m.content for m in request.messages])
        return self._added(request, len(request.messages), assigned, replayed=False)

    def store_request(self, conn: sqlite3.Connection, request: AddRequest, payload_hash: str,
                      received_ms: int, stamp: Stamp = Stamp()) -> tuple[int, int]:
        """Insert an Add's messages and its request record inside the caller's write
        transaction. Returns how many messages got the receive time, and the first id."""
        assigned, first_id = self._insert_messages(conn, request, received_ms, stamp)
        # The file names its user, for the listing of users (listing.py): the file's name is a
        # hash of the id, which cannot be read back. Deleting the user removes it again.
        conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('user_id', ?)",
                     (request.user_id,))
        conn.execute("INSERT INTO requests (request_id, payload_hash, session_id, stored, "
                     "timestamps_assigned, created_ms, first_message_id) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (request.request_id, payload_hash, request.session_id,
                      len(request.messages), assigned, received_ms, first_id))
        return assigned, first_id

    def _insert_messages(self, conn: sqlite3.Connection, request: AddRequest,
                         received_ms: int, stamp: Stamp) -> tuple[int, int]:
        """Insert the messages with their features, links, segments and index rows, and move the
        session cursor. Returns how many messages got the receive time, and the first id (the
        messages take consecutive ids: the write lock is held)."""
        assigned = 0
        views = ViewBuilder(conn, self.retrieval)
        ids, times = [], []
        for message in request.messages:
            timestamp = received_ms if message.timestamp_ms is None else message.timestamp_ms
            assigned += message.timestamp_ms is None
            features = extract(message.role, message.content, timestamp)
            place = views.place(request.session_id, timestamp)
            message_id = conn.execute(
                "INSERT INTO messages (session_id, role, content, timestamp_ms, timestamp_assigned, "
                "segment_id, features, prev_id, next_id, recorded_ms, valid_ms, origin, trust, "
                "fingerprint) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (request.session_id, message.role, message.content, timestamp,
                 int(message.timestamp_ms is None), place.segment_id, features.to_json(),
                 place.prev_id, place.next_id, received_ms, stamp.valid_ms, stamp.origin,
                 stamp.trust, stamp.fingerprint)).lastrowid or 0
            views.placed(message_id, place)
            self._index_message(conn, message_id, message.content, features)
            ids.append(message_id)
            times.append(timestamp)
        open_segment = views.finish()[request.session_id]
        conn.execute(
            "INSERT INTO sessions (session_id, message_count, first_ms, last_ms, last_message_id, "
            "open_segment_id) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
            "message_count = message_count + excluded.message_count, "
            "first_ms = min(first_ms, excluded.first_ms), last_ms = max(last_ms, excluded.last_ms), "
            "last_message_id = excluded.last_message_id, open_segment_id = excluded.open_segment_id",
            (request.session_id, len(request.messages), min(times), max(times), ids[-1],
             open_segment))
        return assigned, ids[0]

    @staticmethod
    def _index_message(conn: sqlite3.Connection, message_id: int, content: str,
                       features: Features) -> None:
        """The rows a Search finds a stored message by: its full-text row, and its speaker."""
        if features.speaker:
            conn.execute("INSERT OR IGNORE INTO speakers (speaker) VALUES (?)", (features.speaker,))
        terms = index_text(content)
        conn.execute("INSERT INTO message_index (rowid, words, grams) VALUES (?, ?, ?)",
                     (message_id, terms.words, terms.grams))

    @staticmethod
    def _added(request: AddRequest, stored: int, assigned: int, replayed: bool) -> dict[str, Any]:
        return {"success": True, "request_id": request.request_id, "user_id": request.user_id,
                "session_id": request.session_id, "stored": stored, "replayed": replayed,
                "timestamps_assigned": assigned}

    # ---- Search --------------------------------------------------------------------------

    def search(self, request: SearchRequest, statements: bool = False) -> dict[str, Any]:
        """The user's best original evidence for the query, best first, each piece once; with
        `statements`, each result also carries the lifecycle fields of a statement (`origin`,
        `trust`, `valid_from`, `superseded_by`), as the agents' memory answers them."""
        max_words = request.max_words or self.default_max_words
        with self.store.connection(request.user_id, create=False) as conn:
            if conn is None:
                return {"data": [], "words": 0} if max_words else {"data": []}
            query_plan = plan(request.query, request.options)
            with self.store.read(conn):
                retrieval = Retrieval(conn, self.retrieval, request.read, request.explain)
                results = retrieval.run(query_plan, request.top_k, request.session_id, max_words)
        found: dict[str, Any] = {"data": [self._result(r, retrieval.rows, statements)
                                          for r in results]}
        if max_words:
            found["words"] = retrieval.words_returned
        return found

    def _result(self, result: Result, rows: dict[int, Any], statement: bool) -> dict[str, Any]:
        members = [rows[m] for m in result.candidate.members]
        first = members[0]
        view = result.candidate.view
        item: dict[str, Any] = {
            "id": f"m{first.id}" if view == "message" else
                  f"w{result.candidate.view_id}-" + "-".join(str(m.id) for m in members),
            "content": WINDOW_SEPARATOR.join(m.content for m in members),
            "score": result.score,
            "created_at": iso_utc(first.timestamp_ms),
            "role": first.role if view == "message" else
                    ",".join(dict.fromkeys(m.role for m in members)),
            "session_id": first.session_id,
        }
        if self.provenance:
            item.update(view=view, source_message_ids=[f"m{m.id}" for m in members],
                        evidence_flags=list(result.flags))
        if result.parts is not None:
            item["explain"] = {"signals": [{"signal": p.signal, "rank": p.rank, "weight": p.weight,
                                            "share": p.share} for p in result.parts]}
        if statement:
            item.update(origin=first.origin, trust=first.trust,
                        valid_from=iso_utc(first.valid_ms or first.timestamp_ms),
                        superseded_by=None if first.superseded_by is None
                        else f"m{first.superseded_by}")
            return item
        # Only a read of the past or of proposals meets these, so a default answer is unchanged.
        if view == "message" and first.superseded_by is not None:
            item["superseded_by"] = f"m{first.superseded_by}"
        if any(m.trust != "confirmed" for m in members):
            item["trust"] = "proposed"
        return item

    # ---- lifecycle -----------------------------------------------------------------------

    def delete_user(self, user_id: str, actor: str = "http") -> dict[str, Any]:
        """Remove everything of one user in one transaction (its audit log and the key of its
        hashes too), then truncate the WAL so the deleted text does not linger there either.
        A file that cannot be written (a full disk) or read (damaged) is unlinked instead, which
        needs neither: a user can always be forgotten. The catalog notes that a deletion
        happened, with nothing that names the user."""
        removed = {"messages": 0, "requests": 0, "sessions": 0, "views": 0}
        answer: dict[str, Any] = {"success": True, "user_id": user_id, "deleted": removed}
        try:
            existed = self._delete_rows(user_id, removed)
        except (StorageFull, UserStoreDamaged):
            # What the file held cannot be counted; its files are gone all the same.
            answer["files_removed"] = self.store.remove_user_files(user_id)
            existed = True
        if existed:
            audit.record_deletion(self.store.path, actor)
        return answer

    def _delete_rows(self, user_id: str, removed: dict[str, int]) -> bool:
        with self.store.connection(user_id, create=False) as conn:
            if conn is None:
                return False
            with self.store.write(conn):
                removed.update(erase_user_rows(conn))
            self.store.checkpoint(conn)
        return True

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> dict[str, int]:
        """Rebuild every derived row (features, index rows, links, segments) of every user from
        the original messages, one transaction per user, for the current settings."""
        users = messages = 0
        paths = self.store.shard_paths()
        for done, path in enumerate(paths, 1):
            with self.store.connection_at(path) as conn:
                if conn is not None:
                    with self.store.write(conn):
                        messages += self._rebuild(conn)
                        self.store.record_index_identity(conn)
                    users += 1
            if progress:
                progress(done, len(paths))
        self.store.record_index_identity()
        return {"users": users, "messages": messages}

    def _rebuild(self, conn: sqlite3.Connection) -> int:
        conn.execute("DELETE FROM speakers")
        for index in INDEXES:
            conn.execute(f"INSERT INTO {index} ({index}) VALUES ('delete-all')")
        rows = conn.execute("SELECT id, role, content, timestamp_ms FROM messages").fetchall()
        for message_id, role, content, timestamp in rows:
            features = extract(role, content, timestamp)
            conn.execute("UPDATE messages SET features = ? WHERE id = ?",
                         (features.to_json(), message_id))
            self._index_message(conn, message_id, content, features)
        self._rebuild_views(conn, [session for (session,) in conn.execute(
            "SELECT DISTINCT session_id FROM messages ORDER BY session_id")])
        return len(rows)

    # ---- single messages -----------------------------------------------------------------

    def messages(self, user_id: str, ids: Sequence[int]) -> list[dict[str, Any]]:
        """The user's messages with these ids (those that exist), in id order."""
        marks = ",".join("?" * len(ids))
        return self._messages(user_id, f"id IN ({marks}) ORDER BY id", list(ids))

    def messages_of_request(self, user_id: str, request_id: str) -> list[dict[str, Any]]:
        """The messages one Add stored (and still holds), in the order it sent them."""
        return self._messages(user_id, "id BETWEEN (SELECT first_message_id FROM requests WHERE "
                                       "request_id = ?1) AND (SELECT first_message_id + stored - 1 "
                                       "FROM requests WHERE request_id = ?1) ORDER BY id",
                              [request_id])

    def messages_with_content(self, user_id: str, content: str) -> list[dict[str, Any]]:
        """The user's messages whose content is exactly `content`, oldest first."""
        return self._messages(user_id, "content = ? ORDER BY id", [content])

    def proposed(self, user_id: str, limit: int) -> list[dict[str, Any]]:
        """Current statements awaiting a person's review, oldest first."""
        return self._messages(user_id, "trust = 'proposed' AND retired_ms IS NULL ORDER BY id "
                                       "LIMIT ?", [limit])

    def recent(self, user_id: str, limit: int, visible: ReadFilter = CURRENT,
               before: tuple[int, int] | None = None) -> list[dict[str, Any]]:
        """The user's `limit` newest messages that `visible` admits, by time (then arrival),
        newest first; with `before` (a time and an id), only those after it in that order."""
        where, params = visible.clause()
        if before is not None:
            where += " AND (timestamp_ms, id) < (?, ?)"
            params += list(before)
        return self._messages(user_id, f"{where} ORDER BY timestamp_ms DESC, id DESC LIMIT ?",
                              [*params, limit])

    def _messages(self, user_id: str, where: str, params: list[Any]) -> list[dict[str, Any]]:
        """Messages as results without a score; `where` is built from fixed clauses only, never
        from input (values are parameters)."""
        with self.store.connection(user_id, create=False) as conn:
            if conn is None:
                return []
            with self.store.read(conn):
                rows = conn.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE {where}",
                                    params).fetchall()
        return [message_row(row) for row in rows]

    def forget(self, user_id: str, message_ids: Sequence[int], reason: str,
               actor: str = "http") -> dict[str, Any]:
        """Remove single messages and everything derived from them in one transaction, and record
        each removal (id, time, reason; never content). Ids that do not exist are skipped.

        The index rows are deleted with the terms they were built from, recomputed from the
        content (a contentless FTS5 table can only delete what it is told it holds), and the
        index is then merged so the removed terms leave its pages too; the conversation links and
        segments of the sessions concerned are derived again from their remaining messages."""
        removed: list[int] = []
        with self.store.connection(user_id, create=False) as conn:
            if conn is not None:
                with self.store.write(conn):
                    removed = self._remove_messages(conn, message_ids, reason, actor)
                self.store.checkpoint(conn)  # so the removed text leaves the write-ahead log
        return {"success": True, "user_id": user_id, "forgotten": [f"m{m}" for m in removed]}

    def _remove_messages(self, conn: sqlite3.Connection, message_ids: Sequence[int],
                         reason: str, actor: str) -> list[int]:
        """Remove the messages, leave a tombstone for each statement among them (a text hash,
        never the text), make current again what they had replaced, and log the removal."""
        marks = ",".join("?" * len(message_ids))
        rows = conn.execute(f"SELECT id, session_id, content, features, fingerprint, "
                            f"superseded_by FROM messages WHERE id IN ({marks}) ORDER BY id",
                            list(message_ids)).fetchall()
        if not rows:
            return []
        removed_ms = int(time.time() * 1000)
        for message_id, _, content, _, fingerprint, successor in rows:
            terms = index_text(content)
            conn.execute("INSERT INTO message_index (message_index, rowid, words, grams) "
                         "VALUES ('delete', ?, ?, ?)", (message_id, terms.words, terms.grams))
            conn.execute("DELETE FROM messages WHERE id = ?", (message_id,))
            conn.execute("INSERT INTO removals (message_id, removed_ms, reason) VALUES (?, ?, ?)",
                         (message_id, removed_ms, reason))
            if fingerprint is not None:
                conn.execute("INSERT OR REPLACE INTO tombstones (fingerprint, removed_ms, reason) "
                             "VALUES (?, ?, ?)", (fingerprint, removed_ms, reason))
            # What it replaced is replaced by its own successor, or, when it was the current
            # version, holds again (forgetting what is wrong leaves the last right one).
            if successor is None:
                conn.execute("UPDATE messages SET retired_ms = NULL, superseded_by = NULL "
                             "WHERE superseded_by = ?", (message_id,))
            else:
                conn.execute("UPDATE messages SET superseded_by = ? WHERE superseded_by = ?",
                             (successor, message_id))
        withheld_changed(conn)
        audit.record(conn, reason, actor, [row[0] for row in rows], None, [row[2] for row in rows])
        conn.execute("INSERT INTO message_index (message_index) VALUES ('optimize')")
        # A request record whose messages are all gone is dropped, so sending the same statement
        # again stores it again instead of replaying a removed one.
        conn.executemany("DELETE FROM requests WHERE first_message_id <= ?1 AND "
                         "?1 < first_message_id + stored AND NOT EXISTS (SELECT 1 FROM messages "
                         "WHERE id BETWEEN first_message_id AND first_message_id + stored - 1)",
                         [(row[0],) for row in rows])
        self._forget_speakers(conn, {Features.from_json(row[3]).speaker for row in rows} - {""})
        sessions = sorted({row[1] for row in rows})
        self._refresh_sessions(conn, sessions)
        self._rebuild_views(conn, sessions)
        return [row[0] for row in rows]

    @staticmethod
    def _forget_speakers(conn: sqlite3.Connection, speakers: set[str]) -> None:
        """Drop the speakers no remaining message names (a speaker's name is read from content).
        A text search for the name as the features JSON writes it narrows the rows; the parsed
        features decide, so the stored JSON layout does not matter here."""
        for speaker in speakers:
            written = json.dumps(speaker, ensure_ascii=False)[1:-1]
            rows = conn.execute("SELECT features FROM messages WHERE instr(features, ?) > 0",
                                (written,))
            if not any(Features.from_json(features).speaker == speaker for (features,) in rows):
                conn.execute("DELETE FROM speakers WHERE speaker = ?", (speaker,))

    @staticmethod
    def _refresh_sessions(conn: sqlite3.Connection, sessions: list[str]) -> None:
        """Recount each session's cursor from its remaining messages; drop an emptied one."""
        for session_id in sessions:
            count, first_ms, last_ms, last_id = conn.execute(
                "SELECT count(*), min(timestamp_ms), max(timestamp_ms), max(id) FROM messages "
                "WHERE session_id = ?", (session_id,)).fetchone()
            if count == 0:
                conn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
            else:
                conn.execute("UPDATE sessions SET message_count = ?, first_ms = ?, last_ms = ?, "
                             "last_message_id = ? WHERE session_id = ?",
                             (count, first_ms, last_ms, last_id, session_id))

    def _rebuild_views(self, conn: sqlite3.Connection, sessions: list[str]) -> None:
        """Link the messages of these sessions in conversation order and derive their segments
        again (for `forget`, the sessions it touched; for `reindex`, all of them)."""
        # One statement for any number of sessions: views has no index by session, so a
        # statement per session would read the whole table once per session.
        chosen = "SELECT value FROM json_each(?)"
        listed = (json.dumps(sessions),)
        conn.execute(f"DELETE FROM views WHERE session_id IN ({chosen})", listed)
        conn.execute(f"UPDATE sessions SET open_segment_id = NULL WHERE session_id IN ({chosen})",
                     listed)
        views = ViewBuilder(conn, self.retrieval)
        for session_id in sessions:
            views.rebuild(session_id, conn.execute(
                "SELECT id, timestamp_ms FROM messages WHERE session_id = ? "
                "ORDER BY timestamp_ms, id", (session_id,)).fetchall())
        for session_id, segment_id in views.finish().items():
            conn.execute("UPDATE sessions SET open_segment_id = ? WHERE session_id = ?",
                         (segment_id, session_id))

    def audit(self, user_id: str, after: int, limit: int) -> dict[str, Any]:
        """A page of the user's audit log, oldest first (see audit.py); none for an unknown
        user (a read creates no file)."""
        events: list[dict[str, Any]] = []
        next_cursor = None
        with self.store.connection(user_id, create=False) as conn:
            if conn is not None:
                with self.store.read(conn):
                    events, next_cursor = audit.page(conn, after, limit)
        return {"user_id": user_id, "events": events, "next_cursor": next_cursor}

    def stats(self) -> dict[str, Any]:
        """Counts only, never content."""
        totals = {"users": 0, "messages": 0, "sessions": 0, "requests": 0}
        size = self.store.path.stat().st_size
        damaged = 0
        for path in self.store.shard_paths():
            try:
                size += sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
                counts = _counts(path)
            except FileNotFoundError:
                continue  # deleted meanwhile
            except sqlite3.OperationalError:
                if resources.out_of_descriptors():
                    raise resources.overloaded() from None
                continue  # a file being created right now: no committed schema yet
            except sqlite3.DatabaseError:
                damaged += 1  # counted, never a failure of the whole answer
                continue
            totals["users"] += counts[0] > 0
            totals["messages"] += counts[0]
            totals["sessions"] += counts[1]
            totals["requests"] += counts[2]
        return {**totals, "store_bytes": size, "damaged_user_files": damaged,
                "quarantined_user_files": len(self.store.quarantined())}

    @staticmethod
    def health() -> dict[str, Any]:
        return {"status": "ok", "version": __version__}


def message_row(row: tuple[Any, ...]) -> dict[str, Any]:
    """A message read with `MESSAGE_COLUMNS`, as the lifecycle's callers see it."""
    (message_id, content, timestamp, role, session_id, origin, trust, recorded, valid, retired,
     superseded_by) = row
    return {"id": f"m{message_id}", "content": content, "created_at": iso_utc(timestamp),
            "timestamp_ms": timestamp, "role": role, "session_id": session_id, "origin": origin,
            "trust": trust, "recorded_at": iso_utc(recorded), "valid_from": iso_utc(valid),
            "retired_at": iso_utc(retired) if retired is not None else None,
            "superseded_by": f"m{superseded_by}" if superseded_by is not None else None}


def _counts(path: Path) -> tuple[int, int, int]:
    """A user file's message, session and request counts, read only."""
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM "
                            "sessions), (SELECT count(*) FROM requests)").fetchone()
    finally:
        conn.close()


# The tables of a user file that hold anything of the user (the rest is schema and settings).
USER_TABLES = ("messages", "requests", "sessions", "views", "speakers", "removals", "tombstones",
               "audit")
# The ones a deletion reports counts of.
COUNTED_TABLES = ("messages", "requests", "sessions", "views")


def erase_user_rows(conn: sqlite3.Connection) -> dict[str, int]:
    """Remove everything of the user from its file, inside the caller's write transaction: every
    row, the index, the audit log and the key of its hashes (with secure_delete the freed pages
    are zeroed). Returns the counts a deletion reports. Used by a deletion, and by the mover to
    empty the file a user was copied from."""
    removed = {}
    for table in COUNTED_TABLES:
        removed[table] = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        conn.execute(f"DELETE FROM {table}")
    for table in ("speakers", "removals", "tombstones"):
        conn.execute(f"DELETE FROM {table}")
    conn.execute("DELETE FROM meta WHERE key = 'user_id'")  # the file names its user (listing.py)
    for index in INDEXES:
        conn.execute(f"INSERT INTO {index} ({index}) VALUES ('delete-all')")
    audit.erase(conn)
    return removed


def holds_nothing(conn: sqlite3.Connection) -> bool:
    """Whether a user file is empty: never written, or emptied by a deletion or a move."""
    return all(conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is None
               for table in USER_TABLES)
