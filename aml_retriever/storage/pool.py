"""Connections to the user files, shared by every thread through a pool of idle ones.

A thread leases a connection for one call (`with store.connection(user) as conn`) and gives it
back; at most a set number stay idle between calls. Every connection is opened with the same
pragmas (`Connections._configure`), in WAL mode, to a file at the current schema (`schema`).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from aml_retriever.common.errors import Overloaded, StorageFull
from aml_retriever.storage import copies, resources
from aml_retriever.storage.gate import Gate
from aml_retriever.storage.pages import USER_PAGE_SIZE
from aml_retriever.storage.schema import Schema

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


class Connections:
    """Every open connection to a store's user files: leased to one thread, or idle in the pool."""

    def __init__(self, schema: Schema, synchronous: str, idle_connections: int, gate: Gate,
                 read_only: bool = False) -> None:
        self.synchronous = synchronous
        self.read_only = read_only  # every file opened read only, nothing ever written
        self.gate = gate  # an opening and a removal of one file never overlap (gate.py)
        self._schema = schema
        self._idle = _Pool(idle_connections)
        self._opened: list[sqlite3.Connection] = []
        self._opened_lock = threading.Lock()
        # Which file each open connection was opened on: (path, device, inode).
        self._files: dict[int, tuple[Path, int, int]] = {}
        # Connections to a copy in memory of a file that could not be upgraded (`_read_copy`).
        self._copies: set[int] = set()

    @property
    def opened(self) -> list[sqlite3.Connection]:
        """Every connection open now, leased or idle."""
        with self._opened_lock:
            return list(self._opened)

    @contextmanager
    def lease(self, path: Path, create: bool = False) -> Iterator[sqlite3.Connection | None]:
        """A connection to a user file, leased from the pool of idle ones (opened when none is
        idle) and given back after the block; None when there is no usable file and `create` is
        false. Connections are shared across threads, so each file keeps one or two warm page
        caches however many workers serve it, and open files stay bounded."""
        conn = self._idle.take(path)
        while conn is not None and not self.current(conn):
            self._close(conn)  # its file was removed (another process too): never served again
            conn = self._idle.take(path)
        if conn is None:
            if not create and not path.exists():
                yield None
                return
            with self.gate.opening(path):
                conn = self._open(path, create)
        try:
            yield conn
        finally:
            if conn is not None:
                self._give_back(path, conn)

    def drop(self, path: Path) -> None:
        """Close every idle connection to one file (before it is moved or removed)."""
        for conn in self._idle.take_file(path):
            self._close(conn)

    def holds(self, path: Path) -> bool:
        """Whether a connection of this process to the file at `path` is open (leased)."""
        with self._opened_lock:
            return any(self._files.get(id(conn), (None,))[0] == path for conn in self._opened)

    def check_writable(self, conn: sqlite3.Connection) -> None:
        """Refuse a write that cannot be kept: one to a copy in memory (`_read_copy`: the disk
        is full), or to a file another process removed meanwhile (`current`)."""
        if id(conn) in self._copies or self.read_only:
            raise resources.storage_full()
        if not self.current(conn):
            raise Overloaded("the user's file was removed while this request waited; retry")

    def current(self, conn: sqlite3.Connection) -> bool:
        """Whether the file a connection was opened on is still the one at its path: a file
        removed by unlinking (a deletion on a full disk, by any process of the store) leaves
        the connections of the others on an inode no path names, and they would go on serving
        the deleted user, and take Adds no later open would find. A stat, ~2 us."""
        opened = self._files.get(id(conn))
        if opened is None:
            return True
        path, device, inode = opened
        try:
            found = os.stat(path)
        except FileNotFoundError:
            return False
        return (found.st_dev, found.st_ino) == (device, inode)

    def identity(self, conn: sqlite3.Connection) -> tuple[int, int] | None:
        """The (device, inode) of the file a connection was opened on; None for a copy in
        memory (`_read_copy`), which nothing keeps beyond its request."""
        opened = self._files.get(id(conn))
        return None if opened is None else opened[1:]

    def close_removed(self) -> int:
        """Close the idle connections whose files were removed, so their space is given back
        (the checkpoint loop calls it). Returns how many closed."""
        stale = [conn for conn in self._idle.take_all_where(lambda conn: not self.current(conn))]
        for conn in stale:
            self._close(conn)
        return len(stale)

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
        self._idle.take_all()  # closed below, with the leased ones
        with self._opened_lock:
            conns, self._opened = self._opened, []
        for conn in conns:
            conn.close()

    def _give_back(self, path: Path, conn: sqlite3.Connection) -> None:
        # A block left inside a transaction (an error between BEGIN and its end) is not reused;
        # nor is a copy in memory: the next read tries the upgrade again.
        evicted = [conn] if conn.in_transaction or id(conn) in self._copies \
            else self._idle.give(path, conn)
        for old in evicted:
            self._close(old)

    def _open(self, path: Path, create: bool) -> sqlite3.Connection | None:
        if self.read_only:
            if create:
                raise resources.storage_full()
            conn = sqlite3.connect(resources.read_only_uri(path), uri=True, isolation_level=None,
                                   check_same_thread=False)
        elif create:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        else:
            conn = sqlite3.connect(f"{path.as_uri()}?mode=rw", uri=True, isolation_level=None,
                                   check_same_thread=False)
        try:
            if not self.read_only:
                self._configure(conn)
            if not self._schema.bring_user_file(conn, path, create):
                conn.close()
                return None
        except sqlite3.Error as exc:
            cannot_write = self.read_only or isinstance(resources.cause(exc), StorageFull)
            if create or not cannot_write:
                conn.close()
                raise
            return self._read_copy(conn, path)
        except BaseException:
            conn.close()
            raise
        found = os.stat(path)  # still there: a removal waits for the opening (gate.py)
        with self._opened_lock:
            self._opened.append(conn)
            self._files[id(conn)] = (path, found.st_dev, found.st_ino)
        return conn

    def _read_copy(self, conn: sqlite3.Connection, path: Path) -> sqlite3.Connection:
        """A file that cannot be opened for want of space (at an earlier schema, its upgrade
        writes; after a clean close, even its shared-memory file must be made), or, for the
        commands that only read, in a place that cannot be written, copied into memory
        (copies.py) and upgraded there, for reads only (`check_writable` refuses writes: 507):
        a user untouched since an upgrade of the program stays readable on a full disk, a store
        on a read-only mount readable by `stats` and `export`. Its file is upgraded by the first
        open once space is back. The copy costs the file's size in memory for the one request;
        never pooled."""
        conn.close()
        copy = copies.in_memory(path, copies.Unreadable if self.read_only else StorageFull)
        try:
            copy.execute(f"PRAGMA soft_heap_limit = {SQLITE_HEAP_LIMIT}")
            copy.execute("PRAGMA temp_store = MEMORY")
            self._schema.bring_user_file(copy, path, create=False)
        except BaseException:
            copy.close()
            raise
        with self._opened_lock:
            self._opened.append(copy)
            self._copies.add(id(copy))
        return copy

    def _configure(self, conn: sqlite3.Connection) -> None:
        conn.execute(f"PRAGMA soft_heap_limit = {SQLITE_HEAP_LIMIT}")
        # A Search's temporary tables (timeline.py) stay in memory: small, and a read must not
        # need room on a full disk.
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute(f"PRAGMA page_size = {USER_PAGE_SIZE}")  # a new file's (pages.py)
        _use_wal(conn)
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        # Deleted text is overwritten with zeros, so a deleted user does not linger in free pages.
        conn.execute("PRAGMA secure_delete = ON")
        conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")

    def _close(self, conn: sqlite3.Connection) -> None:
        with self._opened_lock:
            if conn in self._opened:
                self._opened.remove(conn)
            self._files.pop(id(conn), None)
            self._copies.discard(id(conn))
        conn.close()


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

    def take_file(self, path: Path) -> list[sqlite3.Connection]:
        """Every idle connection to one file, for the caller to close."""
        with self._lock:
            keys = [key for key in self._idle if key[0] == path]
            return [self._idle.pop(key) for key in keys]

    def take_all(self) -> list[sqlite3.Connection]:
        with self._lock:
            conns = list(self._idle.values())
            self._idle.clear()
        return conns

    def take_all_where(self, test: Callable[[sqlite3.Connection], bool]) -> list[sqlite3.Connection]:
        """Every idle connection `test` holds true of, for the caller to close."""
        with self._lock:
            keys = [key for key, conn in self._idle.items() if test(conn)]
            return [self._idle.pop(key) for key in keys]
