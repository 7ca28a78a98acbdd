"""The connections of the HTTP server: accepted, read and timed in one selector loop, and handed
to a worker only once a whole request has arrived.

Why: a worker that reads its own connection is held for as long as the client takes to send, so
clients sending a byte a second hold every worker (80 of them kept a bystander from a single 200
for 75 s). Here no worker ever waits for a client: the loop reads every connection as bytes
arrive, without blocking, and a worker gets a request whose head and body are all there (or a
head whose body it will refuse anyway: too large, not announced as it must be). Idle and slow
connections cost a socket and a buffer, no thread.

- **Deadlines.** A request's head must arrive within `BODY_DEADLINE_FACTOR` socket timeouts of its
  first byte, and its body within as many again (else 408); a new connection that sends nothing
  is closed after one socket timeout, an answered one that sends no next request after the
  keep-alive timeout. That one is long (75 s, as nginx's): a client sending its next request on
  a connection just as the server closes it gets no answer, and clients close their own idle
  connections sooner (a pool's 5-15 s), so the client closes first. With an idle limit of 10 s,
  a rehearsal of the leaderboard's load lost 2-9 of 538 BEAM Searches that way: a client thread
  busy decoding an answer sent its next request just as the connection's 10 s ran out.
- **A cap on connections**, sized from the file-descriptor limit: past it, the oldest idle
  connection is closed first, then the one whose request has been arriving longest (the slowest
  sender), never one whose request is being served.
- **Keep-alive and pipelining.** A connection goes back to the loop after its answer; bytes that
  arrived after one request are the start of the next.
- **Answers leave without a worker.** A worker writes what the socket takes at once; the rest is
  the loop's to send as the client reads, so a client that never reads its answer holds no
  worker (16 such clients of a 9 MB answer kept a bystander's Search waiting 8.7 s). A client
  that reads nothing for `BODY_DEADLINE_FACTOR` socket timeouts is closed; one that reads,
  however slowly, never is. What the answers waiting hold is counted as the memory it is (a
  slice of an answer kept the whole answer alive: 32 clients reading all but 5 MB of 18.6 MB
  answers held 550 MB where 160 MB were counted): the part sent is let go once it is the larger
  part, and past MAX_PENDING_BYTES a worker sends its answer's rest itself, as the client reads,
  rather than close a client that is reading.
- **Framing**: the loop only finds where a head ends and how long its body is (framing.py); the
  handler parses and refuses what is malformed. A head ended by bare LFs is handed over as a head too, so that
  the handler's 400 answers it rather than a timeout.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from aml_retriever.http.framing import (
    MAX_HEAD_BYTES,
    awaited_body_length,
    expects_continue,
    head_end,
    leading_empty_lines,
    not_http1,
)

log = logging.getLogger("aml_retriever.server")
# A request's head, and then its body, must each arrive within this many socket timeouts in all,
# however they are trickled.
BODY_DEADLINE_FACTOR = 3
READ_CHUNK = 65536
# The most the requests still arriving may hold in memory in all: past it, the connection holding
# the most is closed (each may hold a head of MAX_HEAD_BYTES and a body of max_body_bytes, and the
# cap alone would allow a thousand of those).
MAX_BUFFERED_BYTES = 128 * 1024 * 1024
# How long the listener is left unwatched when no descriptor is left to accept a connection.
ACCEPT_PAUSE_S = 0.1
# The most the answers still leaving may hold in memory in all: past it, a worker sends the rest
# of its answer itself (`send`), held by its client for as long as that client reads.
MAX_PENDING_BYTES = 256 * 1024 * 1024


@dataclass(eq=False)
class Connection:
    sock: socket.socket
    address: tuple[str, int]
    buffer: bytearray = field(default_factory=bytearray)
    opened: float = field(default_factory=time.monotonic)
    started: float | None = None  # when the first byte of the request in progress arrived
    deadline: float = 0.0
    needed: int | None = None  # the whole request's length, once its head is in
    busy: bool = False  # a worker is answering it
    keep: bool = True  # given back to be read again (False: its worker closed it)
    eof: bool = False  # the client has stopped sending
    scanned: int = 0  # how much of the buffer was searched for the end of a head
    pending: memoryview | None = None  # what of an answer the client has yet to read

    def take_request(self) -> bytes:
        """The complete request at the front of the buffer, removed from it."""
        assert self.needed is not None
        request = bytes(self.buffer[:self.needed])
        del self.buffer[:self.needed]
        self.started, self.needed, self.scanned = None, None, 0
        return request


class ConnectionLoop:
    """Accepts and reads every connection in one thread; `dispatch` gets complete requests."""

    def __init__(self, listener: socket.socket, timeout: float, max_body: int, cap: int,
                 dispatch: Callable[[Connection, bytes], None],
                 expire: Callable[[Connection, bool], None], keep_alive: float = 75.0) -> None:
        self.listener = listener
        self.timeout = timeout
        self.keep_alive = keep_alive  # how long an answered connection waits for the next request
        self.max_body = max_body
        self.cap = cap
        self._dispatch = dispatch
        self._expire = expire  # (connection, a body was arriving): answer 408 or just close
        self._selector = selectors.DefaultSelector()
        self._open: dict[socket.socket, Connection] = {}
        self._returned: list[Connection] = []
        self._lock = threading.Lock()
        self._pending_bytes = 0  # what the answers waiting for their clients hold, under _lock
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._stopping = threading.Event()
        self._accept_paused = 0.0  # until when the listener is not watched (out of descriptors)
        self._started = threading.Event()
        self._stopped = threading.Event()
        # Counted for GET /metrics, by this loop's thread alone (so without a lock).
        self.accepted = 0
        self.shed = {"cap": 0, "memory": 0}

    # ---- the loop ------------------------------------------------------------------------

    def run(self, poll_interval: float) -> None:
        self._started.set()
        self.listener.setblocking(False)
        self._selector.register(self.listener, selectors.EVENT_READ)
        self._wake_reader.setblocking(False)
        self._selector.register(self._wake_reader, selectors.EVENT_READ)
        try:
            while not self._stopping.is_set():
                for key, _ in self._selector.select(timeout=min(poll_interval, 0.1)):
                    try:
                        self._event(key)
                    except Exception:  # one connection's trouble never ends the loop
                        log.exception("a connection event failed")
                self._take_back()
                self._expire_late(time.monotonic())
                self._resume_accepting()
        finally:
            if not self._accept_paused:
                self._selector.unregister(self.listener)
            self._stopped.set()

    def _event(self, key: selectors.SelectorKey) -> None:
        if key.fileobj is self.listener:
            self._accept()
        elif key.fileobj is self._wake_reader:
            self._drain_wakes()
        elif self._open.get(key.fileobj) is not key.data:  # type: ignore[call-overload]
            return  # (one closed earlier in this same batch)
        elif key.data.pending is not None:
            self._write(key.data)
        elif not key.data.busy:
            self._read(key.data)

    def stop(self) -> None:
        """End the loop (it closes no connection: `close_idle` does)."""
        self._stopping.set()
        self._wake()
        if self._started.is_set():
            self._stopped.wait()

    def give_back(self, conn: Connection, keep: bool) -> None:
        """A worker is done with a connection: read it again (`keep`), or forget it (the worker
        closed it). The usual case, a kept-alive connection with nothing more buffered, is
        registered for reading again right here: epoll takes a registration from any thread, and
        waking the loop to do it cost a round trip between threads on every request (0.46 ms of
        a 24 ms Search, measured under yappi; HTTP Searches 10-15% fewer a second). The rest
        (a pipelined request already buffered, the client gone, a stop) goes through the loop's
        thread; a connection that was closed is forgotten there at its next turn."""
        if keep and not conn.buffer and not conn.eof and not self._stopping.is_set():
            with self._lock:  # against the loop closing it meanwhile (`_close`)
                if self._open.get(conn.sock) is not conn:
                    return
                conn.sock.setblocking(False)
                conn.deadline = time.monotonic() + self.keep_alive
                conn.busy = False
                self._selector.register(conn.sock, selectors.EVENT_READ, conn)
            return
        conn.keep = keep
        with self._lock:
            self._returned.append(conn)
        if keep:
            self._wake()

    def send(self, conn: Connection, answer: bytes, keep: bool) -> bool:
        """A worker's answer: what the socket takes now is sent here; the rest is handed to the
        loop, which sends it as the client reads and then reads the connection again (`keep`)
        or closes it. True when all of it was sent here (the worker gives the connection back
        as before). Past MAX_PENDING_BYTES of answers waiting, the worker sends the rest
        itself, as the client reads, for as long as it reads (`_send_here`)."""
        view = memoryview(answer)
        try:
            conn.sock.setblocking(False)
            while view:
                view = view[conn.sock.send(view):]
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            return True  # the client is gone: the worker closes or gives back as it would
        if not view:
            return True
        rest = _held(view)
        held = len(rest.obj)  # type: ignore[arg-type]
        with self._lock:
            room = self._pending_bytes + held <= MAX_PENDING_BYTES
            if room:
                self._pending_bytes += held
                conn.keep = keep
                conn.pending = rest
                self._returned.append(conn)
        if not room:
            self._send_here(conn, rest)
            return True
        self._wake()
        return False

    def _send_here(self, conn: Connection, rest: memoryview) -> None:
        """Send an answer's rest from the worker, as the client reads: given up (the connection
        closed) when the client reads nothing for BODY_DEADLINE_FACTOR socket timeouts."""
        try:
            conn.sock.settimeout(self.timeout * BODY_DEADLINE_FACTOR)
            while rest:
                rest = rest[conn.sock.send(rest):]
        except OSError:
            conn.keep = False  # the worker closes it
            conn.eof = True

    def close_idle(self) -> None:
        """On stop: close every connection no worker is answering."""
        self._take_back()
        for conn in [c for c in self._open.values() if not c.busy]:
            self._close(conn)

    # ---- accepting -------------------------------------------------------------------------

    def _accept(self) -> None:
        while True:
            try:
                sock, address = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors: the backlog keeps the client until one is
                self._shed(room_for=1)  # freed; meanwhile the listener is not watched, or the
                self._pause_accepting()  # loop would spin on it
                return
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.accepted += 1
            conn = Connection(sock, address)
            conn.deadline = conn.opened + self.timeout
            self._shed(room_for=1)
            self._open[sock] = conn
            self._selector.register(sock, selectors.EVENT_READ, conn)

    def _pause_accepting(self) -> None:
        self._selector.unregister(self.listener)
        self._accept_paused = time.monotonic() + ACCEPT_PAUSE_S

    def _resume_accepting(self) -> None:
        if self._accept_paused and time.monotonic() >= self._accept_paused:
            self._accept_paused = 0.0
            self._selector.register(self.listener, selectors.EVENT_READ)

    def _shed(self, room_for: int) -> None:
        """Keep the open connections under the cap: the oldest idle ones go first, then the ones
        whose requests have been arriving longest; never one being answered."""
        excess = len(self._open) + room_for - self.cap
        if excess <= 0:
            return
        idle = sorted((c for c in self._open.values()
                       if not c.busy and c.started is None and c.pending is None),
                      key=lambda c: c.opened)
        slow = sorted((c for c in self._open.values() if not c.busy and c.started is not None),
                      key=lambda c: c.started or 0.0)
        for conn in (idle + slow)[:excess]:
            self._close(conn)
            self.shed["cap"] += 1

    # ---- reading ---------------------------------------------------------------------------

    def _read(self, conn: Connection) -> None:
        try:
            data = conn.sock.recv(READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            if not conn.buffer:
                self._close(conn)
                return
            # The client stopped sending mid-request: what arrived is all there will be, and
            # the handler answers it (a line without a version is a 400) before it is closed.
            conn.eof, conn.needed = True, len(conn.buffer)
            self._hand_over_if_complete(conn)
            return
        if conn.started is None:
            conn.started = time.monotonic()
            conn.deadline = conn.started + self.timeout * BODY_DEADLINE_FACTOR
        conn.buffer += data
        if len(conn.buffer) > READ_CHUNK and self._over_budget():
            self._close(max((c for c in self._open.values() if not c.busy),
                            key=lambda c: len(c.buffer)))
            self.shed["memory"] += 1
            if conn.sock not in self._open:
                return
        self._hand_over_if_complete(conn)

    def _over_budget(self) -> bool:
        """Whether the requests arriving hold more than MAX_BUFFERED_BYTES in all (checked only
        when a connection's buffer passes a read's size: most requests never do)."""
        return sum(len(c.buffer) for c in self._open.values()) > MAX_BUFFERED_BYTES

    def _hand_over_if_complete(self, conn: Connection) -> None:
        if conn.needed is None:
            if conn.scanned == 0 and (empty := leading_empty_lines(conn.buffer)):
                del conn.buffer[:empty]
                if not conn.buffer:
                    return
            end = head_end(conn.buffer, conn.scanned)
            if end is None:
                conn.scanned = len(conn.buffer)
                if len(conn.buffer) <= MAX_HEAD_BYTES and not not_http1(conn.buffer):
                    return
                end = len(conn.buffer)  # no head end in sight, or not HTTP: the handler refuses it
            head = bytes(conn.buffer[:end])
            conn.needed = end + awaited_body_length(head, self.max_body)
            if conn.needed > end:  # the body's own deadline starts with the head's end
                conn.deadline = time.monotonic() + self.timeout * BODY_DEADLINE_FACTOR
                if expects_continue(head) and len(conn.buffer) < conn.needed:
                    _send_continue(conn.sock)
        if len(conn.buffer) < conn.needed:
            return
        self._unregister(conn.sock)
        conn.busy = True
        self._dispatch(conn, conn.take_request())

    def _take_back(self) -> None:
        with self._lock:
            returned, self._returned = self._returned, []
        for conn in returned:
            conn.busy = False
            if conn.pending is not None:
                self._start_writing(conn)
                continue
            if conn.keep and conn.eof:
                self._close(conn)
                continue
            if not conn.keep:
                self._open.pop(conn.sock, None)
                continue
            if self._stopping.is_set():
                self._close(conn)
                continue
            conn.sock.setblocking(False)
            self._read_again(conn)

    def _read_again(self, conn: Connection) -> None:
        """Watch a connection answered for its next request; one already buffered (pipelined
        while it was answered) is taken at once."""
        conn.deadline = time.monotonic() + self.keep_alive
        self._selector.register(conn.sock, selectors.EVENT_READ, conn)
        if conn.buffer:
            conn.started = time.monotonic()
            conn.deadline = conn.started + self.timeout * BODY_DEADLINE_FACTOR
            self._hand_over_if_complete(conn)

    # ---- writing ---------------------------------------------------------------------------

    def _start_writing(self, conn: Connection) -> None:
        if conn.sock not in self._open:
            self._forget_pending(conn)
            return
        conn.deadline = time.monotonic() + self.timeout * BODY_DEADLINE_FACTOR
        self._selector.register(conn.sock, selectors.EVENT_WRITE, conn)

    def _write(self, conn: Connection) -> None:
        assert conn.pending is not None
        try:
            sent = conn.sock.send(conn.pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        # A client that reads keeps its connection: the deadline is for one that stops.
        conn.deadline = time.monotonic() + self.timeout * BODY_DEADLINE_FACTOR
        rest = conn.pending[sent:]
        if rest:
            kept = _held(rest)
            if kept.obj is not rest.obj:  # the part sent let go: count what is held now
                with self._lock:
                    self._pending_bytes -= len(conn.pending.obj) - len(kept)  # type: ignore[arg-type]
            conn.pending = kept
            return
        self._forget_pending(conn)
        self._unregister(conn.sock)
        if not conn.keep or conn.eof or self._stopping.is_set():
            self._close(conn)
            return
        self._read_again(conn)

    def _expire_late(self, now: float) -> None:
        late = [c for c in self._open.values() if c.pending is not None and c.deadline < now]
        for conn in late:  # a client that does not read its answer in time
            self._close(conn)
        for conn in [c for c in self._open.values() if not c.busy and c.deadline < now]:
            body_arriving = conn.needed is not None
            with self._lock:
                self._unregister(conn.sock)
                del self._open[conn.sock]
            self._expire(conn, body_arriving)

    # ---- closing ---------------------------------------------------------------------------

    def _close(self, conn: Connection) -> None:
        self._forget_pending(conn)
        with self._lock:  # a worker's `give_back` registers under the same lock
            if not conn.busy:
                self._unregister(conn.sock)
            self._open.pop(conn.sock, None)
            conn.sock.close()

    def _forget_pending(self, conn: Connection) -> None:
        """The connection's answer is sent, or will never be: what it held is counted no more."""
        with self._lock:
            if conn.pending is not None:
                self._pending_bytes -= len(conn.pending.obj)  # type: ignore[arg-type]
                conn.pending = None

    @property
    def pending_bytes(self) -> int:
        """What the answers waiting for their clients hold in memory now."""
        return self._pending_bytes

    def _unregister(self, sock: socket.socket) -> None:
        """Stop reading a socket; one a worker has not registered again yet is no error."""
        try:
            self._selector.unregister(sock)
        except (KeyError, ValueError):
            pass

    def _wake(self) -> None:
        try:
            self._wake_writer.send(b"\0")
        except OSError:
            pass

    def _drain_wakes(self) -> None:
        try:
            while self._wake_reader.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def open_count(self) -> int:
        return len(self._open)


def _send_continue(sock: socket.socket) -> None:
    """Tell a client waiting to send its body (Expect: 100-continue) to go on: the loop waits
    for whole bodies, so the handler's own 100 would come too late."""
    try:
        sock.send(b"HTTP/1.1 100 Continue\r\n\r\n")
    except OSError:
        pass


def _held(view: memoryview) -> memoryview:
    """An answer's unsent part as it is held: while it is the smaller part of the whole, a copy
    of its own, so the part sent is let go (a slice keeps the whole answer alive)."""
    whole = len(view.obj)  # type: ignore[arg-type]
    return memoryview(bytes(view)) if len(view) * 2 < whole else view
