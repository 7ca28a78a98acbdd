"""Where bytes live: the catalog, one SQLite file per user, connections and planned checkpoints.

Why a file per user: FTS5's bm25() takes its statistics (IDF, average length) from the whole
table, so a table shared by users lets one user's corpus move another's ranking, and a SQL filter
on user after MATCH scores every user's matches (see docs/ARCHITECTURE.md). A user's own file
makes every statistic that user's own, answers at the speed of an FTS5 query over that user alone,
and makes "only that user's rows are ever read" true of the file system, not just of a WHERE.

Threading: connections are shared by every thread through a pool of idle ones: a thread leases
a connection for one call (`with store.connection(user) as conn`) and gives it back.
Writes take `BEGIN IMMEDIATE` so the idempotency check and the insert are one serialised step.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aml_retriever import __version__
from aml_retriever.analysis.tokenizer import FTS_TOKENIZE
from aml_retriever.common.errors import StorageFull, StoreError, UserStoreDamaged
from aml_retriever.common.signals import FORMER_INDEX_SETTINGS, RetrievalConfig
from aml_retriever.storage import resources
from aml_retriever.storage.migrations import (
    CATALOG_MIGRATIONS,
    CATALOG_SCHEMA,
    SHARD_FORMAT,
    SHARD_MIGRATIONS,
    SHARD_SCHEMA,
    STORE_FORMAT,
)

log = logging.getLogger("aml_retriever.store")

def index_identity(view_shape: str) -> str:
    """Changes whenever what the index holds for the same messages would change (tokenizer, view
    shapes); a store built otherwise is refused on open instead of searched with mismatched rows."""
    return hashlib.sha256(f"tokenizer-v1|{FTS_TOKENIZE}|{view_shape}".encode()).hexdigest()[:16]


# How long a writer waits for another writer of the same user before giving up.
BUSY_TIMEOUT_MS = 15_000
# Cap on the WAL file kept after a checkpoint, so one burst does not leave a huge file behind.
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024
# Connections kept open between calls, for any thread to reuse (least recently used closed
# first): bounds file descriptors (three per WAL connection) however many users are served.
IDLE_CONNECTIONS = 64
# SQLite's memory for the whole process (a soft limit: page caches give memory back beyond it).
# Without it every open connection may keep a 2 MiB page cache, and 16 workers x 16 files each
# measured 624 MB of server memory; the operating system's file cache still holds the pages.
SQLITE_HEAP_LIMIT = 64 * 1024 * 1024
QUARANTINE = "quarantine"  # the directory (beside the user files) of damaged ones


def shard_name(user_id: str) -> str:
    """A user's file name: a hash, so any user id (any script, any length) maps to a safe name."""
    return hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:32]


class Store:
    """A catalog file plus a directory of per-user shard files."""

    def __init__(self, path: str | os.PathLike[str], synchronous: str = "FULL",
                 retrieval: RetrievalConfig | None = None, reindexing: bool = False,
                 idle_connections: int = IDLE_CONNECTIONS) -> None:
        # Absolute, so file URIs (read-only opens) work and a later chdir changes nothing.
        self.path = Path(os.path.abspath(path))
        retrieval = retrieval or RetrievalConfig()
        self.index_identity = index_identity(retrieval.index_identity())
        self._former_identity = index_identity(retrieval.index_identity(FORMER_INDEX_SETTINGS))
        self._reindexing = reindexing
        self.shard_dir = Path(str(self.path) + ".users")
        self.synchronous = synchronous
        self._idle = _Pool(idle_connections)
        self._all_connections: list[sqlite3.Connection] = []
        self._registry_lock = threading.Lock()
        self._dirty: set[Path] = set()
        self._dirty_lock = threading.Lock()
        self._lock_file: int | None = None
        # Told of every checkpoint's outcome (True: done), for GET /metrics.
        self.on_checkpoint: Callable[[bool], None] = lambda done: None
        self._open_catalog()

    # ---- catalog -------------------------------------------------------------------------

    def _open_catalog(self) -> None:
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
                self._migrate(conn, CATALOG_MIGRATIONS, CATALOG_SCHEMA, STORE_FORMAT, "store")
                self._check_index_identity(conn)
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            raise StoreError(self._unusable(exc), "db") from None
        try:
            self.shard_dir.mkdir(exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot make the directory of the user files {self.shard_dir}: "
                             f"{exc.strerror}", "db") from None

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
            raise StoreError(f"{self.path} was indexed with other settings ({row[0]}; these "
                             f"settings make {self.index_identity}); run `reindex` to rebuild it "
                             "for these settings, or use the settings that wrote it", "db")

    def _migrate(self, conn: sqlite3.Connection, migrations: tuple[str, ...], current: str,
                 fmt: str, what: str) -> None:
        """Make a new file from the `current` schema, bring an older one to it through the
        migrations it has not had, or refuse a file that is not ours or is newer. A file
        already current is only read, so a store on a full disk still opens (for reads)."""
        if conn.execute("PRAGMA user_version").fetchone()[0] == len(migrations):
            found = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
            if not found or found[0] != fmt:
                raise StoreError(f"{self.path} is not an aml_retriever {what}", "db")
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            has_tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0
            if version == 0 and has_tables:
                raise StoreError(f"{self.path} is a SQLite file but not an aml_retriever {what}", "db")
            if version > len(migrations):
                raise StoreError(f"{self.path} was written by a newer aml_retriever (schema "
                                 f"{version}, this version knows {len(migrations)}); upgrade", "db")
            if version > 0:
                found = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
                if not found or found[0] != fmt:
                    raise StoreError(f"{self.path} is not an aml_retriever {what}", "db")
            for script in [current] if version == 0 else migrations[version:]:
                for statement in _statements(script):
                    conn.execute(statement)
            if version == 0:
                conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", [
                    ("format", fmt), ("index_identity", self.index_identity),
                    ("created_by", __version__), ("created_ms", str(int(time.time() * 1000)))])
            conn.execute(f"PRAGMA user_version = {len(migrations)}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite rolls back by itself on some errors (a full disk)
                conn.execute("ROLLBACK")
            raise

    # ---- server lock ---------------------------------------------------------------------

    def hold_shared(self) -> None:
        """Mark the store as in use by a server, so `purge` refuses to remove files under it."""
        self._lock_file = os.open(self.path, os.O_RDONLY)
        fcntl.flock(self._lock_file, fcntl.LOCK_SH)

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        fd = os.open(self.path, os.O_RDONLY)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StoreError("the store is in use by a running server; stop it first "
                                 "(or delete users one by one with DELETE /users/{user_id})",
                                 "db") from None
            yield
        finally:
            os.close(fd)

    # ---- user shards ---------------------------------------------------------------------

    def shard_path(self, user_id: str) -> Path:
        name = shard_name(user_id)
        return self.shard_dir / name[:2] / f"{name}.db"

    @property
    def quarantine_dir(self) -> Path:
        """Where damaged user files are moved aside (never read as a user's memory again)."""
        return self.shard_dir / QUARANTINE

    @contextmanager
    def connection(self, user_id: str, create: bool) -> Iterator[sqlite3.Connection | None]:
        """A connection to a user's file for the duration of the block; None when the user has no
        file and `create` is false (reads never create files). What goes wrong with the file or
        the machine inside the block is reported as its cause (resources.py): a damaged file is
        moved aside and its user refused, a full disk is StorageFull, no file descriptors left
        is Overloaded; never an internal error."""
        path = self.shard_path(user_id)
        if (self.quarantine_dir / path.name).exists():
            raise resources.damaged()
        try:
            with self.connection_at(path, create) as conn:
                yield conn
        except (sqlite3.Error, OSError) as exc:
            cause = resources.cause(exc)
            if cause is None:
                raise
            if isinstance(cause, UserStoreDamaged):
                self.quarantine(path)
            raise cause from None

    def quarantine(self, path: Path) -> None:
        """Move a damaged user file (and its WAL and shared-memory files) aside, closing every
        idle connection to it first; in-flight ones finish on the moved file."""
        self._idle.drop(path, self._close)
        self.quarantine_dir.mkdir(exist_ok=True)
        for part in _parts(path):
            try:
                os.replace(part, self.quarantine_dir / part.name)
            except FileNotFoundError:
                continue
        log.warning("a damaged user file was moved to %s", self.quarantine_dir)

    def remove_user_files(self, user_id: str) -> int:
        """Unlink a user's file, its WAL and shared-memory files and any quarantined copy: the
        deletion that needs no free space and no readable file. Returns the files removed."""
        path = self.shard_path(user_id)
        self._idle.drop(path, self._close)
        removed = 0
        for part in [*_parts(path), *_parts(self.quarantine_dir / path.name)]:
            try:
                part.unlink()
                removed += 1
            except FileNotFoundError:
                continue
        return removed

    def quarantined(self) -> list[Path]:
        return sorted(self.quarantine_dir.glob("*.db"))

    @contextmanager
    def connection_at(self, path: Path, create: bool = False
                      ) -> Iterator[sqlite3.Connection | None]:
        """A connection to a user file, leased from the pool of idle ones (opened when none is
        idle) and given back after the block; None when there is no usable file and `create` is
        false. Connections are shared across threads, so each file keeps one or two warm page
        caches however many workers serve it, and open files stay bounded."""
        conn = self._idle.take(path)
        if conn is None:
            if not create and not path.exists():
                yield None
                return
            conn = self._open_shard(path, create)
        try:
            yield conn
        finally:
            if conn is not None:
                self._give_back(path, conn)

    def _give_back(self, path: Path, conn: sqlite3.Connection) -> None:
        # A block left inside a transaction (an error between BEGIN and its end) is not reused.
        evicted = [conn] if conn.in_transaction else self._idle.give(path, conn)
        for old in evicted:
            self._close(old)

    def _open_shard(self, path: Path, create: bool) -> sqlite3.Connection | None:
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        else:
            conn = sqlite3.connect(f"{path.as_uri()}?mode=rw", uri=True, isolation_level=None,
                                   check_same_thread=False)
        try:
            self._configure(conn)
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version < len(SHARD_MIGRATIONS) and (create or version > 0):
                self._migrate(conn, SHARD_MIGRATIONS, SHARD_SCHEMA, SHARD_FORMAT, "user file")
            elif version == 0:
                conn.close()  # created by a concurrent first Add that has not committed yet
                return None
            elif version > len(SHARD_MIGRATIONS):
                raise StoreError(f"{path} was written by a newer aml_retriever; upgrade", "db")
        except BaseException:
            conn.close()
            raise
        with self._registry_lock:
            self._all_connections.append(conn)
        return conn

    def _configure(self, conn: sqlite3.Connection) -> None:
        conn.execute(f"PRAGMA soft_heap_limit = {SQLITE_HEAP_LIMIT}")
        # A Search's temporary tables (timeline.py) stay in memory: small, and a read must not
        # need room on a full disk.
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _use_wal(conn)
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        # Deleted text is overwritten with zeros, so a deleted user does not linger in free pages.
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")

    def _close(self, conn: sqlite3.Connection) -> None:
        with self._registry_lock:
            if conn in self._all_connections:
                self._all_connections.remove(conn)
        conn.close()

    def record_index_identity(self, conn: sqlite3.Connection | None = None) -> None:
        """Stamp a file (or the catalog) as indexed with this store's settings (after reindex)."""
        target = conn or sqlite3.connect(self.path, isolation_level=None)
        target.execute("UPDATE meta SET value = ? WHERE key = 'index_identity'", (self.index_identity,))
        if conn is None:
            target.close()

    def shard_paths(self) -> list[Path]:
        return sorted(self.shard_dir.glob("??/*.db"))

    @contextmanager
    def write(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken up front so concurrent writers of a user serialise.
        The caller acknowledges only after this block returns: the commit is durable then."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        self.mark_dirty(conn)

    @contextmanager
    def read(self, conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        """One read transaction: every query inside sees the same committed snapshot."""
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    # ---- checkpoints ---------------------------------------------------------------------

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
            with self.connection_at(path) as conn:
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

    def checkpoint(self, conn: sqlite3.Connection) -> bool:
        """Copy the WAL into the file and truncate it, waiting up to the busy timeout for the
        readers and writers in the way: after a deletion, whose text must be gone from disk
        (the file's pages were zeroed, the log still holds their old copies) before it answers.
        False if they held it that long, or the disk has no room for the copy (the planned
        pass retries)."""
        try:
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if not isinstance(resources.cause(exc), StorageFull):
                raise
            log.warning("a checkpoint found no room on the disk; it is retried later")
            busy = 1
        if busy:
            self.mark_dirty(conn)
        self.on_checkpoint(not busy)
        return not busy

    # ---- whole-store operations ----------------------------------------------------------

    def purge(self) -> int:
        """Remove every user file. Refused while a server holds the store. Returns files removed."""
        with self.exclusive():
            self.close()
            removed = len(self.shard_paths())
            shutil.rmtree(self.shard_dir, ignore_errors=False)
            self.shard_dir.mkdir()
            return removed

    def release_idle(self) -> int:
        """Close every idle connection (the leased ones stay with their threads), so that no
        file is held open between requests: the mover removes a moved user's emptied file only
        once no server has it open (a connection to a file unlinked and made again under the
        same name would, when closed, remove the new file's WAL). Returns how many closed."""
        idle = self._idle.take_all()
        for conn in idle:
            self._close(conn)
        return len(idle)

    def close(self) -> None:
        """Close every connection; call only when no thread still uses them."""
        self._idle.clear()
        with self._registry_lock:
            conns, self._all_connections = self._all_connections, []
        for conn in conns:
            conn.close()
        if self._lock_file is not None:
            os.close(self._lock_file)
            self._lock_file = None


def _parts(path: Path) -> list[Path]:
    """A SQLite file and the files beside it that belong to it."""
    return [path, Path(f"{path}-wal"), Path(f"{path}-shm")]


def rows_in(conn: sqlite3.Connection, select: str, ids: Sequence[int]) -> Iterator[tuple[Any, ...]]:
    """Rows of `select ... IN (ids)` (`select` ends with the column compared), in chunks that stay
    below SQLite's variable limit."""
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        yield from conn.execute(f"{select} IN ({','.join('?' * len(chunk))})", chunk)


def _use_wal(conn: sqlite3.Connection) -> None:
    """Put a file in WAL mode. Switching takes a lock without waiting on busy_timeout, so two
    first Adds of a new user, opening its new file at once, would fail one of them with
    "database is locked": the switch is retried until the other is done. A file already in WAL
    mode (every file but a new one) is only asked, which takes no lock."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            # Only another opener's lock is worth waiting for: out of file descriptors, say, it
            # would wait the whole busy timeout and then fail anyway.
            if resources.primary(exc) not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) \
                    or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


def _statements(script: str) -> list[str]:
    """Split a migration into statements so it runs inside the caller's transaction
    (executescript would commit it first)."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        if line.strip().startswith("--"):
            continue
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    return [s for s in statements if s]


class _Pool:
    """Idle connections by file, least recently given back first out when over the cap."""

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._idle: OrderedDict[tuple[Path, int], sqlite3.Connection] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, path: Path) -> sqlite3.Connection | None:
        with self._lock:
            for key in reversed(self._idle):  # the warmest first
                if key[0] == path:
                    return self._idle.pop(key)
        return None

    def give(self, path: Path, conn: sqlite3.Connection) -> list[sqlite3.Connection]:
        """Keep `conn` idle; returns the connections pushed out, for the caller to close."""
        with self._lock:
            self._idle[(path, id(conn))] = conn
            evicted = []
            while len(self._idle) > self._cap:
                evicted.append(self._idle.popitem(last=False)[1])
            return evicted

    def clear(self) -> None:
        with self._lock:
            self._idle.clear()

    def take_all(self) -> list[sqlite3.Connection]:
        with self._lock:
            conns = list(self._idle.values())
            self._idle.clear()
        return conns

    def drop(self, path: Path, close: Callable[[sqlite3.Connection], None]) -> None:
        """Close every idle connection to one file."""
        with self._lock:
            dropped = [key for key in self._idle if key[0] == path]
            conns = [self._idle.pop(key) for key in dropped]
        for conn in conns:
            close(conn)
