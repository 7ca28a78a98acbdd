"""Which committed state of a user file a read sees: its *stamp*, for what a serving process
keeps of the file between Searches (engine/held.py) to be used only while the file is unchanged.

Every write transaction moves the file's generation (a count in `meta`, moved inside the write,
so it commits with it), whatever process writes; so does every migration. A read transaction
reads the generation of its own snapshot, with the file's secret (replaced when the user is
deleted) and the file's device and inode (a file removed and made again under its name is
another file): two reads with the same stamp see the same committed state. A file written before
the generation existed has none until its first write (0).
"""

from __future__ import annotations

import hashlib
import sqlite3
from typing import NamedTuple

# The `meta` key of the count every write moves.
GENERATION = "generation"


class Stamp(NamedTuple):
    """One committed state of one user file."""

    device: int
    inode: int
    secret: bytes  # a digest of the file's secret (never the secret itself)
    generation: int


def moved(conn: sqlite3.Connection, key: str = GENERATION) -> None:
    """Move a count in `meta` (the file's generation, or another: what a default read withholds,
    storage/timeline.py), inside the write transaction that changes what it counts."""
    conn.execute("INSERT INTO meta (key, value) VALUES (?, '1') ON CONFLICT (key) DO UPDATE SET "
                 "value = CAST(value AS INTEGER) + 1", (key,))


def stamp(conn: sqlite3.Connection, device: int, inode: int) -> Stamp:
    """The stamp of what a read transaction sees of the file at (device, inode): one lookup."""
    found = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('secret', ?)",
                              (GENERATION,)).fetchall())
    secret = hashlib.blake2b(str(found.get("secret", "")).encode(), digest_size=16).digest()
    return Stamp(device, inode, secret, int(found.get(GENERATION, 0)))
