"""Bringing a file of the store to this version's schema, the SQL of which is in `migrations`.

A new file is made from the current schema and stamped with what it is and which index settings
build it; an older one runs the migrations it has not had, in one transaction; a file that is
not ours, or was written by a newer version, is refused. The catalog and every user file take the
same steps: what differs between them is a `FileKind`.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from aml_retriever import __version__
from aml_retriever.analysis.sequence import request_order
from aml_retriever.common.errors import StoreError
from aml_retriever.storage import generation
from aml_retriever.storage.migrations import (
    CATALOG_MIGRATIONS,
    CATALOG_SCHEMA,
    KEYS_FUNCTION,
    ORDER_FUNCTION,
    SHARD_FORMAT,
    SHARD_MIGRATIONS,
    SHARD_SCHEMA,
    STORE_FORMAT,
    signal_keys_of,
)


class ForeignFile(StoreError):
    """A SQLite file that this program did not write, where one of the store's should be."""


class NewerFile(StoreError):
    """A file of the store written by a newer version of this program."""


@dataclass(frozen=True)
class FileKind:
    """A kind of file of a store: its migrations, the schema a new one is made from, the format
    its `meta` table names, and what a refusal calls it."""

    migrations: tuple[str, ...]
    schema: str
    format: str
    name: str

    @property
    def version(self) -> int:
        """The `PRAGMA user_version` of a file that has had every migration."""
        return len(self.migrations)


CATALOG = FileKind(CATALOG_MIGRATIONS, CATALOG_SCHEMA, STORE_FORMAT, "store")
USER_FILE = FileKind(SHARD_MIGRATIONS, SHARD_SCHEMA, SHARD_FORMAT, "user file")


class Schema:
    """Brings the files of one store to the current schema; every refusal names the store (its
    catalog's path), whichever of its files was refused."""

    def __init__(self, path: Path, index_identity: str) -> None:
        self.path = path
        self.index_identity = index_identity

    def migrate(self, conn: sqlite3.Connection, kind: FileKind) -> None:
        """Make a new file from the current schema, bring an older one to it through the
        migrations it has not had, or refuse a file that is not ours or is newer. A file
        already current is only read, so a store on a full disk still opens (for reads)."""
        if _user_version(conn) == kind.version:
            self._check_format(conn, kind)
            return
        conn.create_function(KEYS_FUNCTION, 1, signal_keys_of, deterministic=True)
        conn.create_function(ORDER_FUNCTION, 1, request_order, deterministic=True)
        conn.execute("BEGIN IMMEDIATE")
        try:
            self._upgrade(conn, kind)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite rolls back by itself on some errors (a full disk)
                conn.execute("ROLLBACK")
            raise

    def bring_user_file(self, conn: sqlite3.Connection, path: Path, create: bool) -> bool:
        """Bring a user file just opened to the current schema (a new one only when `create`).
        False when it is not a user file yet: created by a concurrent first Add that has not
        committed."""
        version = _user_version(conn)
        if version < USER_FILE.version and (create or version > 0):
            self.migrate(conn, USER_FILE)
        elif version == 0:
            return False
        elif version > USER_FILE.version:
            raise NewerFile(f"{path} was written by a newer aml_retriever; upgrade", "db")
        return True

    def _upgrade(self, conn: sqlite3.Connection, kind: FileKind) -> None:
        """The migration itself, inside the caller's write transaction."""
        version = _user_version(conn)
        has_tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0
        if version == 0 and has_tables:
            raise ForeignFile(f"{self.path} is a SQLite file but not an aml_retriever {kind.name}",
                              "db")
        if version > kind.version:
            raise NewerFile(f"{self.path} was written by a newer aml_retriever (schema "
                            f"{version}, this version knows {kind.version}); upgrade", "db")
        if version > 0:
            self._check_format(conn, kind)
        for script in [kind.schema] if version == 0 else kind.migrations[version:]:
            for statement in _statements(script):
                conn.execute(statement)
        if version == 0:
            conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", [
                ("format", kind.format), ("index_identity", self.index_identity),
                ("created_by", __version__), ("created_ms", str(int(time.time() * 1000)))])
        if kind is USER_FILE:
            generation.moved(conn)  # what any process held of it was of the file before
        conn.execute(f"PRAGMA user_version = {kind.version}")

    def _check_format(self, conn: sqlite3.Connection, kind: FileKind) -> None:
        found = conn.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
        if not found or found[0] != kind.format:
            raise ForeignFile(f"{self.path} is not an aml_retriever {kind.name}", "db")


def _user_version(conn: sqlite3.Connection) -> int:
    """How many migrations a file has had (0: a new file, or not ours)."""
    return conn.execute("PRAGMA user_version").fetchone()[0]


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
