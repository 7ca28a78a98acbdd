"""Where bytes live: the catalog and one SQLite file per user, behind one facade, `Store`.

Why a file per user: FTS5's bm25() takes its statistics (IDF, average length) from the whole
table, so a table shared by users lets one user's corpus move another's ranking, and a SQL filter
on user after MATCH scores every user's matches (see docs/ARCHITECTURE.md). A user's own file
makes every statistic that user's own, answers at the speed of an FTS5 query over that user alone,
and makes "only that user's rows are ever read" true of the file system, not just of a WHERE.

`Store` is what the rest of the package uses; each of its concerns is a module of its own: the
catalog and the lock a server holds on it (`catalog`), the schema every file is brought to
(`schema`), the user files and their quarantine (`user_files`), the connections shared by every
thread (`connections`), read and write transactions (`transactions`) and planned checkpoints
(`checkpoints`).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.storage import generation, transactions
from aml_retriever.storage.catalog import Catalog, ServerLock
from aml_retriever.storage.checkpoints import Checkpoints
from aml_retriever.storage.gate import gate_for
from aml_retriever.storage.generation import Stamp
from aml_retriever.storage.pool import (
    IDLE_CONNECTIONS,
    Connections,
)
from aml_retriever.storage.user_files import UserFiles


class Store:
    """A catalog file plus a directory of per-user shard files."""

    def __init__(self, path: str | os.PathLike[str], synchronous: str = "FULL",
                 retrieval: RetrievalConfig | None = None, reindexing: bool = False,
                 idle_connections: int = IDLE_CONNECTIONS, read_only: bool = False) -> None:
        # Absolute, so file URIs (read-only opens) work and a later chdir changes nothing.
        self.path = Path(os.path.abspath(path))
        self.shard_dir = Path(str(self.path) + ".users")
        self._catalog = Catalog(self.path, retrieval or RetrievalConfig(), reindexing)
        self.index_identity = self._catalog.index_identity
        self._lock = ServerLock(self.path)
        self._connections = Connections(self._catalog.schema, synchronous, idle_connections,
                                        gate_for(self.shard_dir), read_only)
        self._files = UserFiles(self.shard_dir, self._connections)
        self._checkpoints = Checkpoints(self._connections)
        # `read_only`: for the commands that only read (stats, export), which must work on a
        # store this user may read but not write (a read-only mount, another user's files).
        self._catalog.open(read_only)
        if not read_only:
            self._files.make_directory()

    @property
    def synchronous(self) -> str:
        return self._connections.synchronous

    @property
    def on_checkpoint(self) -> Callable[[bool], None]:
        return self._checkpoints.on_checkpoint

    @on_checkpoint.setter
    def on_checkpoint(self, told: Callable[[bool], None]) -> None:
        self._checkpoints.on_checkpoint = told

    @property
    def _all_connections(self) -> list[sqlite3.Connection]:
        """Every connection open now, leased or idle (tests count them)."""
        return self._connections.opened

    # ---- catalog (catalog.py) ------------------------------------------------------------

    @property
    def cursor_key(self) -> bytes:
        """The store's key for signing page cursors."""
        return self._catalog.cursor_key

    def record_index_identity(self, conn: sqlite3.Connection | None = None) -> None:
        self._catalog.record_index_identity(conn)

    def hold_shared(self) -> None:
        self._lock.hold_shared()

    def exclusive(self, instead: str = "") -> AbstractContextManager[None]:
        return self._lock.exclusive(instead)

    # ---- user files (user_files.py) ------------------------------------------------------

    def shard_path(self, user_id: str) -> Path:
        return self._files.shard_path(user_id)

    def shard_paths(self) -> list[Path]:
        return self._files.shard_paths()

    @property
    def quarantine_dir(self) -> Path:
        return self._files.quarantine_dir

    def connection(self, user_id: str, create: bool
                   ) -> AbstractContextManager[sqlite3.Connection | None]:
        return self._files.connection(user_id, create)

    def quarantine(self, path: Path) -> None:
        self._files.quarantine(path)

    def quarantined(self) -> list[Path]:
        return self._files.quarantined()

    def remove_user_files(self, user_id: str) -> int:
        return self._files.remove(user_id)

    def remove_emptied(self, user_id: str) -> bool:
        return self._files.remove_emptied(user_id)

    # ---- connections (connections.py) ----------------------------------------------------

    def connection_at(self, path: Path, create: bool = False
                      ) -> AbstractContextManager[sqlite3.Connection | None]:
        return self._connections.lease(path, create)

    def release_idle(self) -> int:
        return self._connections.release_idle()

    def stamp(self, conn: sqlite3.Connection) -> Stamp | None:
        """The committed state a read transaction sees of its user file (generation.py); None
        for a copy in memory of a file a full disk left at an earlier schema."""
        identity = self._connections.identity(conn)
        return None if identity is None else generation.stamp(conn, *identity)

    def close_removed(self) -> int:
        return self._connections.close_removed()

    # ---- transactions (transactions.py) --------------------------------------------------

    def write(self, conn: sqlite3.Connection) -> AbstractContextManager[sqlite3.Connection]:
        return transactions.write(conn, self._checkpoints.mark_dirty,
                                  self._connections.check_writable)

    def read(self, conn: sqlite3.Connection) -> AbstractContextManager[sqlite3.Connection]:
        return transactions.read(conn)

    # ---- checkpoints (checkpoints.py) ----------------------------------------------------

    def mark_dirty(self, conn: sqlite3.Connection) -> None:
        self._checkpoints.mark_dirty(conn)

    def checkpoint_dirty(self) -> int:
        return self._checkpoints.checkpoint_dirty()

    def try_checkpoint(self, conn: sqlite3.Connection) -> bool:
        return self._checkpoints.try_checkpoint(conn)

    def checkpoint(self, conn: sqlite3.Connection) -> bool:
        return self._checkpoints.checkpoint(conn)

    def erase_log(self, conn: sqlite3.Connection) -> bool:
        return self._checkpoints.erase_log(conn)

    # ---- whole-store operations ----------------------------------------------------------

    def purge(self) -> int:
        """Remove every user file. Refused while a server holds the store. Returns files removed."""
        with self.exclusive("or delete users one by one with DELETE /users/{user_id}"):
            self.close()
            return self._files.remove_all()

    def close(self) -> None:
        """Close every connection and let go of the server's lock; call only when no thread
        still uses them."""
        self._connections.close()
        self._lock.release()


def rows_in(conn: sqlite3.Connection, select: str, ids: Sequence[int]) -> Iterator[tuple[Any, ...]]:
    """Rows of `select ... IN (ids)` (`select` ends with the column compared), in chunks that stay
    below SQLite's variable limit."""
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        yield from conn.execute(f"{select} IN ({','.join('?' * len(chunk))})", chunk)
