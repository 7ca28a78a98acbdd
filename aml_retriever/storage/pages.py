"""The page size of a user file. Every table and index of a user file takes a page at least, and
a file holds 29 of them: a user of one short message took 110,592 bytes at SQLite's default
4,096-byte page and takes 59,392 at 2,048 (docs/BENCHMARKS.md, with what it costs a Search and
an Add: nothing measurable). A new file is made with USER_PAGE_SIZE (pool.py); a file made
before keeps its page until `reindex` rewrites it (`resize`): SQLite fixes a file's page size
once it is in WAL mode, and only a VACUUM outside it changes it. `reindex` also compacts a file
much of which is free pages (`compact`)."""

from __future__ import annotations

import sqlite3

USER_PAGE_SIZE = 2048
# A file at least this share of whose pages are free is compacted by `reindex` (`compact`). A
# file written by Adds keeps about 7% free, left by FTS5's segment merges and taken again by the
# next ones (20 of a 1k-message user's 282 pages); an upgrade that copies a table leaves the old
# copy's pages free until writes take them again: shard migration 14, 2,955 of a 20,000-message
# user's 7,308 pages (9.8 MB -> 15.0 MB; 8.9 MB compacted).
COMPACT_FREE_SHARE = 0.25


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


def compact(conn: sqlite3.Connection) -> bool:
    """Rewrite a user file at least COMPACT_FREE_SHARE of whose pages are free without them
    (VACUUM in WAL mode: readers of other connections go on; it needs room for a copy of the
    file in its WAL, which the checkpoint then truncates). Whether it did."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    if free == 0 or free < pages * COMPACT_FREE_SHARE:
        return False
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return True
