"""Upkeep of the whole store, over every user file: the derived rows rebuilt for the current
settings (`reindex`), and the store's counts (`stats`), never content."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aml_retriever.analysis.features import extract
from aml_retriever.analysis.speakers import Mention
from aml_retriever.analysis.tokens import pieces
from aml_retriever.memory.derived import empty_indexes, index_message, rebuild_views, record_speakers
from aml_retriever.memory.parts import Part
from aml_retriever.storage import copies, pages, resources, speakers


class Upkeep(Part):
    """Reindexing and counting every user file of the store."""

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> dict[str, int]:
        """Rebuild every derived row (signal keys and marks, told dates, token counts, index rows,
        links, segments) of every user from the original messages, one transaction per user,
        for the current settings; and rewrite a file made with another page size with the
        current one, or one much of which is free pages without them (pages.py: `resized`,
        `compacted`)."""
        users = messages = resized = compacted = 0
        paths = self.store.shard_paths()
        for done, path in enumerate(paths, 1):
            with self.store.connection_at(path) as conn:
                if conn is not None:
                    with self.store.write(conn):
                        messages += self._rebuild(conn)
                        self.store.record_index_identity(conn)
                    users += 1
                    if pages.resize(conn):
                        resized += 1
                    else:
                        compacted += pages.compact(conn)
            if progress:
                progress(done, len(paths))
        self.store.record_index_identity()
        return {"users": users, "messages": messages, "resized": resized, "compacted": compacted}

    def _rebuild(self, conn: sqlite3.Connection) -> int:
        conn.execute("DELETE FROM speakers")
        speakers.clear(conn)
        empty_indexes(conn)
        rows = conn.execute("SELECT id, role, content, timestamp_ms, session_id FROM messages "
                            "ORDER BY id").fetchall()
        recorder = speakers.SpeakerRecorder(conn)
        said: dict[str, dict[int, tuple[Mention, ...]]] = {}
        for message_id, role, content, timestamp, session_id in rows:
            features = extract(role, content, timestamp)
            recorder.count(role, speakers.speaks_in_text(role, features.speaker))
            said.setdefault(session_id, {})[message_id] = features.mentions
            conn.execute("UPDATE messages SET tokens = ?, marks = ?, signal_keys = ?, told = ? "
                         "WHERE id = ?", (pieces(content), features.marks, features.keys_text(),
                                          features.told_json(), message_id))
            index_message(conn, message_id, content, features)
        rebuild_views(conn, self.retrieval, sorted(said))
        # A name addressed is given to the side that spoke before, in each session's
        # conversation order (the same as the Adds derived, whatever order they came in).
        for session_id, fresh in sorted(said.items()):
            record_speakers(conn, recorder, session_id, fresh, stored_before=0, moved=True)
        recorder.finish()
        return len(rows)

    def stats(self) -> dict[str, Any]:
        """Counts only, never content."""
        totals = {"users": 0, "messages": 0, "sessions": 0, "requests": 0}
        size = self.store.path.stat().st_size
        damaged = unreadable = 0
        for path in self.store.shard_paths():
            try:
                size += sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
                counts = _counts(path)
            except FileNotFoundError:
                continue  # deleted meanwhile
            except copies.Unreadable:
                unreadable += 1  # never counted as empty: the answer says it could not read it
                continue
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
                "unreadable_user_files": unreadable,
                "quarantined_user_files": len(self.store.quarantined())}


COUNTS = ("SELECT (SELECT count(*) FROM messages), (SELECT count(*) FROM sessions), "
          "(SELECT count(*) FROM requests)")


def _counts(path: Path) -> tuple[int, int, int]:
    """A user file's message, session and request counts, read only; through a copy when it
    cannot be opened where it lies (a read-only place whose shared-memory file cannot be made
    while its write-ahead log holds commits: copies.py), copies.Unreadable when not even so."""
    try:
        conn = sqlite3.connect(resources.read_only_uri(path), uri=True)
        try:
            return conn.execute(COUNTS).fetchone()
        finally:
            conn.close()
    except sqlite3.OperationalError as exc:
        if resources.primary(exc) != sqlite3.SQLITE_CANTOPEN or not path.exists():
            raise
    copy = copies.in_memory(path, copies.Unreadable)
    try:
        return copy.execute(COUNTS).fetchone()
    finally:
        copy.close()
