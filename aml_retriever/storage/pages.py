"""The page size of a user file. Every table and index of a user file takes a page at least, and
a file holds 29 of them: a user of one short message took 110,592 bytes at SQLite's default
4,096-byte page and takes 59,392 at 2,048 (docs/BENCHMARKS.md, with what it costs a Search and
an Add: nothing measurable). A new file is made with USER_PAGE_SIZE (pool.py); a file made
before keeps its page until `reindex` rewrites it (`resize`): SQLite fixes a file's page size
once it is in WAL mode, and only a VACUUM outside it changes it."""

from __future__ import annotations

import sqlite3

USER_PAGE_SIZE = 2048


def resize(conn: sqlite3.Connection) -> bool:
    """Rewrite a user file made with another page size with USER_PAGE_SIZE (VACUUM, out of WAL
    mode and back; it needs the file to itself and room for a copy of it). Whether it did."""
    if conn.execute("PRAGMA page_size").fetchone()[0] == USER_PAGE_SIZE:
        return False
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")
    try:
        conn.execute(f"PRAGMA page_size = {USER_PAGE_SIZE}")
        conn.execute("VACUUM")
    finally:
        conn.execute("PRAGMA journal_mode = WAL")
    return True
