"""Planned checkpoints: a write marks its user file, and one planned pass (`checkpoint_dirty`)
copies each marked file's WAL into the file and truncates it, without waiting; a file a reader
held stays marked for the next pass. A deletion checkpoints its file at once and waits until
that is done (`erase_log`): only then is the deleted text gone from every file.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from aml_retriever.common.errors import StorageFull
from aml_retriever.storage import resources
from aml_retriever.storage.pool import BUSY_TIMEOUT_MS, Connections

log = logging.getLogger("aml_retriever.store")
# How long a deletion tries to truncate its file's WAL in all: a reader in the way is waited for
# by SQLite's busy handler (the busy timeout), but another checkpoint holding the lock (the
# planned pass, another process's) makes SQLite answer busy at once, so the deletion tries again
# every ERASE_RETRY_S (a planned pass over one file takes milliseconds).
ERASE_WITHIN_S = BUSY_TIMEOUT_MS / 1000
ERASE_RETRY_S = 0.01


class Checkpoints:
    """The user files written since their last checkpoint, and the checkpoints themselves."""

    def __init__(self, connections: Connections) -> None:
        self._connections = connections
        self._dirty: set[Path] = set()
        self._dirty_lock = threading.Lock()
        # Told of every checkpoint's outcome (True: done), for GET /metrics.
        self.on_checkpoint: Callable[[bool], None] = lambda done: None

    def mark_dirty(self, conn: sqlite3.Connection) -> None:
        path = Path(conn.execute("PRAGMA database_list").fetchone()[2])
        with self._dirty_lock:
            self._dirty.add(path)

    def checkpoint_dirty(self) -> int:
        """Checkpoint and truncate the WAL of every file written since the last call. With
        readers always active SQLite's automatic checkpoint never resets the WAL, so it would
        grow without bound; this planned pass from one place keeps it small. Returns how many
        files are still waiting (a reader held them)."""
        with self._dirty_lock:
            paths, self._dirty = self._dirty, set()
        waiting = 0
        for path in sorted(paths):
            with self._connections.lease(path) as conn:
                waiting += conn is not None and not self.try_checkpoint(conn)
        return waiting

    def try_checkpoint(self, conn: sqlite3.Connection) -> bool:
        """Copy the WAL into the file and truncate it, without waiting: a reader or writer in the
        way makes this return False (the planned pass retries) instead of blocking a thread."""
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            return self.checkpoint(conn)
        finally:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")

    def erase_log(self, conn: sqlite3.Connection) -> bool:
        """Copy the WAL into the file and truncate it, trying again while another checkpoint
        holds the lock, for up to ERASE_WITHIN_S: after a deletion, which may answer only once its
        text is in no file (before, 3-5 of 60-180 deletions racing the planned pass answered
        while the text was still in the file and its log). False if it could not in that time;
        StorageFull when the disk has no room for the copy (a deletion then unlinks the file)."""
        deadline = time.monotonic() + ERASE_WITHIN_S
        while not self._truncate(conn):
            if time.monotonic() >= deadline:
                return False
            time.sleep(ERASE_RETRY_S)
        return True

    def checkpoint(self, conn: sqlite3.Connection) -> bool:
        """Copy the WAL into the file and truncate it, waiting up to the busy timeout for the
        readers and writers in the way (not for another checkpoint: SQLite answers busy at once
        then). False if they held it that long, another checkpoint held the lock, or the disk
        has no room for the copy (the planned pass retries)."""
        try:
            return self._truncate(conn)
        except StorageFull:
            log.warning("a checkpoint found no room on the disk; it is retried later")
            self.mark_dirty(conn)
            self.on_checkpoint(False)
            return False

    def _truncate(self, conn: sqlite3.Connection) -> bool:
        """One truncating checkpoint: False when something held it, StorageFull without room."""
        try:
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        except sqlite3.OperationalError as exc:
            cause = resources.cause(exc)
            if isinstance(cause, StorageFull):
                raise cause from None
            raise
        if busy:
            self.mark_dirty(conn)
        self.on_checkpoint(not busy)
        return not busy
