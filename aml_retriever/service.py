"""The memory service: Add, Search, delete and stats over a Store. Transports call this."""

from __future__ import annotations

import datetime as dt
import sqlite3
import time
from typing import Any

from aml_retriever import __version__
from aml_retriever.candidates import bm25_candidates
from aml_retriever.errors import IdempotencyConflict
from aml_retriever.signals import RetrievalConfig
from aml_retriever.store import Store
from aml_retriever.tokenizer import index_text
from aml_retriever.validation import AddRequest, SearchRequest

# How many more candidates than top_k to fetch, so that dropping results with duplicate content
# still leaves top_k; fetched again with a larger window in the rare case it does not.
CANDIDATE_FACTOR = 3


def iso_utc(ms: int) -> str:
    """ISO 8601 in UTC with a Z; milliseconds only when there are any."""
    moment = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)
    return moment.isoformat(timespec="milliseconds" if ms % 1000 else "seconds") + "Z"


class MemoryService:
    def __init__(self, store: Store, provenance: bool = True,
                 retrieval: RetrievalConfig | None = None) -> None:
        self.store = store
        self.provenance = provenance
        self.retrieval = retrieval or RetrievalConfig()

    @classmethod
    def open(cls, path: str, retrieval: RetrievalConfig | None = None, provenance: bool = True,
             synchronous: str = "FULL") -> MemoryService:
        """A service over the store at `path` (created if absent): the in-process entry point."""
        return cls(Store(path, synchronous), provenance, retrieval)

    def close(self) -> None:
        self.store.close()

    # ---- Add -----------------------------------------------------------------------------

    def add(self, request: AddRequest) -> dict[str, Any]:
        """Store an Add atomically; answer only once it is committed and searchable."""
        payload_hash = request.payload_hash()
        received_ms = int(time.time() * 1000)
        conn = self.store.connection(request.user_id, create=True)
        assert conn is not None
        with self.store.write(conn):
            # Checked inside the write transaction: concurrent retries serialise on it and
            # exactly one of them writes.
            prior = conn.execute("SELECT payload_hash, stored, timestamps_assigned FROM requests "
                                 "WHERE request_id = ?", (request.request_id,)).fetchone()
            if prior is not None:
                if prior[0] != payload_hash:
                    raise IdempotencyConflict("request_id was already used for a different payload "
                                              "by this user", "request_id")
                return self._added(request, prior[1], prior[2], replayed=True)
            assigned = self._insert_messages(conn, request, received_ms)
            conn.execute("INSERT INTO requests (request_id, payload_hash, session_id, stored, "
                         "timestamps_assigned, created_ms) VALUES (?, ?, ?, ?, ?, ?)",
                         (request.request_id, payload_hash, request.session_id,
                          len(request.messages), assigned, received_ms))
        return self._added(request, len(request.messages), assigned, replayed=False)

    def _insert_messages(self, conn: sqlite3.Connection, request: AddRequest,
                         received_ms: int) -> int:
        assigned = 0
        last_id, first_ms, last_ms = 0, None, None
        for position, message in enumerate(request.messages):
            timestamp = message.timestamp_ms
            if timestamp is None:
                timestamp, assigned = received_ms, assigned + 1
            cursor = conn.execute(
                "INSERT INTO messages (session_id, role, content, timestamp_ms, timestamp_assigned, "
                "request_id, position) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (request.session_id, message.role, message.content, timestamp,
                 int(message.timestamp_ms is None), request.request_id, position))
            last_id = cursor.lastrowid or 0
            terms = index_text(message.content)
            conn.execute("INSERT INTO message_index (rowid, words, grams) VALUES (?, ?, ?)",
                         (last_id, terms.words, terms.grams))
            first_ms = timestamp if first_ms is None else min(first_ms, timestamp)
            last_ms = timestamp if last_ms is None else max(last_ms, timestamp)
        conn.execute(
            "INSERT INTO sessions (session_id, message_count, first_ms, last_ms, last_message_id) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET "
            "message_count = message_count + excluded.message_count, "
            "first_ms = min(first_ms, excluded.first_ms), last_ms = max(last_ms, excluded.last_ms), "
            "last_message_id = excluded.last_message_id",
            (request.session_id, len(request.messages), first_ms, last_ms, last_id))
        return assigned

    @staticmethod
    def _added(request: AddRequest, stored: int, assigned: int, replayed: bool) -> dict[str, Any]:
        return {"success": True, "request_id": request.request_id, "user_id": request.user_id,
                "session_id": request.session_id, "stored": stored, "replayed": replayed,
                "timestamps_assigned": assigned}

    # ---- Search --------------------------------------------------------------------------

    def search(self, request: SearchRequest) -> dict[str, Any]:
        """The user's best original messages for the query, best first, distinct contents."""
        conn = self.store.connection(request.user_id, create=False)
        if conn is None:
            return {"data": []}
        limit = request.top_k * CANDIDATE_FACTOR
        with self.store.read(conn):
            while True:
                candidates = bm25_candidates(conn, request.query, limit, request.session_id)
                results = self._distinct_results(conn, candidates, request.top_k)
                if len(results) >= request.top_k or len(candidates) < limit:
                    break
                limit *= 4
        return {"data": results}

    def _distinct_results(self, conn: sqlite3.Connection, candidates: list[Any],
                          top_k: int) -> list[dict[str, Any]]:
        if not candidates:
            return []
        ids = [c.message_id for c in candidates]
        rows = {row[0]: row for row in conn.execute(
            "SELECT id, session_id, role, content, timestamp_ms FROM messages WHERE id IN "
            f"({','.join('?' * len(ids))})", ids)}
        results: list[dict[str, Any]] = []
        seen: set[str] = set()
        for candidate in candidates:
            row = rows.get(candidate.message_id)
            if row is None or row[3] in seen:
                continue
            seen.add(row[3])
            results.append(self._result(row, candidate.score))
            if len(results) == top_k:
                break
        return results

    def _result(self, row: tuple[Any, ...], score: float) -> dict[str, Any]:
        message_id, session_id, role, content, timestamp_ms = row
        result: dict[str, Any] = {"id": f"m{message_id}", "content": content, "score": score,
                                  "created_at": iso_utc(timestamp_ms), "role": role,
                                  "session_id": session_id}
        if self.provenance:
            result.update(view="message", source_message_ids=[f"m{message_id}"],
                          evidence_flags=["lexical"])
        return result

    # ---- lifecycle -----------------------------------------------------------------------

    def delete_user(self, user_id: str) -> dict[str, Any]:
        """Remove everything of one user in one transaction, then truncate the WAL so the
        deleted text does not linger there either."""
        removed = {"messages": 0, "requests": 0, "sessions": 0}
        conn = self.store.connection(user_id, create=False)
        if conn is not None:
            with self.store.write(conn):
                for table in removed:
                    removed[table] = conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                    conn.execute(f"DELETE FROM {table}")
                conn.execute("INSERT INTO message_index (message_index) VALUES ('delete-all')")
            self.store.try_checkpoint(conn)
        return {"success": True, "user_id": user_id, "deleted": removed}

    def stats(self) -> dict[str, Any]:
        """Counts only, never content."""
        totals = {"users": 0, "messages": 0, "sessions": 0, "requests": 0}
        size = self.store.path.stat().st_size
        for path in self.store.shard_paths():
            size += sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
            conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)
            try:
                counts = conn.execute("SELECT (SELECT count(*) FROM messages), "
                                      "(SELECT count(*) FROM sessions), "
                                      "(SELECT count(*) FROM requests)").fetchone()
            except sqlite3.OperationalError:
                continue  # a file being created right now: no committed schema yet
            finally:
                conn.close()
            totals["users"] += counts[0] > 0
            totals["messages"] += counts[0]
            totals["sessions"] += counts[1]
            totals["requests"] += counts[2]
        return {**totals, "store_bytes": size}

    @staticmethod
    def health() -> dict[str, Any]:
        return {"status": "ok", "version": __version__}
