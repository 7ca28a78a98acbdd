"""The speakers of a user's conversation as the user's file keeps them (shard migration 9).

- `speaker_mentions`: every name a message gives a role (analysis/speakers.py: a name addressed
  is given to the side addressed, a self-introduction to the speaker's own role), one row a
  message, name and role, its kind `addressed`, `opening` (only as the message's first word) or
  `introduced`: the evidence behind each name, by message, so a forgotten message takes its
  evidence with it.
- `speaker_names`: how many messages give each name to each role, by kind (`opening` counted as
  addressed): what a Search and the inspector read (a handful of rows) to attach names to roles
  (speakers.attach), with, for the few names given mostly to one role, their openers and
  sessions (`speaker_mentions`) and how the texts that hold the word write it (`usage`).
- `roles`: how many of each role's messages name no speaker in their own text (no "Name: "
  prefix): the messages a name attached to the role is said in, as a Search counts them.

Written in the Add's transaction, in time linear in the Add's text; a reindex writes them anew.
Who a name addressed is given to depends only on the session's conversation order (`addressees`),
never on the order its Adds arrived in: a session whose order an Add changed, or whose opener may
now be answered, has its mentions derived again (memory/derived.py).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

from aml_retriever.analysis.features import GENERIC_ROLES
from aml_retriever.analysis.speakers import (
    INTRODUCED,
    OPENING,
    Evidence,
    Mention,
    Speakers,
    Usage,
    attach,
    claims,
    usage_of,
    written_order,
)
from aml_retriever.analysis.tokenizer import quote, words_of

# How far back along the conversation a name addressed looks for the side it addresses (the
# nearest earlier message of another role), and how far ahead an opener looks for the side that
# answers it; past it, the mention is not recorded.
LOOK_BACK = 8
# Most rows of `speaker_names` one reading takes: a memory with thousands of names costs a
# Search a bounded read, the most mentioned first.
MOST_NAMES = 2000
# Most names a reading checks against the texts (`usage`), the most given first: LoCoMo dev's
# conversations give 2 to 6 names to one role mostly, BEAM dev's at most 8; a name past them
# still counts as a possible second person of its role, so a memory of a thousand names
# attaches none rather than reading a thousand words' messages.
CHECKED = 24
# Most messages holding a word read to see how the chat writes it, the first in conversation
# order (time, session, Add, order in it: the same whatever order the Adds arrived in). LoCoMo
# dev's names are held by at most 215 messages each; a common word ("will") by thousands, of
# which these show enough.
SAMPLE = 256


def speaks_in_text(role: str, written_speaker: str) -> bool:
    """Whether a message names its speaker in its own text: a generic role whose content opens
    with "Name: " (features.speaker_of read one)."""
    return bool(written_speaker) and role.strip().lower() in GENERIC_ROLES


def addressees(roles: Sequence[str]) -> list[str | None]:
    """For a session's messages' roles in conversation order, the role each addresses: the
    nearest earlier message's of another role, at most LOOK_BACK back (people answer who spoke
    last); the session's opener ("Hey Mel!"), the first later role that is another, at most
    LOOK_BACK ahead (who answers it). None where there is none: unnamed is better than wrong."""
    found: list[str | None] = []
    for at, role in enumerate(roles):
        looked = roles[max(0, at - LOOK_BACK):at][::-1] if at else roles[1:LOOK_BACK + 1]
        found.append(next((other for other in looked if other != role), None))
    return found


class SpeakerRecorder:
    """Records the speakers of one Add's (or one rebuild's) messages, written in three
    statements at `finish` (a statement a message cost short Adds a third of their time)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self._unnamed: dict[str, int] = {}
        self._mentions: list[tuple[int, str, str, str]] = []
        self._given: set[tuple[int, str, str]] = set()  # (message, name, role): one vote a message
        self._names: dict[tuple[str, str], list[Any]] = {}  # (name, role) -> [addressed, introduced, written]

    def count(self, role: str, in_text: bool) -> None:
        """A new message of `role`: counted among its role's messages when its text names no
        speaker of its own."""
        if not in_text:
            self._unnamed[role] = self._unnamed.get(role, 0) + 1

    def mention(self, message_id: int, role: str, found: Sequence[Mention],
                addressee: str | None) -> None:
        """One message's mentions: a name introduced given to its own role, a name addressed to
        `addressee` (none recorded without one); a name given twice to one role by one message
        counts once."""
        for mention in found:
            to = role if mention.kind == INTRODUCED else addressee
            if to is None or (message_id, mention.name, to) in self._given:
                continue
            self._given.add((message_id, mention.name, to))
            self._mentions.append((message_id, mention.name, to, mention.kind))
            counts = self._names.setdefault((mention.name, to), [0, 0, mention.written])
            counts[mention.kind == INTRODUCED] += 1
            counts[2] = min(counts[2], mention.written, key=written_order)

    def finish(self) -> None:
        """Write what was recorded: the mentions, the names' counts, the roles' counts. The form
        a name is shown in is the same whatever order its mentions came in (`written_order`)."""
        self.conn.executemany("INSERT OR IGNORE INTO speaker_mentions (message_id, name, role, kind) "
                              "VALUES (?, ?, ?, ?)", self._mentions)
        self.conn.executemany(
            "INSERT INTO speaker_names (name, role, addressed, introduced, written) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (name, role) DO UPDATE SET "
            "addressed = addressed + excluded.addressed, introduced = introduced + excluded.introduced, "
            f"written = CASE WHEN {_WRITTEN_KEY.format('excluded.written')} < "
            f"{_WRITTEN_KEY.format('written')} THEN excluded.written ELSE written END",
            [(name, role, *counts) for (name, role), counts in sorted(self._names.items())])
        self.conn.executemany(
            "INSERT INTO roles (role, unnamed) VALUES (?, ?) "
            "ON CONFLICT (role) DO UPDATE SET unnamed = unnamed + excluded.unnamed",
            sorted(self._unnamed.items()))
        self._mentions.clear()
        self._given.clear()
        self._names.clear()
        self._unnamed.clear()


# `speakers.written_order` in SQL, over a column or value named at {0}.
_WRITTEN_KEY = "(substr({0}, 2) != lower(substr({0}, 2))) || {0}"


def retract_mentions(conn: sqlite3.Connection, message_ids: Iterable[int]) -> None:
    """Take back the names these messages gave (their mentions and those names' counts): the
    messages stay (forget takes their roles' counts too; a session derived again records its
    mentions anew)."""
    for message_id in message_ids:
        for name, to, kind in conn.execute("SELECT name, role, kind FROM speaker_mentions "
                                           "WHERE message_id = ?", (message_id,)).fetchall():
            column = "introduced" if kind == INTRODUCED else "addressed"
            conn.execute(f"UPDATE speaker_names SET {column} = {column} - 1 "
                         "WHERE name = ? AND role = ?", (name, to))
        conn.execute("DELETE FROM speaker_mentions WHERE message_id = ?", (message_id,))
    conn.execute("DELETE FROM speaker_names WHERE addressed <= 0 AND introduced <= 0")


def forget(conn: sqlite3.Connection, removed: Iterable[tuple[int, str, bool]]) -> None:
    """Take back what removed messages gave, each as (id, role, whether its text names its
    speaker): their mentions, their names' counts, their roles' counts."""
    removed = list(removed)
    retract_mentions(conn, [message_id for message_id, _, _ in removed])
    for _, role, in_text in removed:
        if not in_text:
            conn.execute("UPDATE roles SET unnamed = unnamed - 1 WHERE role = ?", (role,))
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
    """The names attached to roles in this user's memory (the MOST_NAMES most mentioned; the
    CHECKED most given to one role read against their messages: speakers.attach)."""
    rows = [Evidence(*row) for row in conn.execute(
        "SELECT name, role, addressed, introduced, written FROM speaker_names "
        "ORDER BY addressed + introduced DESC, name, role LIMIT ?", (MOST_NAMES,))]
    checked = claims(rows)[:CHECKED]
    given = _openers_and_sessions(conn, [claim.name for claim in checked])
    rows = [Evidence(e.name, e.role, e.addressed, e.introduced, e.written,
                     *given.get((e.name, e.role), (0, 0))) for e in rows]
    return attach(rows, {claim.name: usage(conn, claim.name, claim.written) for claim in checked})


def _openers_and_sessions(conn: sqlite3.Connection,
                          names: list[str]) -> dict[tuple[str, str], tuple[int, int]]:
    """For each of these names and each role it is given: how many of the messages that give
    it give it only as their first word, and in how many sessions it is given."""
    if not names:
        return {}
    return {(name, role): (openers, sessions) for name, role, openers, sessions in conn.execute(
        "SELECT g.name, g.role, sum(g.kind = ?), count(DISTINCT m.session_id) "
        "FROM speaker_mentions g JOIN messages m ON m.id = g.message_id "
        f"WHERE g.name IN ({','.join('?' * len(names))}) GROUP BY g.name, g.role",
        [OPENING, *names])}


def usage(conn: sqlite3.Connection, name: str, written: str) -> Usage:
    """How the messages holding the word `name` write it (speakers.usage_of): the SAMPLE first
    in conversation order of those the full-text index finds it in, each with whether it gives
    the name to a role."""
    words = words_of(name)
    if not words:
        return Usage()
    found = [rowid for (rowid,) in conn.execute(
        "SELECT rowid FROM message_index WHERE message_index MATCH ?",
        (f"words : {quote(' '.join(words))}",))]
    listed = json.dumps(found)
    if len(found) > SAMPLE:
        listed = json.dumps([message_id for (message_id,) in conn.execute(
            "SELECT id FROM messages WHERE id IN (SELECT value FROM json_each(?)) "
            "ORDER BY timestamp_ms, session_id, said, id LIMIT ?", (listed, SAMPLE))])
    return usage_of(name, written, conn.execute(
        "SELECT content, EXISTS (SELECT 1 FROM speaker_mentions WHERE message_id = m.id "
        "AND name = ?) FROM messages m WHERE id IN (SELECT value FROM json_each(?)) "
        "ORDER BY timestamp_ms, session_id, said, id", (name, listed)))


def unnamed(conn: sqlite3.Connection, role: str) -> int:
    """How many of a role's messages name no speaker in their own text."""
    row = conn.execute("SELECT unnamed FROM roles WHERE role = ?", (role,)).fetchone()
    return row[0] if row else 0


def evidence_of(conn: sqlite3.Connection, name: str, limit: int) -> list[tuple[int, str, str]]:
    """The first `limit` messages that give a name, as (message id, role, kind), oldest first."""
    return conn.execute("SELECT message_id, role, kind FROM speaker_mentions WHERE name = ? "
                        "ORDER BY message_id LIMIT ?", (name, limit)).fetchall()
