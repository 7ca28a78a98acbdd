"""Logs: one access line per answer, as text or as JSON, and the request id that ties a line to
an answer. Never content, queries, query strings or user ids: a line holds the method, the route's
template (`/users/{user_id}`, never the id), the status, the time, the size of the answer, the
client's address and the request id.

The request id comes from the client's `X-Request-Id` when that is safe to repeat in a header and
a log line (1 to 128 characters from a small ASCII set); anything else (CR or LF, spaces, quotes,
non-ASCII, longer, or the header given twice) is replaced by a generated one, never echoed.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from dataclasses import dataclass
from datetime import UTC, datetime

ACCESS = logging.getLogger("aml_retriever.access")
REQUEST_ID_HEADER = "X-Request-Id"
# What a client's request id may be: enough for a UUID (36), a W3C traceparent (55), base64 or
# hex of a 64-byte token (88, 128); nothing that could end a header line or split a log line.
_SAFE_ID = re.compile(r"[A-Za-z0-9._~:/+=-]{1,128}")
# The header as the connection loop sees it, in the raw head of a request it answers itself.
_RAW_ID = re.compile(rb"^x-request-id[ \t]*:([^\r\n]*)", re.IGNORECASE | re.MULTILINE)
GENERATED_ID_BYTES = 16  # 32 hex characters: as unique as a random UUID
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
FORMATS = ("TEXT", "JSON")


def request_id(offered: list[str] | None) -> str:
    """The id of a request: the one value its client sent, when safe, else a generated one."""
    if offered and len(offered) == 1:
        value = offered[0].strip(" \t")
        if _SAFE_ID.fullmatch(value):
            return value
    return os.urandom(GENERATED_ID_BYTES).hex()


def request_id_in(head: bytes) -> str:
    """The id of a request the connection loop answers itself, from the raw head it holds."""
    return request_id([m.decode("latin-1") for m in _RAW_ID.findall(head)])


@dataclass(frozen=True)
class Access:
    """What one answer's log line says: nothing from the request but its method and route."""

    method: str  # a known method, OTHER, or - (the request line was never parsed)
    route: str  # the route's template, or - (no route: unknown path, refused before routing)
    status: int
    seconds: float  # from the whole request's arrival to the answer written
    bytes: int  # the answer's body
    client: str  # the client's address, without its port
    request_id: str


def access(entry: Access) -> None:
    """Log one answer (formatted as text or JSON by the handler `configure` installed)."""
    ACCESS.info("%s %s %d %.1fms id=%s", entry.method, entry.route, entry.status,
                entry.seconds * 1000, entry.request_id, extra={"access": entry})


class JsonFormatter(logging.Formatter):
    """One JSON object per line. An access line carries the fields of `Access`; any other line
    its message (messages are written never to hold content) and, on an error, the trace."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname, "logger": record.name}
        entry = getattr(record, "access", None)
        if isinstance(entry, Access):
            line.update(request_id=entry.request_id, method=entry.method, route=entry.route,
                        status=entry.status, duration_ms=round(entry.seconds * 1000, 3),
                        bytes=entry.bytes, client=entry.client)
        else:
            line["message"] = record.getMessage()
            if record.exc_info:
                line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def configure(level: str, log_format: str) -> None:
    """Send every log line to stderr, as text or as JSON (`log_format`)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "JSON" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler])
