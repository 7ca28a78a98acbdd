"""The HTTP transport: parse, authenticate, call the service, format. No logic of its own.

Connections are accepted and read in one selector loop (connections.py), which hands a request to
a bounded pool of worker threads only once it has fully arrived; a request that finds the queue
full gets a quick 503 with Retry-After, so overload never means unbounded threads or memory, and
slow or idle clients hold no worker. Handlers (http.server's, one request each) read from what
the loop collected and write their answer to the socket; HTTP/1.1 keep-alive and pipelining go
through the loop between requests.
"""

from __future__ import annotations

import hmac
import http.server
import io
import ipaddress
import json
import logging
import math
import queue
import re
import selectors
import socket
import threading
import time
import traceback
from contextlib import AbstractContextManager, nullcontext
from typing import Any
from urllib.parse import urlsplit

from aml_retriever import __version__
from aml_retriever.common.errors import (
    AmlError,
    BadRequest,
    LengthRequired,
    MethodNotAllowed,
    Overloaded,
    PayloadTooLarge,
    RequestTimeout,
    StorageFull,
    Unauthorized,
    UnsupportedMediaType,
    UserStoreDamaged,
    error_body,
    internal_error_body,
)
from aml_retriever.http import inspector, logs
from aml_retriever.http.connections import Connection, ConnectionLoop
from aml_retriever.http.metrics import Metrics
from aml_retriever.http.routes import OPEN_PATH, UNQUEUED, Answer, Raw, Route, resolve
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import parse_json
from aml_retriever.settings import Config

errors_log = logging.getLogger("aml_retriever.server")

# A connection refused with a 503 is half-closed, then kept this long (at most this many at once)
# while what the client sends is read and dropped. Closed at once with its request unread, it
# would be reset, and a client still sending would see a broken pipe instead of the 503.
REJECTED_LINGER_S = 1.0
# Connections open at once when the caller names no cap (App sizes it from the descriptor limit).
DEFAULT_MAX_CONNECTIONS = 512
# The longest the connection loop spends writing an error answer (408, 503) to one client.
QUICK_WRITE_S = 0.2
# How long a connection whose request was refused before its body was read (413, 411, 401...)
# is drained after the answer: an 8 MiB body arrives over loopback in well under a second, and a
# client still sending after this long is cut off (bounded: REJECTED_LINGER_MAX at once).
EARLY_ERROR_LINGER_S = 5.0
# When a client may try again after a full disk or a damaged user file: an operator's fix takes
# minutes, and a client retrying every second would only add load.
RESOURCE_RETRY_S = 60
REJECTED_LINGER_MAX = 512
# The methods routes may accept; any other method token is logged as OTHER, never as sent.
KNOWN_METHODS = frozenset({"GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"})


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
        self.timeout = self.server.config.socket_timeout  # for writing the answer
        super().setup()
        self.rfile.close()  # read from what the connection loop collected, never the socket
        self.rfile = io.BytesIO(self._request_bytes)

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
        headers: dict[str, str] = {}
        self.server.metrics.enter()
        self._in_flight = True
        try:
            if inspector.serves(self.path):  # the page holds no data: no key, no turn at the service
                self._label = inspector.LABEL
                page = inspector.answer(self.path, method, self.headers.get("If-None-Match"))
                status, payload, headers = page.status, Raw(page.body, page.content_type), page.headers
            else:
                status, payload = 200, self._route(method)
        except AmlError as exc:
            status, payload, headers = exc.status, error_body(exc), _error_headers(exc)
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
            self._authenticate()
        routes, params = resolve(self.path)
        self._label = label = routes[0].label
        route = next((r for r in routes if r.method == method), None)
        if route is None:
            allowed = tuple(r.method for r in routes)
            raise MethodNotAllowed(f"{label} accepts {', '.join(allowed)}", allowed)
        body = self._read_json() if route.body else None
        if method == "POST" and not route.body:
            self._discard_body()
        with self.server.turn(route):
            return route.handler(self, body, params)

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

    def _authenticate(self) -> None:
        key = self.server.config.api_key
        if not key:
            return
        offered = self.headers.get("X-Api-Key")
        authorization = self.headers.get("Authorization", "")
        scheme, _, credential = authorization.strip().partition(" ")
        if offered is None and scheme.lower() in ("bearer", "token"):
            offered = credential.strip()
        # http.server decodes header bytes as Latin-1; encoding back gives the bytes as sent,
        # so a key with non-ASCII characters, sent as UTF-8, compares equal.
        if offered is None or not hmac.compare_digest(offered.encode("latin-1", "replace"),
                                                      key.encode("utf-8")):
            raise Unauthorized("missing or invalid API key")

    def _read_json(self) -> dict[str, Any]:
        if self.headers.get("Transfer-Encoding"):
            raise LengthRequired("send the body with a Content-Length (chunked bodies are not accepted)")
        length_header = self.headers.get_all("Content-Length") or []
        if not length_header:
            raise LengthRequired("Content-Length is required")
        if len(length_header) > 1 or not re.fullmatch(r"[0-9]+", length_header[0].strip()):
            raise BadRequest("Content-Length must be one non-negative integer", "Content-Length")
        length = int(length_header[0])
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
        if self.headers.get("Transfer-Encoding"):
            raise LengthRequired("send the body with a Content-Length (chunked bodies are not accepted)")
        length_header = self.headers.get_all("Content-Length") or ["0"]
        if len(length_header) > 1 or not re.fullmatch(r"[0-9]+", length_header[0].strip()):
            raise BadRequest("Content-Length must be one non-negative integer", "Content-Length")
        self._read_body(int(length_header[0]))

    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
        self._send(status, json.dumps(payload, ensure_ascii=False).encode("utf-8"),
                   "application/json; charset=utf-8", headers)

    def _send(self, status: int, data: bytes, content_type: str | None, headers: dict[str, str]) -> None:
        # An error before the body was read leaves unread bytes on the connection: close it. So
        # does a body sent with another method, which is never read: left on the connection it
        # would be parsed as the next request (a proxy in front would count one request, not two).
        if status >= 400 and not self._body_read and self.command == "POST":
            self.close_connection = True
            # A body may still be arriving: answer, then read and drop it for a while before
            # closing, so the client gets to read the status instead of a reset.
            self.linger = self._announces_body()
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

    def _announces_body(self) -> bool:
        headers = getattr(self, "headers", None)
        return headers is not None and (bool(headers.get("Transfer-Encoding"))
                                        or headers.get("Content-Length", "0").strip() != "0")

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Errors http.server raises itself (bad request line, headers too large): same JSON
        shape as ours, and never the offending text, which may carry content."""
        self.close_connection = True
        self.request_version = "HTTP/1.1"  # a line too broken to parse still gets a status line
        phrase = http.server.BaseHTTPRequestHandler.responses.get(code, ("error",))[0]
        body = json.dumps({"error": {"code": re.sub(r"[^a-z]+", "_", phrase.lower()),
                                     "message": phrase, "field": None}}).encode()
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


class AmlHTTPServer(http.server.HTTPServer):
    """An HTTP server whose connections are read in one selector loop (connections.py) and
    whose complete requests are answered by a bounded pool of workers from a bounded queue."""

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
        self.address_family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
        self._jobs: queue.Queue[tuple[Connection, bytes, float] | None] = queue.Queue(config.queue_size)
        # Workers answer requests all at once, but only this many run the service at a time:
        # Python runs on one core, and threads beyond that only fight over the GIL (16 clients:
        # 125 Searches/s with 16 at once, 251 with 2).
        self._active = threading.BoundedSemaphore(config.active_requests)
        if listener is None:
            super().__init__((config.host, config.port), Handler)
        else:  # a socket already listening, shared with the other server processes
            super().__init__((config.host, config.port), Handler, bind_and_activate=False)
            self.socket.close()
            self.socket = listener
            self.server_address = listener.getsockname()
        self.loop = ConnectionLoop(self.socket, config.socket_timeout, config.max_body_bytes,
                                   max_connections, self._hand_over, self._expired)
        metrics.connections = self.loop
        self._rejected = Lingerer()
        self._rejected.start()
        self._workers = [threading.Thread(target=self._work, name=f"aml-worker-{i}", daemon=True)
                         for i in range(config.workers)]
        for worker in self._workers:
            worker.start()

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self.loop.run(poll_interval)

    def shutdown(self) -> None:
        self.loop.stop()

    def turn(self, route: Route) -> AbstractContextManager[Any]:
        """The wait for a turn at the service; /health and /metrics never wait, so probes and
        scrapes see a busy server as it is."""
        return nullcontext() if route.label in UNQUEUED else self._active

    def answered(self, entry: logs.Access) -> None:
        """Log and count one answer, whoever gave it (a handler or the connection loop)."""
        logs.access(entry)
        self.metrics.answered(entry.method, entry.route, entry.status, entry.seconds)

    def _hand_over(self, conn: Connection, request: bytes) -> None:
        """A whole request arrived (in the loop's thread): queue it for a worker, or refuse it
        at once when the queue is full."""
        arrived = time.perf_counter()
        try:
            self._jobs.put_nowait((conn, request, arrived))
        except queue.Full:
            self._reject(conn, logs.request_id_in(request), arrived)
            self.loop.give_back(conn, keep=False)

    def _expired(self, conn: Connection, body_arriving: bool) -> None:
        """A request too slow to arrive (in the loop's thread): a body cut short is answered 408;
        a head, or an idle connection, is closed without an answer."""
        self.metrics.expired("body" if body_arriving else "idle" if conn.started is None else "head")
        if body_arriving:
            started, request_id = time.perf_counter(), logs.request_id_in(bytes(conn.buffer))
            sent = _send_quickly(conn.sock, 408, "Request Timeout", RequestTimeout(
                "the body did not arrive in time; send Content-Length bytes", "body"), request_id)
            self.answered(logs.Access("-", "-", 408, time.perf_counter() - started, sent,
                                      conn.address[0], request_id))
        conn.sock.close()

    def _reject(self, conn: Connection, request_id: str, arrived: float) -> None:
        request = conn.sock
        sent = _send_quickly(request, 503, "Service Unavailable",
                             Overloaded("the server is at capacity; retry after a second"),
                             request_id, retry_after=1)
        try:
            request.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        if not self._rejected.keep(request):
            request.close()
        self.metrics.refused()
        self.answered(logs.Access("-", "-", 503, time.perf_counter() - arrived, sent,
                                  conn.address[0], request_id))

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            conn, request, arrived = job
            keep = linger = False
            try:
                conn.sock.settimeout(self.config.socket_timeout)  # for writing the answer
                handler = Handler(conn.sock, conn.address, self, request, arrived)
                keep = not handler.close_connection and not self.stopping
                linger = getattr(handler, "linger", False)
            except Exception:  # a broken connection must not kill the worker
                pass
            finally:
                try:
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
        for _ in self._workers:
            self._jobs.put(None)
        deadline = time.monotonic() + grace_s
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        self.loop.close_idle()
        self._rejected.stop()

    def handle_error(self, request: Any, client_address: Any) -> None:
        errors_log.warning("connection error")


def _send_quickly(sock: socket.socket, status: int, phrase: str, error: AmlError, request_id: str,
                  retry_after: int | None = None) -> int:
    """An error answer written by the connection loop: at most a fraction of a second, never
    blocking the loop on a client that does not read. Returns the body bytes sent."""
    body = json.dumps(error_body(error)).encode()
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


class Lingerer(threading.Thread):
    """Closes refused connections gently: reads and drops what their clients still send, and
    closes each at its end of stream or after REJECTED_LINGER_S, whichever comes first."""

    def __init__(self) -> None:
        super().__init__(name="aml-rejected", daemon=True)
        self._selector = selectors.DefaultSelector()
        self._deadlines: dict[socket.socket, float] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False

    def keep(self, sock: socket.socket, seconds: float = REJECTED_LINGER_S) -> bool:
        """Take a half-closed connection; False when too many are lingering, or it is closed
        already (close it now)."""
        with self._lock:
            if len(self._deadlines) >= REJECTED_LINGER_MAX:
                return False
            try:
                sock.setblocking(False)
                self._selector.register(sock, selectors.EVENT_READ)
            except (OSError, ValueError, KeyError):
                return False
            self._deadlines[sock] = time.monotonic() + seconds
        self._wake.set()
        return True

    def stop(self) -> None:
        """Close every lingering connection and end the thread."""
        self._stopping = True
        self._wake.set()
        self.join()

    def run(self) -> None:
        while not self._stopping:
            with self._lock:
                waiting = bool(self._deadlines)
                if not waiting:
                    self._wake.clear()
            if not waiting:
                self._wake.wait()
                continue
            ready = {key.fileobj for key, _ in self._selector.select(timeout=0.05)}
            self._close(ready, time.monotonic())
        self._close(set(), math.inf)
        self._selector.close()

    def _close(self, ready: set[Any], now: float) -> None:
        """Close the connections whose clients are done or whose time is up."""
        with self._lock:
            for sock, deadline in list(self._deadlines.items()):
                done = now > deadline
                if sock in ready:
                    try:
                        done = done or not sock.recv(65536)
                    except BlockingIOError:
                        pass
                    except OSError:
                        done = True
                if done:
                    self._selector.unregister(sock)
                    del self._deadlines[sock]
                    sock.close()


def _error_headers(exc: AmlError) -> dict[str, str]:
    if isinstance(exc, MethodNotAllowed):
        return {"Allow": ", ".join(exc.allowed)}
    if isinstance(exc, Unauthorized):
        return {"WWW-Authenticate": 'Bearer realm="aml_retriever"'}
    if isinstance(exc, Overloaded):
        return {"Retry-After": "1"}
    if isinstance(exc, (StorageFull, UserStoreDamaged)):
        return {"Retry-After": str(RESOURCE_RETRY_S)}
    return {}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Checkpointer(threading.Thread):
    """Runs the store's planned WAL checkpoints from one place, every `interval` seconds, and
    closes the idle user files when asked (`release`, set on SIGUSR1 by the mover)."""

    def __init__(self, store: Any, interval: float) -> None:
        super().__init__(name="aml-checkpointer", daemon=True)
        self.store, self.interval = store, interval
        self.stop_event = threading.Event()
        self.release = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            try:
                self.store.checkpoint_dirty()
                if self.release.is_set():
                    self.release.clear()
                    self.store.release_idle()
            except Exception as exc:  # retried on the next tick
                errors_log.warning("checkpoint failed: %s", type(exc).__name__)
