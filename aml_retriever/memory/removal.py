"""Removal: a user deleted whole, or single messages forgotten with everything derived from them,
each in one transaction and logged without content; and the emptying of a user file that a
deletion and the mover (cluster/mover.py) share."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any

from aml_retriever.analysis.features import SPEAKER_KEY, needle, speaker_of
from aml_retriever.analysis.tokenizer import index_text
from aml_retriever.common.errors import ErasurePending, StorageFull, UserStoreDamaged
from aml_retriever.memory.derived import empty_indexes, rebuild_views
from aml_retriever.memory.parts import Part
from aml_retriever.storage import audit, speakers
from aml_retriever.storage.speakers import speaks_in_text
from aml_retriever.storage.timeline import withheld_changed

# The tables of a user file that hold anything of the user (the rest is schema and settings).
USER_TABLES = ("messages", "requests", "sessions", "views", "speakers", "speaker_mentions",
               "speaker_names", "roles", "removals", "tombstones", "audit")
# The ones a deletion reports counts of.
COUNTED_TABLES = ("messages", "requests", "sessions", "views")


class Removal(Part):
    """Deleting a user, and forgetting single messages."""

    def delete_user(self, user_id: str, actor: str = "http") -> dict[str, Any]:
        """Remove everything of one user in one transaction (its audit log and the key of its
        hashes too), then truncate the WAL so the deleted text does not linger there either.
        A file that cannot be written (a full disk) or read (damaged) is unlinked instead, which
        needs neither: a user can always be forgotten. The catalog notes that a deletion
        happened, with nothing that names the user. The answer says whether the store held the
        user (`found`): deleting one it does not hold succeeds and removes nothing."""
        removed = {"messages": 0, "requests": 0, "sessions": 0, "views": 0}
        answer: dict[str, Any] = {"success": True, "user_id": user_id, "deleted": removed}
        try:
            existed = self._delete_rows(user_id, removed)
            if existed:  # its emptied file too, where no process holds it (user_files.py)
                self.store.remove_emptied(user_id)
        except (StorageFull, UserStoreDamaged):
            # What the file held cannot be counted (so no counts are given); its files are gone
            # all the same, for every process of the store (pool.Connections.current).
            del answer["deleted"]
            answer["files_removed"] = self.store.remove_user_files(user_id)
            existed = True
        if existed:
            audit.record_deletion(self.store.path, actor)
        answer["found"] = existed  # a misspelt id, or a deletion sent again: nothing was there
        return answer

    def _delete_rows(self, user_id: str, removed: dict[str, int]) -> bool:
        with self.store.connection(user_id, create=False) as conn:
            if conn is None:
                return False
            with self.store.write(conn):
                removed.update(erase_user_rows(conn))
            self._erase_log(conn)
        return True

    def _erase_log(self, conn: sqlite3.Connection) -> None:
        """Answer only once the removed text has left the write-ahead log too (checkpoints.py):
        a 200 means it is in no file of the store."""
        if not self.store.erase_log(conn):
            raise ErasurePending("the removal is done, but its text is not yet cleared from the "
                                 "user's files; send the request again")

    def forget(self, user_id: str, message_ids: Sequence[int], reason: str,
               actor: str = "http",
               check: Callable[[sqlite3.Connection], None] | None = None) -> dict[str, Any]:
        """Remove single messages and everything derived from them in one transaction, and record
        each removal (id, time, reason; never content). Ids that do not exist are skipped.
        `check` runs first in the same transaction and may refuse (raise): what it checks cannot
        change before the removal (a review's trust check: of a reject and a confirm sent at
        once, exactly one wins).

        The index rows are deleted with the terms they were built from, recomputed from the
        content (a contentless FTS5 table can only delete what it is told it holds), and the
        index is then merged so the removed terms leave its pages too; the conversation links and
        segments of the sessions concerned are derived again from their remaining messages."""
        removed: list[int] = []
        with self.store.connection(user_id, create=False) as conn:
            if conn is not None:
                with self.store.write(conn):
                    if check is not None:
                        check(conn)
                    removed = self._remove_messages(conn, message_ids, reason, actor)
                if removed:
                    self._erase_log(conn)  # so the removed text leaves the write-ahead log
        return {"success": True, "user_id": user_id, "forgotten": [f"m{m}" for m in removed]}

    def _remove_messages(self, conn: sqlite3.Connection, message_ids: Sequence[int],
                         reason: str, actor: str) -> list[int]:
        """Remove the messages, leave a tombstone for each statement among them (a text hash,
        never the text), make current again what they had replaced, and log the removal."""
        marks = ",".join("?" * len(message_ids))
        rows = conn.execute(f"SELECT id, session_id, content, fingerprint, superseded_by, role "
                            f"FROM messages WHERE id IN ({marks}) ORDER BY id",
                            list(message_ids)).fetchall()
        if not rows:
            return []
        removed_ms = int(time.time() * 1000)
        said_by = {row[0]: speaker_of(row[5], row[2])[0] for row in rows}  # as extract reads it
        speakers.forget(conn, [(row[0], row[5], speaks_in_text(row[5], said_by[row[0]]))
                               for row in rows])
        for message_id, _, content, fingerprint, successor, _ in rows:
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
        self._forget_speakers(conn, set(said_by.values()) - {""})
        sessions = sorted({row[1] for row in rows})
        self._refresh_sessions(conn, sessions)
        rebuild_views(conn, self.retrieval, sessions)
        return [row[0] for row in rows]

    @staticmethod
    def _forget_speakers(conn: sqlite3.Connection, speakers: set[str]) -> None:
        """Drop the speakers no remaining message names, found by its speaker's key."""
        for speaker in speakers:
            if conn.execute("SELECT 1 FROM messages WHERE instr(signal_keys, ?) > 0 LIMIT 1",
                            (needle(SPEAKER_KEY + speaker),)).fetchone() is None:
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
    speakers.clear(conn)
    conn.execute("DELETE FROM meta WHERE key = 'user_id'")  # the file names its user (listing.py)
    empty_indexes(conn)
    audit.erase(conn)
    # Nothing left says how much the user wrote or since when: the counters of ids restart (the
    # first message stored again is m1), the file reads as made now.
    conn.execute("DELETE FROM sqlite_sequence")
    conn.execute("UPDATE meta SET value = ? WHERE key = 'created_ms'", (str(int(time.time() * 1000)),))
    return removed


def holds_nothing(conn: sqlite3.Connection) -> bool:
    """Whether a user file is empty: never written, or emptied by a deletion or a move."""
    return all(conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is None
               for table in USER_TABLES)
