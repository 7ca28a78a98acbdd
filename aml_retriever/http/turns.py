"""Turns at the service: whole requests wait here, by user, for a worker, and at most
`slots` run the service at once; the next turn goes to the user with the fewest requests
running, and among those to the one served longest ago (a user never served first): round robin
between users, first come first served within one. Probes and scrapes (/health, /metrics, the
inspector's page) never wait for a turn.

Why the order is decided here, before a worker is taken: one process runs Python on one core, so
the server lets only a few requests into the service at a time (more only fight over the GIL),
and a request waiting holds its bytes, not a thread. When workers took requests first come first
served and only then waited for a turn by user, a bystander's Search queued behind every request
already taken: with 32 clients of one user whose Searches are slow, it waited ~970 ms instead of
78 ms alone. Here it waits for the next turn to free, at most one of those Searches.

How much may wait is bounded by count (`queue_size`) and by bytes (MAX_WAITING_BYTES); past
either, a request is refused with 429 and a Retry-After of when the queue should have room
(`retry_after`), the one status a leaderboard's client honours by waiting and sending again.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from aml_retriever.http import inspector
from aml_retriever.http.framing import head_end
from aml_retriever.http.routes import UNQUEUED

# The most the requests waiting for a turn may hold in all (each holds its head and body, at most
# max_body_bytes): with the connection loop's budgets for requests arriving (128 MiB) and
# answers leaving (256 MiB), a server's buffers stay under 640 MiB whatever its clients do.
MAX_WAITING_BYTES = 256 * 1024 * 1024
# Retry-After bounds, in seconds: a leaderboard's client waits what it is told, up to 60.
RETRY_AFTER_MIN_S, RETRY_AFTER_MAX_S = 1, 60
# How much a finished request moves the estimate of a turn's length (an exponentially weighted
# mean: about the last 20 requests), and the estimate before any has finished.
SERVICE_WEIGHT = 0.05
SERVICE_FIRST_S = 0.05
# The first "user_id" key of a JSON body and its string value (escapes and all): in valid JSON a
# quote cannot stand unescaped inside a string, so this is always a key of some object; when it
# is a nested object's, only the order of turns suffers, never an answer.
_USER_ID = re.compile(rb'"user_id"\s*:\s*"((?:[^"\\]|\\.){0,1024})"')


@dataclass(eq=False)
class Ticket:
    """A whole request waiting for a worker: whose it is, and whether it waits for a turn."""

    job: Any  # what the worker is handed (server.py: the connection, the bytes, when)
    size: int  # bytes held while it waits
    user: str = ""  # the user it names ('' for none): its turn goes by this
    quick: bool = False  # a probe, a scrape or the page: answered without a turn
    started: float = field(default=0.0)  # when a worker took it


def whose(request: bytes) -> tuple[str, bool]:
    """The user a whole request names and whether it is a probe or scrape, read from its bytes
    in the connection loop's thread (microseconds: no parse of the body). The path's user for
    /users/{user_id}/..., else the body's first "user_id"; a request too broken to say is
    nobody's, and its handler refuses it in turn."""
    line_end = request.find(b"\n")
    parts = request[:line_end if line_end >= 0 else len(request)].split()
    if len(parts) < 2:
        return "", False
    path = urlsplit(parts[1].decode("latin-1")).path
    if path in UNQUEUED or inspector.serves(path):
        return "", True
    segments = path.split("/")
    if len(segments) > 2 and segments[1] == "users":
        return unquote(segments[2], errors="replace"), False
    body_at = head_end(request)
    found = _USER_ID.search(request, body_at) if body_at is not None else None
    if found is None:
        return "", False
    try:
        named = json.loads(b'"' + found.group(1) + b'"')
    except ValueError:
        return "", False
    return named if isinstance(named, str) else "", False


class TurnQueue:
    """Requests waiting for a worker: quick ones first come first served, the rest by user; at
    most `slots` of those run at once; at most `most_waiting` requests and `most_bytes` wait."""

    def __init__(self, slots: int, most_waiting: int, most_bytes: int = MAX_WAITING_BYTES) -> None:
        self.slots = slots
        self.most_waiting = most_waiting
        self.most_bytes = most_bytes
        self._ready = threading.Condition()
        self._quick: deque[Ticket] = deque()
        self._waiting: dict[str, deque[Ticket]] = {}
        self._count = 0  # tickets waiting, quick ones included
        self._bytes = 0
        self._running: dict[str, int] = {}  # user -> requests running
        self._running_total = 0
        self._served: dict[str, int] = {}  # user -> when its last turn was granted
        self._grants = itertools.count()
        self._turn_s = SERVICE_FIRST_S  # the estimated length of a turn
        self._closed = False

    # ---- the connection loop's side --------------------------------------------------------

    def offer(self, ticket: Ticket) -> int | None:
        """Queue a request; None when queued, else the seconds its client should wait before
        sending it again (the queue is full). Probes and scrapes are always queued: they are
        answered at once, and a full queue is when they are wanted most."""
        with self._ready:
            if not ticket.quick and self._count and (
                    self._count >= self.most_waiting or self._bytes + ticket.size > self.most_bytes):
                return self._retry_after()
            if ticket.quick:
                self._quick.append(ticket)
            else:
                self._waiting.setdefault(ticket.user, deque()).append(ticket)
            self._count += 1
            self._bytes += ticket.size
            self._ready.notify()
            return None

    def _retry_after(self) -> int:
        """When the queue should have room: every request waiting and running served, at the
        estimated length of a turn, `slots` at a time."""
        backlog = (self._count + self._running_total) * self._turn_s / max(1, self.slots)
        return max(RETRY_AFTER_MIN_S, min(RETRY_AFTER_MAX_S, math.ceil(backlog)))

    # ---- the workers' side -----------------------------------------------------------------

    def take(self) -> Ticket | None:
        """The next request for a worker, waiting for one; None once closed and nothing waits."""
        with self._ready:
            while True:
                ticket = self._next()
                if ticket is not None:
                    self._count -= 1
                    self._bytes -= ticket.size
                    ticket.started = time.monotonic()
                    return ticket
                if self._closed and not self._count:
                    return None
                self._ready.wait()

    def _next(self) -> Ticket | None:
        if self._quick:
            return self._quick.popleft()
        if not self._waiting or self._running_total >= self.slots:
            return None
        user = min(self._waiting, key=lambda u: (self._running.get(u, 0), self._served.get(u, -1)))
        queue = self._waiting[user]
        ticket = queue.popleft()
        if not queue:
            del self._waiting[user]
        self._running[user] = self._running.get(user, 0) + 1
        self._running_total += 1
        self._served[user] = next(self._grants)
        return ticket

    def done(self, ticket: Ticket) -> None:
        """A worker has answered `ticket`: its turn, if it had one, goes to the next."""
        if ticket.quick:
            return
        with self._ready:
            self._turn_s += SERVICE_WEIGHT * (time.monotonic() - ticket.started - self._turn_s)
            self._running_total -= 1
            left = self._running[ticket.user] - 1
            if left:
                self._running[ticket.user] = left
            else:
                del self._running[ticket.user]
                if ticket.user not in self._waiting:  # kept only while it has requests: bounded
                    del self._served[ticket.user]
            self._ready.notify()

    def close(self) -> None:
        """Let the workers end once what waits is answered."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()

    @property
    def waiting(self) -> int:
        return self._count
