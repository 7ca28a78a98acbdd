"""The gate between opening a user file and removing it.

A deletion unlinks a user's emptied file when no connection holds it (user_files.py), which it
learns from the lock every connection to a WAL file holds on that file's shared memory. A
connection being opened holds that lock only from its first read: an unlink in between leaves
the opener on a file no path names (an Add racing deletions answered 500, 1 of 133 in a run of
the suite), and its first write would make a new WAL under the old name, which the next file
made there would read as its own. So the opening of a file, up to its first read, and every
removal of it (a deletion's unlink, a full disk's, a damaged file set aside) pass through one
gate: a lock per stripe of files,
held by the threads of a process (a threading lock) and by the processes of a store (a lock
on a byte of `opening.lock` beside the user files, shared by openers, exclusive to a remover).
"""

from __future__ import annotations

import fcntl
import os
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Files that share a lock: an opening waits only for the removal (or, within one process, the
# opening) of a file in its stripe; an opening takes 0.2-2 ms, a removal less.
STRIPES = 64
GATE_FILE = "opening.lock"


class Gate:
    """One store's gate, shared by every Store object of a process on that store (`gate_for`):
    a process's locks on a file all go when any of its descriptors to that file closes, so it
    keeps exactly one."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._threads = [threading.Lock() for _ in range(STRIPES)]
        self._fd: int | None = None
        self._fd_lock = threading.Lock()

    @contextmanager
    def opening(self, path: Path) -> Iterator[None]:
        with self._held(path, fcntl.LOCK_SH):
            yield

    @contextmanager
    def removing(self, path: Path) -> Iterator[None]:
        with self._held(path, fcntl.LOCK_EX):
            yield

    @contextmanager
    def _held(self, path: Path, kind: int) -> Iterator[None]:
        stripe = zlib.crc32(path.name.encode()) % STRIPES
        with self._threads[stripe]:
            fd = self._descriptor()
            if fd is None:
                yield
                return
            fcntl.lockf(fd, kind, 1, stripe)
            try:
                yield
            finally:
                fcntl.lockf(fd, fcntl.LOCK_UN, 1, stripe)

    def _descriptor(self) -> int | None:
        """The lock file, opened on first use (the folder is made after the store is opened);
        None where it cannot be made (a full disk): the threads of this process are still kept
        apart, and the next use tries again."""
        with self._fd_lock:
            if self._fd is None:
                try:
                    self._fd = os.open(self._folder / GATE_FILE, os.O_RDWR | os.O_CREAT, 0o600)
                except OSError:
                    return None
            return self._fd


_gates: dict[str, Gate] = {}
_gates_lock = threading.Lock()


def gate_for(folder: Path) -> Gate:
    """The gate of the user files in `folder`, one per process."""
    key = os.path.realpath(folder)
    with _gates_lock:
        if key not in _gates:
            _gates[key] = Gate(Path(key))
        return _gates[key]
