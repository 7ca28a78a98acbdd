"""A copy of a whole store, made while it serves: the catalog and every user file, each through
SQLite's online backup API.

Each file is copied in one step of the backup API, inside one read transaction of its own: the copy
is the file as one committed state (every Add in it whole, none half), whatever writers do
meanwhile (in WAL mode readers do not block them). Users are independent files, so the copy of one
may be a moment later than another's; nothing links two users' files. Files set aside as damaged
(quarantine) are not copied. The copy is an ordinary store: serve it, or copy it back.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any, Protocol

from aml_retriever.common.errors import InvalidField
from aml_retriever.storage import resources


class Counted(Protocol):
    """What follows a copy's progress (cli's progress line): the files to copy, each one done."""

    total: int

    def step(self, done: int) -> None: ...


def backup(catalog: Path, to: Path, progress: Counted | None = None) -> dict[str, Any]:
    """Copy the store whose catalog is `catalog` into directory `to` (made if absent), under the
    same names. Refuses to write over a store already there."""
    target = to / catalog.name
    users = Path(f"{catalog}.users")
    target_users = Path(f"{target}.users")
    if target.exists() or target_users.exists():
        raise InvalidField(f"--to {to}: a store is already there ({target.name}); choose an empty "
                           "directory", "to")
    to.mkdir(parents=True, exist_ok=True)
    copied = _copy(catalog, target)
    files = 0
    paths = sorted(users.glob("??/*.db"))
    if progress is not None:
        progress.total = len(paths)
    for done, path in enumerate(paths, 1):
        destination = target_users / path.parent.name / path.name
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            copied += _copy(path, destination)
        except FileNotFoundError:  # moved aside as damaged meanwhile
            continue
        files += 1
        if progress is not None:
            progress.step(done)
    return {"success": True, "to": str(target), "user_files": files, "bytes": copied}


def _copy(source: Path, destination: Path) -> int:
    """One file, as one committed state, through the backup API; returns the bytes written."""
    if not source.exists():
        raise FileNotFoundError(source)
    src = sqlite3.connect(f"{source.as_uri()}?mode=ro", uri=True)
    try:
        dst = sqlite3.connect(destination)
        try:
            src.backup(dst)  # pages=-1: the whole file in one step, one read transaction
            # The copy keeps the source's WAL mode; fold its log in so it is one file at rest.
            dst.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            dst.close()
    except sqlite3.OperationalError:
        if resources.out_of_descriptors():
            raise resources.overloaded() from None
        raise
    finally:
        src.close()
    return os.path.getsize(destination)
