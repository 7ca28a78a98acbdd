"""A user file read through a copy in memory, where it cannot be opened where it lies: a full
disk (in WAL mode even a read makes the shared-memory file, which a full disk refuses), or a
read-only place (a read-only mount, a backup, another user's files) for the commands that only
read (`stats`, `export`). Reads only: nothing written to a copy is kept.

A file whose write-ahead log holds commits the file does not is copied with its log into a
private temporary folder, where the shared-memory file can be made, and read from there: every
commit is read (before, `stats` counted such a user as empty, 0 users and 0 messages, exit 0,
and `export` blamed a full disk). A file whose log holds nothing is read as it is on disk.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

from aml_retriever.common.errors import StorageFull, StoreError


class Unreadable(StoreError):
    """A user file that cannot be read here, nor through a copy: named as its cause."""


def in_memory(path: Path, cannot_copy: type[StorageFull | StoreError] = StoreError) -> sqlite3.Connection:
    """A connection to a copy in memory of the user file at `path`, with every commit its
    write-ahead log holds. Raises `cannot_copy` (StorageFull for a server, whose full disk
    it is; Unreadable for a command) when no copy can be made."""
    copy = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    try:
        wal = Path(f"{path}-wal")
        if wal.exists() and wal.stat().st_size > 0:
            _through_a_folder_of_its_own(path, wal, copy)
        else:
            _backup(sqlite3.connect(f"{path.as_uri()}?mode=ro&immutable=1", uri=True), copy)
    except (OSError, sqlite3.Error) as exc:
        copy.close()
        if cannot_copy is StorageFull:
            raise StorageFull("the store cannot write: its disk is full or a file reached its "
                              "size limit; try again once space is freed") from None
        raise Unreadable(f"a user file cannot be read here, nor copied to read it "
                         f"({type(exc).__name__}: {exc}); copy the store somewhere writable, "
                         "or read it where it was written") from None
    except BaseException:
        copy.close()
        raise
    return copy


def _through_a_folder_of_its_own(path: Path, wal: Path, copy: sqlite3.Connection) -> None:
    """The file and its log copied into a temporary folder and read there, into `copy`."""
    with tempfile.TemporaryDirectory(prefix="aml-read-") as folder:
        target = Path(folder) / "user.db"
        shutil.copyfile(path, target)
        shutil.copyfile(wal, f"{target}-wal")
        _backup(sqlite3.connect(target), copy)


def _backup(source: sqlite3.Connection, copy: sqlite3.Connection) -> None:
    try:
        source.backup(copy)
    finally:
        source.close()
