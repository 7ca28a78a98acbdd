"""Read and write transactions on a user file's connection.

Writes take `BEGIN IMMEDIATE` so the idempotency check and the insert are one serialised step.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from aml_retriever.common.errors import Overloaded


@contextmanager
def write(conn: sqlite3.Connection, committed: Callable[[sqlite3.Connection], None],
          current: Callable[[sqlite3.Connection], bool] = lambda conn: True
          ) -> Iterator[sqlite3.Connection]:
    """One write transaction, taken up front so concurrent writers of a user serialise.
    The caller acknowledges only after this block returns: the commit is durable then.
    `committed` is told of the connection after the commit (its file now needs a checkpoint).
    `current`: whether the connection's file is still the user's (pool.Connections.current),
    asked once the write lock is held: a write to a file removed meanwhile would be lost, so
    it is refused, 503 to retry, and nothing is acknowledged."""
    conn.execute("BEGIN IMMEDIATE")
    if not current(conn):
        conn.execute("ROLLBACK")
        raise Overloaded("the user's file was removed while this request waited; retry")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    committed(conn)


@contextmanager
def read(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One read transaction: every query inside sees the same committed snapshot."""
    conn.execute("BEGIN")
    try:
        yield conn
    finally:
        conn.execute("COMMIT")
