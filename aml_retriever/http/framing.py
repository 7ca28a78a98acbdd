"""HTTP framing: where a request's head ends and how long its body is (for the connection loop),
how a head and body are read strictly (for the handler), and how an error is answered in a few
bytes when no handler runs. Rules of the protocol only: no routes, no keys."""

from __future__ import annotations

import json
import re
import socket
from email.message import Message
from typing import Any

from aml_retriever.common.errors import (
    AmlError,
    BadRequest,
    ErasurePending,
    LengthRequired,
    MethodNotAllowed,
    Overloaded,
    StorageFull,
    Unauthorized,
    UserStoreDamaged,
    error_body,
)
from aml_retriever.http import logs

# Past this many bytes without the end of a head, what arrived is handed over as it is (the
# handler answers 414 or 431): what a request may hold in headers is far below this, and every
# connection may buffer this much.
MAX_HEAD_BYTES = 256 * 1024
# A Content-Length of more digits is larger than any body accepted (nothing near 10**18 bytes
# is), and is refused as such without converting it.
MAX_LENGTH_DIGITS = 18
# The longest the connection loop spends writing an error answer (408, 429) to one client.
QUICK_WRITE_S = 0.2
# When a client may try again after a full disk or a damaged user file: an operator's fix takes
# minutes, and a client retrying every second would only add load.
RESOURCE_RETRY_S = 60
_CONTENT_LENGTH = re.compile(rb"^content-length[ \t]*:[ \t]*([^\r\n]*)", re.IGNORECASE | re.MULTILINE)
# A request line's method is a token (RFC 9110 5.6.2); the line ends with an HTTP/1.x version.
_TOKEN_BYTES = frozenset(b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_HTTP1_LINE = re.compile(rb" HTTP/1\.[0-9]\r?\n\Z")
_EXPECT_CONTINUE = re.compile(rb"^expect[ \t]*:[ \t]*100-continue", re.IGNORECASE | re.MULTILINE)
_TRANSFER_ENCODING = re.compile(rb"^transfer-encoding[ \t]*:", re.IGNORECASE | re.MULTILINE)


def head_end(buffer: bytes | bytearray, start: int = 0) -> int | None:
    """Where a request's head ends in `buffer` (the index after its blank line), or None; the
    search starts at `start` (what was searched before, less the three bytes an end could span),
    so a head trickled in many reads is scanned once in all."""
    start = max(0, start - 3)
    ends = [i + n for i, n in ((buffer.find(b"\r\n\r\n", start), 4),
                               (buffer.find(b"\n\n", start), 2),
                               (buffer.find(b"\n\r\n", start), 3)) if i >= 0]
    return min(ends) if ends else None


def leading_empty_lines(buffer: bytes | bytearray) -> int:
    """How many bytes of empty lines come before a request line: RFC 9112 2.2 asks a server to
    ignore at least one (a client may send a CRLF after a POST body)."""
    return len(buffer) - len(bytes(buffer[:MAX_HEAD_BYTES]).lstrip(b"\r\n"))


def not_http1(buffer: bytes | bytearray) -> bool:
    """Whether what arrived cannot be the start of an HTTP/1.x request: its first byte is no
    method's, or its first line is complete without ending in an HTTP/1.x version (a TLS
    ClientHello, `GET /`, HTTP/2's preface). Then it is answered at once, not at the deadline."""
    if buffer and buffer[0] not in _TOKEN_BYTES:
        return True
    line_end = buffer.find(b"\n")
    return line_end >= 0 and _HTTP1_LINE.search(bytes(buffer[:line_end + 1])) is None


def origin_form(target: str) -> bool:
    """Whether a request target is a path with one leading slash. http.server serves `//add` as
    `/add`, but a router finds no user in it: refused, a routed and a direct request can never
    differ (`http://host/add` and `*` are refused too)."""
    return target.startswith("/") and not target.startswith("//")


def expects_continue(head: bytes) -> bool:
    """Whether the client waits for `100 Continue` before sending its body."""
    return _EXPECT_CONTINUE.search(head) is not None


def awaited_body_length(head: bytes, max_body: int) -> int:
    """How many body bytes to wait for after `head`: its one Content-Length when it is a plain
    number within `max_body`; otherwise none (the handler refuses such a request without
    reading its body: 411, 400, 413)."""
    if _TRANSFER_ENCODING.search(head):
        return 0
    lengths = _CONTENT_LENGTH.findall(head)
    if len(lengths) != 1 or not lengths[0].strip().isdigit():
        return 0
    digits = lengths[0].strip()
    return int(digits) if len(digits) <= MAX_LENGTH_DIGITS and int(digits) <= max_body else 0


class CrlfLines:
    """The request's header lines, read through to the real reader, noting any line that ends
    in a bare LF (http.client accepts one; this server refuses it)."""

    def __init__(self, reader: Any) -> None:
        self._reader = reader
        self.bare_lf = False

    def readline(self, limit: int = -1) -> bytes:
        line: bytes = self._reader.readline(limit)
        if line.endswith(b"\n") and not line.endswith(b"\r\n"):
            self.bare_lf = True
        return line


def body_length(headers: Message, default: str | None) -> int:
    """The body's length from its one Content-Length; `default` when there is none (None: one
    is required). Chunked bodies are refused."""
    if headers.get("Transfer-Encoding"):
        raise LengthRequired("send the body with a Content-Length (chunked bodies are not accepted)")
    length_header = headers.get_all("Content-Length") or ([default] if default is not None else [])
    if not length_header:
        raise LengthRequired("Content-Length is required")
    if len(length_header) > 1 or not re.fullmatch(r"[0-9]+", length_header[0].strip()):
        raise BadRequest("Content-Length must be one non-negative integer", "Content-Length")
    digits = length_header[0].strip()
    # Past Python's 4,300 digits int() fails; any length with this many is too large anyway.
    return int(digits) if len(digits) <= MAX_LENGTH_DIGITS else 10 ** MAX_LENGTH_DIGITS


def announces_body(headers: Message | None) -> bool:
    return headers is not None and (bool(headers.get("Transfer-Encoding"))
                                    or headers.get("Content-Length", "0").strip() != "0")


def error_headers(exc: AmlError) -> dict[str, str]:
    """The headers an error's answer carries beside its JSON body."""
    if isinstance(exc, MethodNotAllowed):
        return {"Allow": ", ".join(exc.allowed)}
    if isinstance(exc, Unauthorized):
        return {"WWW-Authenticate": 'Bearer realm="aml_retriever"'}
    if isinstance(exc, (Overloaded, ErasurePending)):
        return {"Retry-After": "1"}
    if isinstance(exc, (StorageFull, UserStoreDamaged)):
        return {"Retry-After": str(RESOURCE_RETRY_S)}
    return {}


def send_quickly(sock: socket.socket, status: int, phrase: str, error: AmlError, request_id: str,
                 retry_after: int | None = None) -> int:
    """An error answer written by the connection loop: at most a fraction of a second, never
    blocking the loop on a client that does not read. Returns the body bytes sent."""
    body = json.dumps(error_body(error)).encode() + b"\n"
    head = (f"HTTP/1.1 {status} {phrase}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{logs.REQUEST_ID_HEADER}: {request_id}\r\n"
            + (f"Retry-After: {retry_after}\r\n" if retry_after else "")
            + "Connection: close\r\n\r\n")
    try:
        sock.settimeout(QUICK_WRITE_S)
        sock.sendall(head.encode() + body)
    except OSError:
        return 0
    return len(body)
