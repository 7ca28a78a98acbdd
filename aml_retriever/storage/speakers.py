"""The speakers of a user's conversation as the user's file keeps them (shard migration 9).

- `speaker_mentions`: every name a message gives a role (analysis/speakers.py: a name addressed
  is given to the side addressed, a self-introduction to the speaker's own role): the evidence
  behind each name, by message, so a forgotten message takes its evidence with it.
- `speaker_names`: how often each name is given to each role, by kind: what a Search and the
  inspector read (a handful of rows) to attach names to roles (speakers.attach).
- `roles`: how many of each role's messages name no speaker in their own text (no "Name: "
  prefix): the messages a name attached to the role is said in, as a Search counts them.

Written in the Add's transaction, in time linear in the Add's text; a reindex writes them anew.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from aml_retriever.analysis.features import GENERIC_ROLES
from aml_retriever.analysis.speakers import ADDRESSED, INTRODUCED, Evidence, Mention, Speakers, attach

# How far back along the conversation a name addressed looks for the side it addresses (the
# nearest earlier message of another role); past it, the mention is not recorded.
LOOK_BACK = 8
# Most rows of `speaker_names` one reading takes: a memory with thousands of names costs a
# Search a bounded read, the most mentioned first.
MOST_NAMES = 2000


def speaks_in_text(role: str, written_speaker: str) -> bool:
    """Whether a message names its speaker in its own text: a generic role whose content opens
    with "Name: " (features.speaker_of read one)."""
    return bool(written_speaker) and role.strip().lower() in GENERIC_ROLES


class SpeakerRecorder:
    """Records the speakers of one Add's (or one rebuild's) messages, in conversation order,
    written in three statements at `finish` (a statement a message cost short Adds a third of
    their time)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._roles: dict[int, tuple[str, int | None]] = {}  # recorded: id -> (role, prev_id)
        self._unnamed: dict[str, int] = {}
        self._mentions: list[tuple[int, str, str, str]] = []
        self._names: dict[tuple[str, str], list[Any]] = {}  # (name, role) -> [addressed, introduced, written]

    def record(self, message_id: int, role: str, prev_id: int | None, in_text: bool,
               found: Sequence[Mention], answered_by: str | None = None) -> None:
        """One message: its mentions, given to the role each names, and its role's count.
        `answered_by`: the next role after this message's in its Add, if another's."""
        self._roles[message_id] = (role, prev_id)
        if not in_text:
            self._unnamed[role] = self._unnamed.get(role, 0) + 1
        if not found:
            return
        addressed = (self._addressee(role, prev_id, answered_by)
                     if any(m.kind == ADDRESSED for m in found) else None)
        for mention in found:
            to = role if mention.kind == INTRODUCED else addressed
            if to is None:
                continue
            self._mentions.append((message_id, mention.name, to, mention.kind))
            counts = self._names.setdefault((mention.name, to), [0, 0, mention.written])
            counts[mention.kind == INTRODUCED] += 1

    def finish(self) -> None:
        """Write what was recorded: the mentions, the names' counts, the roles' counts."""
        self.conn.executemany("INSERT OR IGNORE INTO speaker_mentions (message_id, name, role, kind) "
                              "VALUES (?, ?, ?, ?)", self._mentions)
        self.conn.executemany(
            "INSERT INTO speaker_names (name, role, addressed, introduced, written) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (name, role) DO UPDATE SET "
            "addressed = addressed + excluded.addressed, introduced = introduced + excluded.introduced",
            [(name, role, *counts) for (name, role), counts in sorted(self._names.items())])
        self.conn.executemany(
            "INSERT INTO roles (role, unnamed) VALUES (?, ?) "
            "ON CONFLICT (role) DO UPDATE SET unnamed = unnamed + excluded.unnamed",
            sorted(self._unnamed.items()))
        self._mentions.clear()
        self._names.clear()
        self._unnamed.clear()

    def _addressee(self, role: str, prev_id: int | None, answered_by: str | None) -> str | None:
        """The role a name addressed in a message of `role` is given to: the nearest earlier
        message's of another role in its session (people answer who spoke last); opening a
        session ("Hey Mel!"), the role that answers it in the same Add, else the latest other
        role of the user's memory."""
        step = prev_id
        for _ in range(LOOK_BACK):
            if step is None:
                break
            other = self._role_of(step)
            if other is None:
                break
            if other[0] != role:
                return other[0]
            step = other[1]
        if prev_id is not None:
            return None
        if answered_by is not None:
            return answered_by
        latest = self.conn.execute(
            "SELECT role FROM (SELECT role FROM messages ORDER BY id DESC LIMIT ?) "
            "WHERE role != ? LIMIT 1", (LOOK_BACK, role)).fetchone()
        return latest[0] if latest else None

    def _role_of(self, message_id: int) -> tuple[str, int | None] | None:
        """A message's role and its predecessor: this Add's from memory, a stored one's read."""
        if message_id in self._roles:
            return self._roles[message_id]
        row = self.conn.execute("SELECT role, prev_id FROM messages WHERE id = ?",
                                (message_id,)).fetchone()
        return (row[0], row[1]) if row else None


def forget(conn: sqlite3.Connection, removed: Iterable[tuple[int, str, bool]]) -> None:
    """Take back what removed messages gave, each as (id, role, whether its text names its
    speaker): their mentions, their names' counts, their roles' counts."""
    removed = list(removed)
    for message_id, role, in_text in removed:
        for name, to, kind in conn.execute("SELECT name, role, kind FROM speaker_mentions "
                                           "WHERE message_id = ?", (message_id,)).fetchall():
            column = "addressed" if kind == ADDRESSED else "introduced"
            conn.execute(f"UPDATE speaker_names SET {column} = {column} - 1 "
                         "WHERE name = ? AND role = ?", (name, to))
        conn.execute("DELETE FROM speaker_mentions WHERE message_id = ?", (message_id,))
        if not in_text:
            conn.execute("UPDATE roles SET unnamed = unnamed - 1 WHERE role = ?", (role,))
    conn.execute("DELETE FROM speaker_names WHERE addressed <= 0 AND introduced <= 0")
    conn.execute("DELETE FROM roles WHERE unnamed <= 0")


def clear(conn: sqlite3.Connection) -> None:
    """Every speaker row gone (a reindex writes them anew; a deletion erases the user)."""
    for table in ("speaker_mentions", "speaker_names", "roles"):
        conn.execute(f"DELETE FROM {table}")


def any_named(conn: sqlite3.Connection, names: Iterable[str]) -> bool:
    """Whether this memory gives a role any of these names, or a name one of them shortens or
    that shortens one (speakers.Speakers.role_of): most questions name none."""
    wanted = sorted(set(names))
    shorter = sorted({name[:end] for name in wanted for end in range(3, len(name))})
    longer = [name + "*" for name in wanted if len(name) >= 3]
    clauses = " OR ".join(["name IN (" + ",".join("?" * len(wanted + shorter)) + ")"]
                          + ["name GLOB ?"] * len(longer))
    return bool(wanted) and conn.execute(f"SELECT 1 FROM speaker_names WHERE {clauses} LIMIT 1",
                                         wanted + shorter + longer).fetchone() is not None


def read(conn: sqlite3.Connection) -> Speakers:
    """The names attached to roles in this user's memory (the MOST_NAMES most mentioned)."""
    return attach(Evidence(*row) for row in conn.execute(
        "SELECT name, role, addressed, introduced, written FROM speaker_names "
        "ORDER BY addressed + introduced DESC, name, role LIMIT ?", (MOST_NAMES,)))


def unnamed(conn: sqlite3.Connection, role: str) -> int:
    """How many of a role's messages name no speaker in their own text."""
    row = conn.execute("SELECT unnamed FROM roles WHERE role = ?", (role,)).fetchone()
    return row[0] if row else 0


def evidence_of(conn: sqlite3.Connection, name: str, limit: int) -> list[tuple[int, str, str]]:
    """The first `limit` messages that give a name, as (message id, role, kind), oldest first."""
    return conn.execute("SELECT message_id, role, kind FROM speaker_mentions WHERE name = ? "
                        "ORDER BY message_id LIMIT ?", (name, limit)).fetchall()
