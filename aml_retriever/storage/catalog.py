"""The catalog: the file a store is named by (e.g. `./aml.db`), beside which its user files live.

Opening it makes or migrates it (`schema`), names why it cannot be used by its real cause (a full
disk, no permission, not a store), and refuses a store indexed with other settings than these.
A running server holds it with a shared lock (`ServerLock`), which whole-store operations that
remove files under a server (purge) must take exclusively.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aml_retriever.analysis.tokenizer import FTS_TOKENIZE
from aml_retriever.common.errors import StoreError
from aml_retriever.common.signals import FORMER_INDEX_SETTINGS, INDEX_SETTINGS, RetrievalConfig
from aml_retriever.storage import resources
from aml_retriever.storage.schema import CATALOG, Schema


def index_identity(view_shape: str) -> str:
    """Changes whenever what the index holds for the same messages would change (tokenizer, view
    shapes); a store built otherwise is refused on open instead of searched with mismatched rows."""
    return hashlib.sha256(f"tokenizer-v1|{FTS_TOKENIZE}|{view_shape}".encode()).hexdigest()[:16]


class Catalog:
    """A store's catalog file, and the index identity it and every user file are stamped with."""

    def __init__(self, path: Path, retrieval: RetrievalConfig, reindexing: bool) -> None:
        self.path = path
        self.index_identity = index_identity(retrieval.index_identity())
        # The settings behind the identity, kept beside it so a refusal can name what changed.
        self.index_settings = json.dumps({name: getattr(retrieval, name) for name in INDEX_SETTINGS},
                                         sort_keys=True)
        self._former_identity = index_identity(retrieval.index_identity(FORMER_INDEX_SETTINGS))
        self._reindexing = reindexing
        self.schema = Schema(path, self.index_identity)
        self.cursor_key = b""  # read from the catalog by `open`

    def open(self, read_only: bool = False) -> None:
        """Make, migrate or check the catalog (`read_only`: only check it, writing nothing); a
        StoreError says why it cannot be used."""
        if read_only:
            self._open_read_only()
            return
        if self.path.is_dir():
            raise StoreError(f"{self.path} is a directory, not a store file", "db")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot make the directory of the store {self.path}: "
                             f"{exc.strerror}", "db") from None
        try:
            conn = sqlite3.connect(self.path, isolation_level=None)
            try:
                self.schema.migrate(conn, CATALOG)
                self._check_index_identity(conn)
                self._record_settings(conn)
                self.cursor_key = self._cursor_key(conn)
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            raise StoreError(self._unusable(exc), "db") from None

    def _open_read_only(self) -> None:
        if not self.path.is_file():
            raise StoreError(f"{self.path} is not a store file", "db")
        try:
            conn = sqlite3.connect(resources.read_only_uri(self.path), uri=True, isolation_level=None)
            try:
                if conn.execute("PRAGMA user_version").fetchone()[0] != CATALOG.version:
                    raise StoreError(f"{self.path} must be upgraded by this version first, which "
                                     "writes: open it once with write access (e.g. `check`)", "db")
                self.schema.migrate(conn, CATALOG)  # only checks what it is: it is current
                found = conn.execute("SELECT value FROM meta WHERE key = 'cursor_key'").fetchone()
                self.cursor_key = bytes.fromhex(found[0]) if found else b""
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            raise StoreError(self._unusable(exc), "db") from None

    def record_index_identity(self, conn: sqlite3.Connection | None = None) -> None:
        """Stamp a file (or the catalog) as indexed with this store's settings (after reindex)."""
        target = conn or sqlite3.connect(self.path, isolation_level=None)
        target.execute("UPDATE meta SET value = ? WHERE key = 'index_identity'", (self.index_identity,))
        if conn is None:
            self._record_settings(target)
            target.close()

    def _record_settings(self, conn: sqlite3.Connection) -> None:
        """Keep the index settings beside the catalog's identity when it is this store's (a new
        catalog, one opened with its own settings, one just reindexed)."""
        identity, kept = (conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
                          for key in ("index_identity", "index_settings"))
        if identity and identity[0] == self.index_identity and (kept is None
                                                                 or kept[0] != self.index_settings):
            # Written once (an open that finds them kept writes nothing), and never a reason to
            # refuse a store: on a full or read-only disk they wait for a later open.
            try:
                conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('index_settings', ?)",
                             (self.index_settings,))
            except sqlite3.OperationalError:
                pass

    @staticmethod
    def _cursor_key(conn: sqlite3.Connection) -> bytes:
        """The key page cursors are signed with: made once, at random, for the whole store, so
        every process serving it (and a restarted one) accepts the cursors the others gave."""
        conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('cursor_key', ?)",
                     (secrets.token_hex(32),))
        return bytes.fromhex(conn.execute("SELECT value FROM meta WHERE key = 'cursor_key'")
                             .fetchone()[0])

    def _unusable(self, exc: sqlite3.DatabaseError) -> str:
        """Why the store cannot be opened, named by its real cause where one is known."""
        code = getattr(exc, "sqlite_errorcode", None)
        if code == sqlite3.SQLITE_FULL:
            return f"no space left on the device that holds {self.path}"
        if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM) and \
                not os.access(self.path if self.path.exists() else self.path.parent, os.W_OK):
            return f"permission denied: {self.path} cannot be written by this user"
        return f"{self.path} is not a usable aml_retriever store ({exc})"

    def _check_index_identity(self, conn: sqlite3.Connection) -> None:
        row = conn.execute("SELECT value FROM meta WHERE key = 'index_identity'").fetchone()
        if row and row[0] == self._former_identity:
            self.record_index_identity(conn)  # the same index, as recorded before schema 4
        elif row and row[0] != self.index_identity and not self._reindexing:
            raise StoreError(f"{self.path} was indexed with other settings ({self._changed(conn)}); "
                             "run `reindex` to rebuild it for these settings, or use the settings "
                             "that wrote it", "db")

    def _changed(self, conn: sqlite3.Connection) -> str:
        """What differs between the store's index settings and these, by name and value; a
        store from before they were kept says so."""
        row = conn.execute("SELECT value FROM meta WHERE key = 'index_settings'").fetchone()
        if row is None:
            return "which ones it does not record: it was written before they were kept"
        stored, these = json.loads(row[0]), json.loads(self.index_settings)
        changed = [f"{name} {stored.get(name)} there, {these[name]} here" for name in sorted(these)
                   if stored.get(name) != these[name]]
        return "; ".join(changed) or "the same settings, but an index this version builds otherwise"


class ServerLock:
    """A flock on the catalog: shared while a server uses the store, exclusive for an operation
    that must not run under one."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._shared: int | None = None  # the descriptor holding the shared lock

    def hold_shared(self) -> None:
        """Mark the store as in use by a server, so `purge` refuses to remove files under it."""
        self._shared = os.open(self._path, os.O_RDONLY)
        fcntl.flock(self._shared, fcntl.LOCK_SH)

    @contextmanager
    def exclusive(self, instead: str = "") -> Iterator[None]:
        """Hold the store alone for the block, or refuse at once while a server holds it,
        saying what may be done meanwhile (`instead`, the operation's own advice)."""
        fd = os.open(self._path, os.O_RDONLY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StoreError("the store is in use by a running server; stop it first"
                                 + (f" ({instead})" if instead else ""), "db") from None
            yield
        finally:
            os.close(fd)

    def release(self) -> None:
        """Let go of the shared lock, if held."""
        if self._shared is not None:
            os.close(self._shared)
            self._shared = None
