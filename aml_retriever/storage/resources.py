"""What the machine or a file can refuse, named as its cause: a full disk or a file-size limit
(507 storage_full), no file descriptors left (429 overloaded, answered at once), a damaged user
file (503 user_store_damaged). Never an internal error, and never a message with a path in it: a
caller learns what happened and when to try again, not where the store lives.

SQLite reports these as result codes (`sqlite_errorcode`); the operating system as errno values
where the service touches files itself (making a user's directory).
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from aml_retriever.common.errors import AmlError, Overloaded, StorageFull, UserStoreDamaged

# A write past RLIMIT_FSIZE fails with EFBIG (the SIGXFSZ that would kill the process is
# ignored at start-up, see app.py); SQLite reports a short write as SQLITE_FULL and a failed one
# as an I/O error.
_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_NO_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE})
FILE_DESCRIPTORS_A_FILE_NEEDS = 3  # a SQLite file in WAL mode: the file, -wal and -shm


def primary(exc: sqlite3.Error) -> int | None:
    """SQLite's primary result code of an error (the extended code's low byte)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def damaged() -> UserStoreDamaged:
    return UserStoreDamaged("this user's stored data is damaged and was set aside; the user can "
                            "be deleted (DELETE /users/{user_id}) to start again, or an operator "
                            "can restore it (docs/RELIABILITY.md)", "user_id")


def storage_full() -> StorageFull:
    return StorageFull("the store cannot write: its disk is full or a file reached its size "
                       "limit; try again once space is freed")


def overloaded() -> Overloaded:
    return Overloaded("the server has no file descriptors left for this request; try again")


def cause(exc: BaseException) -> AmlError | None:
    """The documented error a low-level failure stands for, or None when it is none of these."""
    if isinstance(exc, OSError) and not isinstance(exc, sqlite3.Error):
        if exc.errno in _NO_SPACE:
            return storage_full()
        return overloaded() if exc.errno in _NO_DESCRIPTORS else None
    if not isinstance(exc, sqlite3.Error):
        return None
    code = primary(exc)
    if code in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return damaged()
    if code in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR):
        return storage_full()
    if code == sqlite3.SQLITE_CANTOPEN and out_of_descriptors():
        return overloaded()
    return None


def out_of_descriptors() -> bool:
    """Whether this process is short of file descriptors right now (SQLite's "unable to open"
    does not say why): fewer free than a user file needs (itself, its WAL, its shared memory)."""
    opened: list[int] = []
    try:
        for _ in range(FILE_DESCRIPTORS_A_FILE_NEEDS):
            opened.append(os.open(os.devnull, os.O_RDONLY))
    except OSError as exc:
        return exc.errno in _NO_DESCRIPTORS
    finally:
        for fd in opened:
            os.close(fd)
    return False


def read_only_uri(path: Path) -> str:
    """The URI a file is opened read only by. Where its folder may not be written (a read-only
    mount, another user's store) SQLite cannot make the shared-memory file even a read-only
    open of a WAL file needs: the file is then read as it is on disk (`immutable`), which is
    all of it when its write-ahead log holds nothing (a log that does, it cannot read)."""
    wal = Path(f"{path}-wal")
    if os.access(path.parent, os.W_OK) or (wal.exists() and wal.stat().st_size > 0):
        return f"{path.as_uri()}?mode=ro"
    return f"{path.as_uri()}?mode=ro&immutable=1"
