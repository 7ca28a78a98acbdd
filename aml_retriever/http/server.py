"""The HTTP transport: parse, authenticate, call the service, format. No logic of its own.

Connections are accepted and read in one selector loop (connections.py), which hands a request,
once it has fully arrived, to the queue where it waits by user for a turn (turns.py) and a pool of
worker threads answers it; a request that finds the queue full gets a quick 429 with Retry-After,
so overload never means unbounded threads or memory, and slow or idle clients hold no worker.
Handlers (http.server's, one request each) read from what the loop collected and write their
answer to the socket; HTTP/1.1 keep-alive and pipelining go through the loop between requests.
The protocol's rules are framing.py's, the key check auth.py's, the route table routes.py's.
"""

from __future__ import annotations

import http.server
import io
import json
import logging
import re
import socket
import threading
import time
import traceback
from typing import Any
from urllib.parse import urlsplit

from aml_retriever import __version__
from aml_retriever.common.errors import (
    AmlError,
    MethodNotAllowed,
    Overloaded,
    PayloadTooLarge,
    RequestTimeout,
    UnsupportedMediaType,
    error_body,
    internal_error_body,
)
from aml_retriever.http import inspector, logs
from aml_retriever.http.auth import authenticate, is_loopback, refuse_cross_site, refuse_foreign_host
from aml_retriever.http.connections import Connection, ConnectionLoop
from aml_retriever.http.framing import (
    CrlfLines,
    announces_body,
    body_length,
    error_headers,
    origin_form,
    send_quickly,
)
from aml_retriever.http.lingering import Lingerer
from aml_retriever.http.metrics import Metrics
from aml_retriever.http.routes import OPEN_PATH, Answer, Call, Raw, resolve
from aml_retriever.http.turns import Ticket, TurnQueue, whose
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import ignored_fields, parse_json
from aml_retriever.settings import Config

errors_log = logging.getLogger("aml_retriever.server")

# Connections open at once when the caller names no cap (App sizes it from the descriptor limit).
DEFAULT_MAX_CONNECTIONS = 512
# How long a connection whose request was refused before its body was read (413, 411, 401...)
# is drained after the answer: an 8 MiB body arrives over loopback in well under a second, and a
# client still sending after this long is cut off (bounded: lingering.REJECTED_LINGER_MAX at once).
EARLY_ERROR_LINGER_S = 5.0
# The methods routes may accept; any other method token is logged as OTHER, never as sent.
KNOWN_METHODS = frozenset({"GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"})

# Named on a 2xx answer: the keys of the body its route does not read ("topk, filters"), which
# change nothing of the answer (a misspelt field was silently ignored).
IGNORED_FIELDS_HEADER = "X-Aml-Ignored-Fields"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = f"aml_retriever/{__version__}"
    sys_version = ""
    server: AmlHTTPServer
    # Headers and body go out as separate writes; without TCP_NODELAY, Nagle's algorithm holds
    # the body until the client's delayed ACK, adding ~40 ms to every keep-alive response.
    disable_nagle_algorithm = True

    def __init__(self, request: socket.socket, client_address: Any, server: AmlHTTPServer,
                 request_bytes: bytes, arrived: float) -> None:
        self._request_bytes = request_bytes  # the whole request: the loop waited for it
        self._arrived = arrived  # perf_counter() when it had all arrived
        # What the access log and the metrics say of this request, once it is answered.
        self._method, self._label, self._in_flight = "-", "-", False
        self._entry: logs.Access | None = None
        self.request_id = ""
        super().__init__(request, client_address, server)

    def version_string(self) -> str:
        return self.server_version

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # read from what the connection loop collected, never the socket
        self.rfile = io.BytesIO(self._request_bytes)
        # The answer is written here, whole, then sent by the worker and the connection loop
        # (ConnectionLoop.send): a client that does not read it holds no worker.
        self.wfile = io.BytesIO()
        self.answer = b""

    def finish(self) -> None:
        self.answer = self.wfile.getvalue()
        super().finish()

    def handle_expect_100(self) -> bool:
        """The connection loop said 100 Continue already, before the body it waited for."""
        return True

    def handle(self) -> None:
        """One request: the connection loop keeps the connection alive between requests."""
        self.close_connection = True
        try:
            self.handle_one_request()
        except (TimeoutError, ConnectionError):  # the client stopped reading the answer
            self.close_connection = True

    def parse_request(self) -> bool:
        # Strict framing: lines end in CRLF. A bare LF accepted here while a proxy in front
        # frames otherwise lets one request hide another (request smuggling).
        lines, self.rfile = self.rfile, CrlfLines(self.rfile)
        try:
            parsed = super().parse_request()
        finally:
            bare_lf, self.rfile = self.rfile.bare_lf, lines  # type: ignore[attr-defined]
        if not parsed:
            return False
        if bare_lf or not self.raw_requestline.endswith(b"\r\n"):
            self.send_error(400)
            return False
        if self.request_version == "HTTP/0.9":  # a request line without a version
            self.send_error(400)
            return False
        if not origin_form(self.requestline.split()[1]):
            self.send_error(400)
            return False
        if self.headers.defects:  # e.g. a header line without a colon
            self.send_error(400)
            return False
        return True

    def __getattr__(self, name: str) -> Any:
        """Any other method (BREW, PROPFIND, ...) gets the JSON 404 or 405 of `_dispatch`
        rather than http.server's 501."""
        if name.startswith("do_"):
            return lambda: self._dispatch(name[3:])
        raise AttributeError(name)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_OPTIONS(self) -> None:
        self._dispatch("OPTIONS")

    def _dispatch(self, method: str) -> None:
        self._method = method if method in KNOWN_METHODS else "OTHER"
        self._body_read = False
        self.linger = False
        self.request_id = logs.request_id(self.headers.get_all(logs.REQUEST_ID_HEADER))
        self._ignored = ""  # the keys of the body its route does not read, as its caller is told
        headers: dict[str, str] = {}
        self.server.metrics.enter()
        self._in_flight = True
        try:
            if self.server.guard_host:
                refuse_foreign_host(self.headers)
            refuse_cross_site(method, self.headers)
            if inspector.serves(self.path):  # the page holds no data: no key, no turn at the service
                self._label = inspector.label(self.path)
                page = inspector.answer(self.path, method, self.headers.get("If-None-Match"))
                status, payload, headers = page.status, Raw(page.body, page.content_type), page.headers
            else:
                status, payload = 200, self._route(method)
                if self._ignored:
                    headers = {IGNORED_FIELDS_HEADER: self._ignored}
        except AmlError as exc:
            status, payload, headers = exc.status, error_body(exc), error_headers(exc)
        except Exception as exc:  # the one place that turns surprises into a 500
            status, payload = 500, internal_error_body()
            self._log_unexpected(exc)
        try:
            if isinstance(payload, Raw):
                self._send(status, payload.data, payload.content_type, headers)
            else:
                self._send_json(status, payload, headers)
        finally:
            self._log(status)

    def _route(self, method: str) -> Answer:
        """The answer of the route a request names. Authenticated first, so a caller without the
        key learns nothing, not even which paths exist; /health (and the page) alone are open."""
        if urlsplit(self.path).path != OPEN_PATH:
            authenticate(self.headers, self.server.config.api_key)
        routes, params = resolve(self.path)
        self._label = label = routes[0].label
        route = next((r for r in routes if r.method == method), None)
        if route is None:
            allowed = tuple(r.method for r in routes)
            raise MethodNotAllowed(f"{label} accepts {', '.join(allowed)}", allowed)
        body = self._read_json() if route.body else None
        self._ignored = ignored_fields(body, route.fields) if body is not None else ""
        if method == "POST" and not route.body:
            self._discard_body()
        call = Call(urlsplit(self.path).query, self.server.service, self.server.metrics,
                    self.server.config.max_messages)
        return route.handler(call, body, params)

    def _count(self, status: int, body_bytes: int) -> logs.Access:
        """Count this answer, once: just before it is written, so that a client that has read it
        finds it counted (and no longer in flight) at its next request."""
        if self._entry is None:
            self._entry = logs.Access(self._method, self._label, status,
                                      time.perf_counter() - self._arrived, body_bytes,
                                      self.client_address[0], self.request_id)
            if self._in_flight:
                self.server.metrics.leave()
            self.server.metrics.answered(self._method, self._label, status, self._entry.seconds)
        return self._entry

    def _log(self, status: int) -> None:
        """Log this answer once it is written (or could not be): off the client's wait."""
        logs.access(self._count(status, 0))

    def _read_json(self) -> dict[str, Any]:
        length = body_length(self.headers, None)
        if length > self.server.config.max_body_bytes:
            raise PayloadTooLarge(f"body must be at most {self.server.config.max_body_bytes} bytes",
                                  "body")
        content_type = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if content_type != "application/json" and not content_type.endswith("+json"):
            raise UnsupportedMediaType("Content-Type must be application/json", "Content-Type")
        return parse_json(self._read_body(length))

    def _read_body(self, length: int) -> bytes:
        body = self.rfile.read(length)
        self._body_read = True
        if len(body) < length:  # the loop hands over whole bodies: a mismatch is a bug's sign
            self.close_connection = True
            raise RequestTimeout("the body did not arrive in time; send Content-Length bytes",
                                 "body")
        return body

    def _discard_body(self) -> None:
        """A POST whose route takes no body: what it sent anyway (the loop collected it whole,
        within max_body_bytes) is read and dropped, so it is never taken for the next request."""
        self._read_body(body_length(self.headers, "0"))

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
        # Ended by a newline, as a terminal's next prompt expects (curl printed it glued on).
        self._send(status, (json.dumps(payload, ensure_ascii=False) + "\n").encode("utf-8"),
                   "application/json; charset=utf-8", headers)

    def _send(self, status: int, data: bytes, content_type: str | None, headers: dict[str, str]) -> None:
        # An error before the body was read leaves unread bytes on the connection: close it. So
        # does a body sent with another method, which is never read: left on the connection it
        # would be parsed as the next request (a proxy in front would count one request, not two).
        if status >= 400 and not self._body_read and self.command == "POST":
            self.close_connection = True
            # A body may still be arriving: answer, then read and drop it for a while before
            # closing, so the client gets to read the status instead of a reset.
            self.linger = announces_body(getattr(self, "headers", None))
        if self.command != "POST" and (self.headers.get("Transfer-Encoding")
                                       or self.headers.get("Content-Length", "0").strip() != "0"):
            self.close_connection = True
        if self.server.stopping:
            self.close_connection = True
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        if status != 304:  # a 304 has no body, and its length would have to be the page's
            self.send_header("Content-Length", str(len(data)))
        if "Cache-Control" not in headers:
            self.send_header("Cache-Control", "no-store")
        self.send_header(logs.REQUEST_ID_HEADER, self.request_id)
        for name, value in headers.items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        sent = data if self.command != "HEAD" else b""
        self._count(status, len(sent))
        self.end_headers()
        self.wfile.write(sent)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Errors http.server raises itself (bad request line, headers too large): same JSON
        shape as ours, and never the offending text, which may carry content."""
        self.close_connection = True
        self.request_version = "HTTP/1.1"  # a line too broken to parse still gets a status line
        phrase = http.server.BaseHTTPRequestHandler.responses.get(code, ("error",))[0]
        body = json.dumps({"error": {"code": re.sub(r"[^a-z]+", "_", phrase.lower()),
                                     "message": phrase, "field": None}}).encode() + b"\n"
        headers = getattr(self, "headers", None)  # absent when the head could not be parsed
        self.request_id = logs.request_id(headers.get_all(logs.REQUEST_ID_HEADER)
                                          if headers is not None else None)
        try:
            self.send_response(code)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header(logs.REQUEST_ID_HEADER, self.request_id)
            self.send_header("Connection", "close")
            sent = body if self.command != "HEAD" and code >= 200 else b""
            self._count(code, len(sent))
            self.end_headers()
            self.wfile.write(sent)
        finally:
            self._log(code)

    def log_message(self, format: str, *args: Any) -> None:
        """http.server's own log lines quote the request line; ours never do (see _dispatch)."""

    def _log_unexpected(self, exc: Exception) -> None:
        """Where it failed, without the exception's message (it could quote content)."""
        frames = traceback.extract_tb(exc.__traceback__)
        where = " < ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} {f.name}" for f in frames[-4:])
        errors_log.error("unexpected %s at %s", type(exc).__name__, where)


class _Turn:
    """A worker's turn at the service, ended once (when its answer is made, or it fails)."""

    def __init__(self, turns: TurnQueue, ticket: Ticket) -> None:
        self.turns, self.ticket, self.ended = turns, ticket, False

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            self.turns.done(self.ticket)


class AmlHTTPServer(http.server.HTTPServer):
    """An HTTP server whose connections are read in one selector loop (connections.py) and
    whose complete requests wait in a bounded queue, by user, for a pool of workers."""

    # The listen backlog: bursts of new connections wait in the kernel rather than being reset;
    # admission control is the connection cap and the bounded queue, not this.
    request_queue_size = 1024

    def __init__(self, config: Config, service: MemoryService, metrics: Metrics,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 listener: socket.socket | None = None) -> None:
        self.config = config
        self.service = service
        self.metrics = metrics
        self.stopping = False
        # Without a key, a loopback server's only guard against DNS rebinding is the Host.
        self.guard_host = not config.api_key and is_loopback(config.host)
        self.address_family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
        # Only this many requests run the service at a time: Python runs on one core, and threads
        # beyond that only fight over the GIL (16 clients: 125 Searches/s with 16 at once, 251
        # with 2); turns go by user (turns.py). The other workers answer probes and scrapes.
        self.turns = TurnQueue(config.active_requests, config.queue_size)
        metrics.waiting = lambda: self.turns.waiting
        if listener is None:
            super().__init__((config.host, config.port), Handler)
        else:  # a socket already listening, shared with the other server processes
            super().__init__((config.host, config.port), Handler, bind_and_activate=False)
            self.socket.close()
            self.socket = listener
            self.server_address = listener.getsockname()
        self.loop = ConnectionLoop(self.socket, config.socket_timeout, config.max_body_bytes,
                                   max_connections, self._hand_over, self._expired,
                                   config.keep_alive_timeout)
        metrics.connections = self.loop
        self._rejected = Lingerer()
        self._rejected.start()
        self._workers = [threading.Thread(target=self._work, name=f"aml-worker-{i}", daemon=True)
                         for i in range(max(config.workers, config.active_requests + 1))]
        for worker in self._workers:
            worker.start()

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self.loop.run(poll_interval)

    def shutdown(self) -> None:
        self.loop.stop()

    def answered(self, entry: logs.Access) -> None:
        """Log and count one answer, whoever gave it (a handler or the connection loop)."""
        logs.access(entry)
        self.metrics.answered(entry.method, entry.route, entry.status, entry.seconds)

    def _hand_over(self, conn: Connection, request: bytes) -> None:
        """A whole request arrived (in the loop's thread): queue it for its turn, or refuse it
        at once when the queue is full."""
        arrived = time.perf_counter()
        user, quick = whose(request)
        retry_after = self.turns.offer(Ticket((conn, request, arrived), len(request), user, quick))
        if retry_after is not None:
            self._reject(conn, logs.request_id_in(request), arrived, retry_after)
            self.loop.give_back(conn, keep=False)

    def _expired(self, conn: Connection, body_arriving: bool) -> None:
        """A request too slow to arrive (in the loop's thread): a body cut short is answered 408;
        a head, or an idle connection, is closed without an answer."""
        self.metrics.expired("body" if body_arriving else "idle" if conn.started is None else "head")
        if body_arriving:
            started, request_id = time.perf_counter(), logs.request_id_in(bytes(conn.buffer))
            sent = send_quickly(conn.sock, 408, "Request Timeout", RequestTimeout(
                "the body did not arrive in time; send Content-Length bytes", "body"), request_id)
            self.answered(logs.Access("-", "-", 408, time.perf_counter() - started, sent,
                                      conn.address[0], request_id))
        conn.sock.close()

    def _reject(self, conn: Connection, request_id: str, arrived: float, retry_after: int) -> None:
        request = conn.sock
        sent = send_quickly(request, 429, "Too Many Requests",
                            Overloaded(f"the server is at capacity; retry after {retry_after} s"),
                            request_id, retry_after=retry_after)
        try:
            request.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        if not self._rejected.keep(request):
            request.close()
        self.metrics.refused()
        self.answered(logs.Access("-", "-", 429, time.perf_counter() - arrived, sent,
                                  conn.address[0], request_id))

    def _work(self) -> None:
        while (ticket := self.turns.take()) is not None:
            turn = _Turn(self.turns, ticket)
            try:
                self._answer(*ticket.job, turn)
            finally:
                turn.end()

    def _answer(self, conn: Connection, request: bytes, arrived: float, turn: _Turn) -> None:
        """One request, answered by this worker; the connection given back to the loop. The
        turn ends once the answer is made: sending it is not the service's work (a client
        reading a large answer slowly holds no turn)."""
        keep = linger = False
        sent = True
        try:
            handler = Handler(conn.sock, conn.address, self, request, arrived)
            turn.end()
            keep = not handler.close_connection and not self.stopping
            linger = getattr(handler, "linger", False)
            sent = self.loop.send(conn, handler.answer, keep and not linger)
        except Exception:  # a broken connection must not kill the worker
            pass
        finally:
            try:
                if sent:  # else the loop sends the rest, then reads or closes it
                    if not keep:
                        self._close(conn.sock, linger)
                    self.loop.give_back(conn, keep)
            except Exception:  # a connection closed under it: the worker carries on
                errors_log.warning("a connection could not be given back")

    def _close(self, request: socket.socket, linger: bool) -> None:
        """Close a connection, or, when its client may still be sending a body the server
        refused, half-close it and let the lingerer drain it for EARLY_ERROR_LINGER_S."""
        if linger:
            try:
                request.shutdown(socket.SHUT_WR)
            except OSError:
                linger = False
        if not (linger and self._rejected.keep(request, EARLY_ERROR_LINGER_S)):
            self.shutdown_request(request)

    def drain(self, grace_s: float) -> None:
        """Stop (after `shutdown`): close idle keep-alive connections, finish the requests in
        flight, end the workers."""
        self.stopping = True
        self.loop.close_idle()
        self.turns.close()
        deadline = time.monotonic() + grace_s
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        self.loop.close_idle()
        self._rejected.stop()

    def handle_error(self, request: Any, client_address: Any) -> None:
        errors_log.warning("connection error")


