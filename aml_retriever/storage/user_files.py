"""The user files on disk: where each user's file lives, the quarantine damaged ones are moved
to, and their removal.

A user's file is named by a hash of the user id, under a directory named by the hash's first two
characters, in the directory beside the catalog (`./aml.db.users/`). A file found damaged while
in use is moved to the quarantine directory there, and never read as that user's memory again.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aml_retriever.common.errors import StoreError, UserStoreDamaged
from aml_retriever.storage import resources
from aml_retriever.storage.gate import GATE_FILE
from aml_retriever.storage.pool import Connections
from aml_retriever.storage.schema import ForeignFile, NewerFile

log = logging.getLogger("aml_retriever.store")

QUARANTINE = "quarantine"  # the directory (beside the user files) of damaged ones


def shard_name(user_id: str) -> str:
    """A user's file name: a hash, so any user id (any script, any length) maps to a safe name."""
    return hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:32]


class UserFiles:
    """The directory of one store's user files, its quarantine included."""

    def __init__(self, shard_dir: Path, connections: Connections) -> None:
        self.shard_dir = shard_dir
        self._connections = connections

    def make_directory(self) -> None:
        try:
            self.shard_dir.mkdir(exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot make the directory of the user files {self.shard_dir}: "
                             f"{exc.strerror}", "db") from None

    def shard_path(self, user_id: str) -> Path:
        name = shard_name(user_id)
        return self.shard_dir / name[:2] / f"{name}.db"

    def shard_paths(self) -> list[Path]:
        return sorted(self.shard_dir.glob("??/*.db"))

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
            with self._connections.lease(path, create) as conn:
                yield conn
        except ForeignFile:
            # Another application's SQLite file where the user's file should be: set aside like
            # a damaged one, and refused without naming its path.
            self.quarantine(path)
            raise resources.damaged() from None
        except NewerFile:
            raise UserStoreDamaged("this user's stored data was written by a newer version of "
                                   "aml_retriever; serve it with that version", "user_id") from None
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
        with self._connections.gate.removing(path):
            self._connections.drop(path)
            self.quarantine_dir.mkdir(exist_ok=True)
            for part in _parts(path):
                try:
                    os.replace(part, self.quarantine_dir / part.name)
                except FileNotFoundError:
                    continue
        log.warning("a damaged user file was moved to %s", self.quarantine_dir)

    def quarantined(self) -> list[Path]:
        return sorted(self.quarantine_dir.glob("*.db"))

    def remove(self, user_id: str) -> int:
        """Unlink a user's file, its WAL and shared-memory files and any quarantined copy: the
        deletion that needs no free space and no readable file. Returns the files removed."""
        path = self.shard_path(user_id)
        removed = 0
        with self._connections.gate.removing(path):
            self._connections.drop(path)
            for part in [*_parts(path), *_parts(self.quarantine_dir / path.name)]:
                try:
                    part.unlink()
                    removed += 1
                except FileNotFoundError:
                    continue
        return removed

    def remove_emptied(self, user_id: str) -> bool:
        """Unlink a deleted user's emptied file when no connection of any process holds it
        (`remove_unused`): this process's idle ones are closed first; one leased (a request of
        that user in flight) leaves it, emptied, for a later deletion or `purge`. Whether it
        is gone."""
        path = self.shard_path(user_id)
        with self._connections.gate.removing(path):
            self._connections.drop(path)
            if self._connections.holds(path):
                return False
            return remove_unused(path)

    def remove_all(self) -> int:
        """Remove every user file (no connection may still be open). Returns the files removed."""
        removed = len(self.shard_paths())
        for entry in self.shard_dir.iterdir():
            if entry.is_dir():
                shutil.rmtree(entry)
            elif entry.name != GATE_FILE:  # kept: every process of the store has it open
                entry.unlink()
        return removed


def _parts(path: Path) -> list[Path]:
    """A SQLite file and the files beside it that belong to it."""
    return [path, Path(f"{path}-wal"), Path(f"{path}-shm")]


# The byte of a WAL file's shared-memory file on which every process that has the database open
# holds a read lock (SQLite's os_unix.c: UNIX_SHM_DMS, (22 + 8) * 4 + 8).
SHM_DMS_BYTE = 128


def remove_unused(path: Path) -> bool:
    """Unlink a user file and its WAL and shared-memory files if no process has it open: every
    process with a WAL database open holds a read lock on a byte of its shared-memory file, and
    while this holds that byte exclusively no process can open it. False if one has. (A file
    unlinked under a connection still open would, when that connection closed, remove the WAL of
    a file made again under the same name.) The caller's own process must hold no connection
    to it: a process's own locks never stop it."""
    shm = Path(f"{path}-shm")
    try:
        fd = os.open(shm, os.O_RDWR)
    except FileNotFoundError:
        fd = None
    try:
        if fd is not None:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, SHM_DMS_BYTE)
            except OSError:
                return False
        for part in [*_parts(path), Path(f"{path}-journal")]:
            part.unlink(missing_ok=True)
        _fsync_dir(path.parent)
        return True
    finally:
        if fd is not None:
            os.close(fd)


def _fsync_dir(folder: Path) -> None:
    """Make an unlink in a directory durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
