"""The life of one statement in an agent's memory: remembered, replayed, replaced, confirmed or
rejected, forgotten, and what each leaves behind.

- Replay: a statement equal to a current one up to case, Unicode normalisation and whitespace
  is the same statement; remembering it again returns the stored one (with a note when the kind
  differs: kinds change through `update`, so a replay never rewrites what was stored).
- Supersession: `update` stores the new text and links the old version to it (`superseded_by`,
  `retired_ms`); the old one leaves default reads but stays for history and `as_of` reads.
- Tombstones: forgetting or rejecting a statement leaves its keyed text hash; remembering the
  same text again is refused unless the caller says it is intended (`force`).
- Trust: a statement an agent inferred (origin 'agent') is 'proposed' until a person confirms
  it (or rejects it, which forgets it and leaves a tombstone).
- Event time: a statement that names the date it became true ("Since March 2024 ...") is true
  from that date; otherwise from when it was remembered.

Every change is one write transaction that also appends its audit event (audit.py), so the
memory and its log never disagree. The HTTP Add path shares the same tables (writes.py).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import re
import secrets
import sqlite3
import time
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from aml_retriever.analysis.dates import extract_dates
from aml_retriever.common.errors import AmlError, NotFound
from aml_retriever.memory.reads import MESSAGE_COLUMNS, message_row
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import AddRequest, Message
from aml_retriever.memory.writes import Stamp
from aml_retriever.storage import audit
from aml_retriever.storage.timeline import withheld_changed

ORIGINS = ("user", "agent")
# A date as ISO 8601 writes it: a year with its month, and perhaps its day.
_ISO_DATE = re.compile(r"(?<![\d.-])(?:19|20)\d\d-[01]\d(?:-[0-3]\d)?(?![\d.-])")
_RESOLVED = re.compile(r"\d{4}(-\d{2}(-\d{2})?)?")  # what dates.py returns: a year, month or day
# The request id prefix of a stored statement; the rest is random (a statement's identity is its
# text hash, checked inside the write, so the request id needs only to be new).
STATEMENT_REQUEST = "statement-"


class Tombstoned(AmlError):
    """The text was forgotten or rejected before: remembering it again needs `force`."""

    status = 409
    code = "tombstoned"


class Replaced(AmlError):
    """An update names a version that a later one has already replaced."""

    status = 409
    code = "replaced"


class NotProposed(AmlError):
    """A review names a statement that is not awaiting one (a person confirmed it already)."""

    status = 409
    code = "not_proposed"


def dedup_form(content: str) -> str:
    """What makes two statements the same one: Unicode NFC, case folded, whitespace runs as one
    space, no surrounding whitespace. Punctuation is kept: it can change what is said."""
    folded = unicodedata.normalize("NFC", unicodedata.normalize("NFC", content).casefold())
    return " ".join(folded.split())


def fingerprint(key: bytes, content: str) -> bytes:
    """A statement's keyed text hash (128 bits): finds replays and tombstones without the text."""
    data = dedup_form(content).encode("utf-8", "surrogatepass")
    return hmac.new(key, b"statement\0" + data, hashlib.sha256).digest()[:16]


def stated_date_ms(content: str, remembered_ms: int) -> int | None:
    """When the statement says it became true: the first date it names, an ISO one as written
    ("As of 2024-06") or one dates.py reads ("Since March 2024"), if not later than it was
    remembered (a later date is a plan, not when something became true)."""
    iso = _ISO_DATE.search(content)
    named = [d for d in extract_dates(content, remembered_ms) if _RESOLVED.fullmatch(d)]
    text = iso.group(0) if iso else (named[0] if named else None)
    if text is None:
        return None
    year, month, day = (int(p) for p in (text + "-01-01")[:10].split("-"))
    try:
        ms = int(dt.datetime(year, month, day, tzinfo=dt.UTC).timestamp() * 1000)
    except ValueError:  # "2024-13": not a date after all
        return None
    return ms if ms <= remembered_ms else None


@dataclass(frozen=True)
class Outcome:
    """What a change did: the statement concerned (as stored now), and for a replay why nothing
    was stored."""

    statement: dict[str, Any]
    replayed: bool = False
    note: str | None = None
    replaced: dict[str, Any] | None = None


class Statements:
    """The statements of one user of one service, changed by one actor (http, cli, mcp)."""

    def __init__(self, service: MemoryService, user_id: str, actor: str,
                 shown: Callable[[str], str] = str) -> None:
        """`shown` names a stored message ("m12") as the reader of the errors knows it: an
        agent's memory shows "local:12" (scopes.py), the HTTP API "m12"."""
        self.service = service
        self.store = service.store
        self.user_id = user_id
        self.actor = actor
        self.shown = shown

    # ---- changes -------------------------------------------------------------------------

    def remember(self, session_id: str, content: str, kind: str, origin: str = "user",
                 force: bool = False) -> Outcome:
        """Store one statement, or return the current one it repeats."""
        with self._writing() as conn:
            key = audit.secret(conn)
            _fingerprint_older_statements(conn, key)
            print_ = fingerprint(key, content)
            self._check_tombstone(conn, print_, force)
            current = self._current_with(conn, print_)
            if current is not None:
                note = None if current["role"] == kind else (
                    f"already remembered as kind {current['role']!r}; the stored statement is "
                    "unchanged (use update to change its kind)")
                return Outcome(current, replayed=True, note=note)
            replaced = self._replaced_with(conn, print_)
            message_id = self._insert(conn, session_id, content, kind, origin, print_, _now_ms())
            audit.record(conn, "remember", self.actor, [message_id], None, [content])
            note = None if replaced is None else (
                f"the same text as {self.shown(f'm{replaced[0]}')}, which "
                f"{self.shown(f'm{replaced[1]}')} replaced; remembered again as current (to "
                "return to an earlier version, update the current one)")
            return Outcome(self._row(conn, message_id), note=note)

    def update(self, session_id: str, message_id: int, content: str,
               kind: str | None = None) -> Outcome:
        """Replace a current statement with a new version: the new text is stored (or, when it
        repeats another current statement, that one stands for it) and the old one is retired,
        linked to it. The new version keeps the old one's kind unless given, and its origin and
        trust: a correction of a proposal is still a proposal."""
        with self._writing() as conn:
            old = self._row(conn, message_id)
            if old["superseded_by"] is not None:
                raise Replaced(f"{self.shown(old['id'])} was already replaced by "
                               f"{self.shown(old['superseded_by'])}; "
                               "update that one", "id")
            kind = kind or old["role"]
            key = audit.secret(conn)
            _fingerprint_older_statements(conn, key)
            print_ = fingerprint(key, content)
            if print_ == fingerprint(key, old["content"]) and kind == old["role"]:
                return Outcome(old, replayed=True, note="the text and kind are unchanged")
            self._check_tombstone(conn, print_, force=False)
            current = self._current_with(conn, print_)
            now = _now_ms()  # the new version is recorded when the old one retires
            if current is not None and current["id"] != old["id"]:
                new_id = int(current["id"][1:])
            else:
                new_id = self._insert(conn, session_id, content, kind, old["origin"], print_, now,
                                      trust=old["trust"])
            conn.execute("UPDATE messages SET retired_ms = ?, superseded_by = ? WHERE id = ?",
                         (now, new_id, message_id))
            withheld_changed(conn)
            audit.record(conn, "update", self.actor, [message_id, new_id], None, [content])
            return Outcome(self._row(conn, new_id), replaced=self._row(conn, message_id))

    def confirm(self, message_id: int) -> Outcome:
        """A person confirms a proposed statement: it joins default reads."""
        with self._writing() as conn:
            row = self._row(conn, message_id)
            if row["trust"] == "confirmed":
                return Outcome(row, replayed=True, note="already confirmed")
            conn.execute("UPDATE messages SET trust = 'confirmed' WHERE id = ?", (message_id,))
            withheld_changed(conn)
            audit.record(conn, "confirm", self.actor, [message_id], None, [row["content"]])
            return Outcome(self._row(conn, message_id))

    def reject(self, message_id: int) -> Outcome:
        """A person rejects a proposed statement: it is forgotten and leaves a tombstone. The
        trust check and the removal are one transaction: a confirm or a reject sent at the same
        time either finds it gone (404) or finds it confirmed (409), never both succeed."""
        found: list[dict[str, Any]] = []

        def proposed(conn: sqlite3.Connection) -> None:
            row = self._row(conn, message_id)
            if row["trust"] == "confirmed":
                raise NotProposed(f"{self.shown(row['id'])} is confirmed, not proposed; forget it "
                                  "instead", "id")
            found.append(row)

        if not self.service.forget(self.user_id, [message_id], "reject", self.actor,
                                   check=proposed)["forgotten"]:
            raise self._unknown(message_id)
        return Outcome(found[0])

    # ---- reads ---------------------------------------------------------------------------

    def history(self, message_id: int) -> dict[str, Any]:
        """Every version of the statement this id belongs to, oldest first, and every audit event
        about any of them (a forgotten id keeps only its events: its text is gone)."""
        with self.store.connection(self.user_id, create=False) as conn:
            if conn is None:
                raise self._unknown(message_id)
            with self.store.read(conn):
                ids = _versions(conn, message_id)
                rows = [self._row(conn, m) for m in ids]
                events = audit.of_messages(conn, ids or [message_id])
        if not rows and not events:
            raise self._unknown(message_id)
        return {"versions": rows, "events": events}

    def with_text(self, content: str) -> list[dict[str, Any]]:
        """The statements equal to `content` as `remember` compares them, oldest first."""
        with self.store.connection(self.user_id, create=False) as conn:
            if conn is None:
                return []
            with self.store.read(conn):
                rows = conn.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE fingerprint = ? "
                                    "ORDER BY id", (fingerprint(audit.secret(conn), content),)
                                    ).fetchall()
        return [message_row(row) for row in rows]

    def proposed(self, limit: int) -> list[dict[str, Any]]:
        """Current statements awaiting a person's review, oldest first."""
        return self.service.proposed(self.user_id, limit)

    # ---- helpers -------------------------------------------------------------------------

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        """One write transaction on the user's file (made on first use)."""
        with self.store.connection(self.user_id, create=True) as conn:
            assert conn is not None
            with self.store.write(conn):
                yield conn

    def _unknown(self, message_id: int) -> NotFound:
        return NotFound(f"there is no statement {self.shown(f'm{message_id}')} (it was forgotten, "
                        "or never stored)", "id")

    def _row(self, conn: sqlite3.Connection, message_id: int) -> dict[str, Any]:
        row = conn.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?",
                           (message_id,)).fetchone()
        if row is None:
            raise self._unknown(message_id)
        return message_row(row)

    @staticmethod
    def _check_tombstone(conn: sqlite3.Connection, print_: bytes, force: bool) -> None:
        found = conn.execute("SELECT removed_ms, reason FROM tombstones WHERE fingerprint = ?",
                             (print_,)).fetchone()
        if found is None:
            return
        if not force:
            when = dt.datetime.fromtimestamp(found[0] / 1000, dt.UTC).date().isoformat()
            verb = "forgotten" if found[1] == "forget" else "rejected"
            raise Tombstoned(f"this statement was {verb} on {when}; remember it again only if "
                             "that is intended, with force: true", "content")
        conn.execute("DELETE FROM tombstones WHERE fingerprint = ?", (print_,))

    def _replaced_with(self, conn: sqlite3.Connection, print_: bytes) -> tuple[int, int] | None:
        """The latest replaced version with this text, and what replaced it: remembering it again
        stores it as current, and says so (it ranked first with nothing telling it was an old
        version)."""
        row = conn.execute("SELECT id, superseded_by FROM messages WHERE fingerprint = ? AND "
                           "superseded_by IS NOT NULL ORDER BY id DESC LIMIT 1", (print_,)).fetchone()
        return (row[0], row[1]) if row else None

    def _current_with(self, conn: sqlite3.Connection, print_: bytes) -> dict[str, Any] | None:
        row = conn.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE fingerprint = ? AND "
                           "retired_ms IS NULL ORDER BY id LIMIT 1", (print_,)).fetchone()
        return message_row(row) if row else None

    def _insert(self, conn: sqlite3.Connection, session_id: str, content: str, kind: str,
                origin: str, print_: bytes, now: int, trust: str | None = None) -> int:
        request = AddRequest(STATEMENT_REQUEST + secrets.token_hex(12), self.user_id, session_id,
                             (Message(kind, content, None),))
        stamp = Stamp(origin=origin, trust=trust or ("proposed" if origin == "agent" else "confirmed"),
                      fingerprint=print_, valid_ms=stated_date_ms(content, now))
        _, first_id = self.service.store_request(conn, request, request.payload_hash(), now, stamp)
        if stamp.trust != "confirmed":
            withheld_changed(conn)
        return first_id


def _fingerprint_older_statements(conn: sqlite3.Connection, key: bytes) -> None:
    """Give the statements stored before schema 5 their text hash, once (a migration cannot: the
    key is this file's own), so a replay of one is found like any other."""
    if conn.execute("SELECT 1 FROM meta WHERE key = 'statements_fingerprinted'").fetchone():
        return
    conn.executemany("UPDATE messages SET fingerprint = ? WHERE id = ?", [
        (fingerprint(key, content), message_id) for message_id, content in
        conn.execute("SELECT id, content FROM messages WHERE fingerprint IS NULL").fetchall()])
    conn.execute("INSERT INTO meta (key, value) VALUES ('statements_fingerprinted', '1')")


def _versions(conn: sqlite3.Connection, message_id: int) -> list[int]:
    """The ids of the chain `message_id` belongs to (what it replaced, what replaced it)."""
    chain = conn.execute("""
        WITH RECURSIVE earlier(id) AS (
            SELECT id FROM messages WHERE id = ?1
            UNION SELECT m.id FROM messages m JOIN earlier e ON m.superseded_by = e.id),
        later(id) AS (
            SELECT id FROM messages WHERE id = ?1
            UNION SELECT m.superseded_by FROM messages m JOIN later l ON m.id = l.id
            WHERE m.superseded_by IS NOT NULL)
        SELECT id FROM earlier UNION SELECT id FROM later ORDER BY id""", (message_id,)).fetchall()
    return [m for (m,) in chain]





def _now_ms() -> int:
    return int(time.time() * 1000)
