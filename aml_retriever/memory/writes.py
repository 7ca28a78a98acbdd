"""The Add path: an Add's messages stored in one transaction with their features, index rows,
links, segments and the names they give their speakers, beside the record of the request that
makes a retry replay instead of storing twice. The lifecycle (lifecycle.py) and an import
(exchange.py) store through it too."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from aml_retriever.analysis.features import extract
from aml_retriever.analysis.sequence import request_order
from aml_retriever.analysis.speakers import Mention
from aml_retriever.analysis.tokens import pieces
from aml_retriever.common.errors import IdempotencyConflict
from aml_retriever.memory.derived import index_message, rebuild_views, record_speakers
from aml_retriever.memory.parts import Part
from aml_retriever.memory.validation import AddRequest
from aml_retriever.storage import audit
from aml_retriever.storage.speakers import SpeakerRecorder, speaks_in_text
from aml_retriever.storage.views import ViewBuilder


@dataclass(frozen=True)
class Stamp:
    """What the lifecycle records of a stored message beyond what the Add sent (lifecycle.py):
    an HTTP Add's messages are a person's, confirmed, with no text hash, true from their time."""

    origin: str = "user"
    trust: str = "confirmed"
    fingerprint: bytes | None = None
    valid_ms: int | None = None


DEFAULT_STAMP = Stamp()  # what a store that names no stamp records, as an HTTP Add does


class Writes(Part):
    """Adds, each stored atomically and idempotently per request id."""

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
                      received_ms: int, stamp: Stamp = DEFAULT_STAMP) -> tuple[int, int]:
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
        """Insert the messages with their features, links, segments, speakers and index rows, and
        move the session cursor. Returns how many messages got the receive time, and the first id
        (the messages take consecutive ids: the write lock is held). A message that lands before
        a stored one of its session (its Adds arrived out of order) has the session's links,
        segments and speakers derived again in conversation order (derived.py)."""
        assigned = 0
        session_id = request.session_id
        views = ViewBuilder(conn, self.retrieval)
        speakers = SpeakerRecorder(conn)
        stored_before = _message_count(conn, session_id)
        said = request_order(request.request_id)  # its place among the session's Adds
        ids, times = [], []
        fresh: dict[int, tuple[Mention, ...]] = {}
        moved = False
        for message in request.messages:
            timestamp = received_ms if message.timestamp_ms is None else message.timestamp_ms
            assigned += message.timestamp_ms is None
            features = extract(message.role, message.content, timestamp)
            place = views.place(session_id, timestamp, said)
            moved |= place.next_id is not None
            message_id = conn.execute(
                "INSERT INTO messages (session_id, role, content, timestamp_ms, timestamp_assigned, "
                "segment_id, prev_id, next_id, recorded_ms, valid_ms, origin, trust, "
                "fingerprint, tokens, marks, signal_keys, told, said) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (request.session_id, message.role, message.content, timestamp,
                 int(message.timestamp_ms is None), place.segment_id, place.prev_id,
                 place.next_id, received_ms, stamp.valid_ms, stamp.origin, stamp.trust,
                 stamp.fingerprint, pieces(message.content), features.marks,
                 features.keys_text(), features.told_json(), said)).lastrowid or 0
            views.placed(message_id, place)
            index_message(conn, message_id, message.content, features)
            speakers.count(message.role, speaks_in_text(message.role, features.speaker))
            fresh[message_id] = features.mentions
            ids.append(message_id)
            times.append(timestamp)
        open_segment = views.finish()[session_id]
        conn.execute(
            "INSERT INTO sessions (session_id, message_count, first_ms, last_ms, last_message_id, "
            "open_segment_id) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
            "message_count = message_count + excluded.message_count, "
            "first_ms = min(first_ms, excluded.first_ms), last_ms = max(last_ms, excluded.last_ms), "
            "last_message_id = excluded.last_message_id, open_segment_id = excluded.open_segment_id",
            (session_id, len(request.messages), min(times), max(times), ids[-1], open_segment))
        if moved:
            rebuild_views(conn, self.retrieval, [session_id])
        record_speakers(conn, speakers, session_id, fresh, stored_before, moved)
        speakers.finish()
        return assigned, ids[0]

    @staticmethod
    def _added(request: AddRequest, stored: int, assigned: int, replayed: bool) -> dict[str, Any]:
        return {"success": True, "request_id": request.request_id, "user_id": request.user_id,
                "session_id": request.session_id, "stored": stored, "replayed": replayed,
                "timestamps_assigned": assigned}


def _message_count(conn: sqlite3.Connection, session_id: str) -> int:
    """How many messages a session holds (0 for a new one), from its cursor."""
    row = conn.execute("SELECT message_count FROM sessions WHERE session_id = ?",
                       (session_id,)).fetchone()
    return row[0] if row else 0
