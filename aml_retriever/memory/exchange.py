"""A user's memory as NDJSON and back: export writes the Add bodies that rebuild the user, import
replays them.

Export: one line per stored Add, in the order the store took them: its request id, user, session
and the messages it still holds (role, content, timestamp in milliseconds), so POST /add takes a
line as it is. A line also carries `original`, what an Add body cannot say and a faithful rebuild
needs: the payload hash the Add was stored under (a retry of the original Add, whose messages may
have had no timestamp or since been forgotten, stays a replay), how many timestamps the service
assigned, and when the store took it (what `as_of` reads by). A message that is not a person's
plain message carries its lifecycle: origin, trust, valid_from, hashed (the store kept its keyed
text hash, as it does for statements), retired_at and superseded_by (the request id and place, in
its line, of the version that replaced it: message ids are given anew by the store that imports).

Not carried: forgotten messages (their text is gone), tombstones (text hashes under the source
file's own key), the removals record and the audit log (the import writes its own events).

Import: each line is one write transaction (wholly imported or not at all). A line whose request
id the user already has under the same payload hash is a replay and changes nothing; under another
hash it is refused, naming the line. Links to versions not imported yet are made when they are.
"""

from __future__ import annotations

import bisect
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from aml_retriever.common.errors import AmlError, IdempotencyConflict, InvalidField, PayloadTooLarge
from aml_retriever.memory.lifecycle import ORIGINS, fingerprint
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import AddRequest, identifier, parse_add, parse_json, parse_timestamp
from aml_retriever.storage import audit
from aml_retriever.storage.store import Store
from aml_retriever.storage.timeline import withheld_changed

# The most messages one imported line may hold. An Add beyond the server's `max_messages` (200 by
# default) comes only from a server configured higher; this bounds one transaction's memory.
MAX_LINE_MESSAGES = 100_000
# The largest export the HTTP server builds: it is built in memory so the user's file is read in
# one short snapshot (a stream would hold that snapshot, and a pooled connection, for as long as a
# slow client reads), and workers may each hold one while they write it out (16 x 32 MiB). A user
# of 50,000 LoCoMo-length messages exports ~10 MiB; the CLI streams any size to a file.
HTTP_EXPORT_MAX_BYTES = 32 * 1024 * 1024
# The longest line import reads. An export line is one Add as the server took it (at most
# max_body_bytes, 1 MiB by default) with its lifecycle: 16 MiB leaves room for servers configured
# far above the default, while a hostile file cannot make import hold much more (a 60 MB line
# took 1.2 GB to parse).
MAX_LINE_BYTES = 16 * 1024 * 1024
TRUSTS = ("confirmed", "proposed")
_LIFECYCLE = ("timestamp_assigned", "origin", "trust", "valid_from", "hashed", "retired_at",
              "superseded_by")
_MESSAGE_KEYS = frozenset({"role", "content", "timestamp", *_LIFECYCLE})
_ORIGINAL_KEYS = frozenset({"payload_hash", "timestamps_assigned", "received_at"})


# ---- export ------------------------------------------------------------------------------


def export(store: Store, user_id: str) -> Iterator[dict[str, Any]]:
    """The user's Add bodies, oldest first, read in one snapshot (nothing for an unknown user;
    no file is made)."""
    with store.connection(user_id, create=False) as conn:
        if conn is None:
            return
        with store.read(conn):
            yield from _lines(conn, user_id)


def ndjson(line: dict[str, Any]) -> bytes:
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def export_bytes(store: Store, user_id: str, limit: int | None = None) -> bytes:
    """The whole export as one NDJSON body, refused past `limit` bytes (HTTP_EXPORT_MAX_BYTES)."""
    limit = limit or HTTP_EXPORT_MAX_BYTES
    data = bytearray()
    with closing(export(store, user_id)) as lines:
        for line in lines:
            data += ndjson(line)
            if len(data) > limit:
                raise PayloadTooLarge(f"the export is over {limit // 2**20} MiB; write it with the "
                                      "export command of the CLI", "user_id")
    return bytes(data)


@dataclass
class _Spans:
    """The user's requests by the consecutive message ids they took."""

    rows: list[tuple[int, int, str, str, str, int, int]]  # first id, stored, id, hash, session, ...
    starts: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.starts = [row[0] for row in self.rows]

    def of(self, message_id: int) -> int | None:
        """The index of the request that stored a message, if any."""
        at = bisect.bisect_right(self.starts, message_id) - 1
        return at if at >= 0 and message_id < self.rows[at][0] + self.rows[at][1] else None


def _lines(conn: sqlite3.Connection, user_id: str) -> Iterator[dict[str, Any]]:
    spans = _Spans(conn.execute(
        "SELECT first_message_id, stored, request_id, payload_hash, session_id, "
        "timestamps_assigned, created_ms FROM requests ORDER BY first_message_id").fetchall())
    places = _places(conn, spans)
    line: dict[str, Any] | None = None
    current: int | None = None
    for row in conn.execute("SELECT id, session_id, role, content, timestamp_ms, timestamp_assigned, "
                            "origin, trust, valid_ms, fingerprint IS NOT NULL, retired_ms, "
                            "superseded_by FROM messages ORDER BY id"):
        span = spans.of(row[0])
        if line is not None and (span is None or span != current):
            yield line
            line = None
        if line is None:
            line, current = _line_of(user_id, row, spans, span), span
        line["messages"].append(_message_of(row, places))
    if line is not None:
        yield line


def _line_of(user_id: str, row: tuple[Any, ...], spans: _Spans, span: int | None) -> dict[str, Any]:
    if span is None:  # a message whose request record is gone (a store from before schema 4)
        return {"request_id": f"export-m{row[0]}", "user_id": user_id, "session_id": row[1],
                "messages": []}
    _, _, request_id, payload_hash, session_id, assigned, received_ms = spans.rows[span]
    return {"request_id": request_id, "user_id": user_id, "session_id": session_id, "messages": [],
            "original": {"payload_hash": payload_hash, "timestamps_assigned": assigned,
                         "received_at": received_ms}}


def _message_of(row: tuple[Any, ...], places: dict[int, dict[str, Any]]) -> dict[str, Any]:
    (_, _, role, content, timestamp, assigned, origin, trust, valid_ms, hashed, retired_ms,
     superseded_by) = row
    message: dict[str, Any] = {"role": role, "content": content, "timestamp": timestamp}
    for key, value, plain in (("timestamp_assigned", bool(assigned), False),
                              ("origin", origin, "user"), ("trust", trust, "confirmed"),
                              ("valid_from", valid_ms, None), ("hashed", bool(hashed), False),
                              ("retired_at", retired_ms, None)):
        if value != plain:
            message[key] = value
    if superseded_by in places:
        message["superseded_by"] = places[superseded_by]
    return message


def _places(conn: sqlite3.Connection, spans: _Spans) -> dict[int, dict[str, Any]]:
    """Where each message that replaced another sits in the export: its request id and its place
    among the messages that request still holds."""
    places = {}
    for (target,) in conn.execute("SELECT DISTINCT superseded_by FROM messages "
                                  "WHERE superseded_by IS NOT NULL").fetchall():
        span = spans.of(target)
        if span is not None:
            first = spans.rows[span][0]
            index = conn.execute("SELECT count(*) FROM messages WHERE id >= ? AND id < ?",
                                 (first, target)).fetchone()[0]
            places[target] = {"request_id": spans.rows[span][2], "index": index}
    return places


# ---- import ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One checked line of an export: the Add, what `original` said of it, and each message's
    lifecycle fields (checked, by name)."""

    number: int
    request: AddRequest
    payload_hash: str
    timestamps_assigned: int | None
    received_ms: int | None
    lifecycle: tuple[dict[str, Any], ...]


def parse_line(number: int, text: bytes) -> Line:
    """A line as import takes it, or an error naming the line and the field."""
    try:
        data = parse_json(text)
        request = parse_add(data, MAX_LINE_MESSAGES, exported=True)
        lifecycle = tuple(_lifecycle(item, f"messages[{i}]")
                          for i, item in enumerate(data["messages"]))
        original = data.get("original")
        if original is None:
            return Line(number, request, request.payload_hash(), None, None, lifecycle)
        if not isinstance(original, dict) or set(original) - _ORIGINAL_KEYS:
            raise InvalidField("original must be an object of payload_hash, timestamps_assigned "
                               "and received_at", "original")
        return Line(number, request, _hash(original.get("payload_hash")),
                    _count(original.get("timestamps_assigned"), len(request.messages)),
                    parse_timestamp(original.get("received_at"), "original.received_at",
                                    numbers_from_1973=False), lifecycle)
    except AmlError as exc:
        raise InvalidField(f"line {number}: {exc.message}", exc.field) from None


def _hash(value: Any) -> str:
    if not isinstance(value, str) or len(value) != 64 or value.strip("0123456789abcdef"):
        raise InvalidField("original.payload_hash must be 64 lowercase hex digits",
                           "original.payload_hash")
    return value


def _count(value: Any, most: int) -> int | None:
    if value is not None and (type(value) is not int or not 0 <= value <= most):
        raise InvalidField(f"original.timestamps_assigned must be a whole number from 0 to {most}",
                           "original.timestamps_assigned")
    return value


def _lifecycle(item: dict[str, Any], path: str) -> dict[str, Any]:
    """A message's lifecycle fields, checked; a key the export never writes is refused (a typo
    would otherwise import a statement as a person's confirmed message)."""
    unknown = sorted(set(item) - _MESSAGE_KEYS)
    if unknown:
        raise InvalidField(f"{path} has a field an export never writes", path)
    found: dict[str, Any] = {}
    for name, allowed in (("timestamp_assigned", (True, False)), ("hashed", (True, False)),
                          ("origin", ORIGINS), ("trust", TRUSTS)):
        if name in item:
            if item[name] not in allowed or type(item[name]) is not type(allowed[0]):
                raise InvalidField(f"{path}.{name} must be one of {', '.join(map(str, allowed))}",
                                   f"{path}.{name}")
            found[name] = item[name]
    for name in ("valid_from", "retired_at"):
        if item.get(name) is not None:
            found[name] = parse_timestamp(item[name], f"{path}.{name}", numbers_from_1973=False)
    link = item.get("superseded_by")
    if link is not None:
        if not isinstance(link, dict) or set(link) != {"request_id", "index"} \
                or type(link["index"]) is not int or not 0 <= link["index"] < MAX_LINE_MESSAGES:
            raise InvalidField(f"{path}.superseded_by must be an object of request_id and index",
                               f"{path}.superseded_by")
        found["superseded_by"] = (identifier(link, "request_id"), link["index"])
    return found


def bounded_lines(stream: BinaryIO, most: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """The lines of an NDJSON file, none held in memory past `most` bytes: a longer line is
    refused by its number as soon as that much of it is read."""
    number = 0
    while line := stream.readline(most + 1):
        number += 1
        if len(line.rstrip(b"\r\n")) > most:
            raise InvalidField(f"line {number} is longer than {most} bytes; an export line holds "
                               "one Add (import --max-line-bytes raises the bound)", "line")
        yield line


def read_lines(lines: Iterable[bytes]) -> Iterator[Line]:
    """The checked lines of an NDJSON file (blank lines skipped), numbered from 1."""
    for number, text in enumerate(lines, 1):
        if text.strip():
            yield parse_line(number, text)


class Importer:
    """Imports checked lines into a store, one transaction each."""

    def __init__(self, service: MemoryService, actor: str = "cli") -> None:
        self.service = service
        self.store = service.store
        self.actor = actor
        # Links to versions not imported yet: (user, request id) -> [(message id, place)].
        self._waiting: dict[tuple[str, str], list[tuple[int, int]]] = {}
        self.counts = {"lines": 0, "imported": 0, "replayed": 0, "messages": 0}

    def add(self, line: Line) -> None:
        with self.store.connection(line.request.user_id, create=True) as conn:
            assert conn is not None
            with self.store.write(conn):
                self._link(conn, line, self._stored(conn, line))
        self.counts["lines"] += 1

    def _stored(self, conn: sqlite3.Connection, line: Line) -> list[int | None]:
        """The ids the line's messages have in this file: stored now, or before (a replay; None
        for one forgotten since)."""
        request = line.request
        prior = conn.execute("SELECT payload_hash FROM requests WHERE request_id = ?",
                             (request.request_id,)).fetchone()
        if prior is not None:
            if prior[0] != line.payload_hash:
                raise IdempotencyConflict(f"line {line.number}: request_id was already used for a "
                                          "different payload by this user", "request_id")
            self.counts["replayed"] += 1
            return [_place(conn, request.request_id, i) for i in range(len(request.messages))]
        received = line.received_ms if line.received_ms is not None else int(time.time() * 1000)
        _, first = self.service.store_request(conn, request, line.payload_hash, received)
        ids = list(range(first, first + len(request.messages)))
        if line.timestamps_assigned is not None:
            conn.execute("UPDATE requests SET timestamps_assigned = ? WHERE request_id = ?",
                         (line.timestamps_assigned, request.request_id))
        if any(line.lifecycle):
            self._restore(conn, ids, line)
        audit.record(conn, "import", self.actor, ids, request.request_id,
                     [m.content for m in request.messages])
        self.counts["imported"] += 1
        self.counts["messages"] += len(ids)
        return list(ids)

    @staticmethod
    def _restore(conn: sqlite3.Connection, ids: list[int], line: Line) -> None:
        """Give the messages their lifecycle as exported (a text hash is made again
        under this file's key)."""
        key = audit.secret(conn)
        for message_id, message, life in zip(ids, line.request.messages, line.lifecycle,
                                             strict=True):
            conn.execute(
                "UPDATE messages SET timestamp_assigned = ?, origin = ?, trust = ?, valid_ms = ?, "
                "fingerprint = ?, retired_ms = ? WHERE id = ?",
                (int(life.get("timestamp_assigned", False)), life.get("origin", "user"),
                 life.get("trust", "confirmed"), life.get("valid_from"),
                 fingerprint(key, message.content) if life.get("hashed") else None,
                 life.get("retired_at"), message_id))
        if any(life.get("trust", "confirmed") != "confirmed" or "retired_at" in life
               for life in line.lifecycle):
            withheld_changed(conn)  # what a default read withholds changed

    def _link(self, conn: sqlite3.Connection, line: Line, ids: list[int | None]) -> None:
        """Link each replaced version to the one that replaced it, now or once that one is
        imported; then the versions that waited for this line."""
        user_id, request_id = line.request.user_id, line.request.request_id
        for message_id, life in zip(ids, line.lifecycle, strict=True):
            if "superseded_by" in life and message_id is not None:
                target_request, index = life["superseded_by"]
                target = _place(conn, target_request, index)
                if target is None:
                    self._waiting.setdefault((user_id, target_request), []).append((message_id, index))
                else:
                    _set_link(conn, message_id, target)
        for message_id, index in self._waiting.pop((user_id, request_id), []):
            target = _place(conn, request_id, index)
            if target is not None:
                _set_link(conn, message_id, target)


def _place(conn: sqlite3.Connection, request_id: str, index: int) -> int | None:
    """The id of the index-th message a request still holds in this file, if any."""
    row = conn.execute("SELECT m.id FROM requests r JOIN messages m ON m.id BETWEEN "
                       "r.first_message_id AND r.first_message_id + r.stored - 1 WHERE "
                       "r.request_id = ? ORDER BY m.id LIMIT 1 OFFSET ?", (request_id, index)
                       ).fetchone()
    return None if row is None else row[0]


def _set_link(conn: sqlite3.Connection, message_id: int, target: int) -> None:
    conn.execute("UPDATE messages SET superseded_by = ? WHERE id = ? AND superseded_by IS NULL",
                 (target, message_id))
