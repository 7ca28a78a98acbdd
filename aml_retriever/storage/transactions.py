"""Read and write transactions on a user file's connection.

Writes take `BEGIN IMMEDIATE` so the idempotency check and the insert are one serialised step.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from aml_retriever.storage import generation


@contextmanager
def write(conn: sqlite3.Connection, committed: Callable[[sqlite3.Connection], None],
          writable: Callable[[sqlite3.Connection], None] = lambda conn: None
          ) -> Iterator[sqlite3.Connection]:
    """One write transaction, taken up front so concurrent writers of a user serialise.
    The caller acknowledges only after this block returns: the commit is durable then.
    `committed` is told of the connection after the commit (its file now needs a checkpoint).
    `writable` refuses a write that could not be kept (pool.Connections.check_writable), asked
    once the write lock is held: to a file removed meanwhile (429 to retry), to a copy in
    memory of a file a full disk left at an earlier schema (507); nothing is acknowledged.
    Every write moves the file's generation (generation.py), so no process serves what it held
    of the file before it."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        writable(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    changes = conn.total_changes
    try:
        yield conn
        if conn.total_changes != changes:  # a replayed Add writes nothing and moves nothing
            generation.moved(conn)
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
