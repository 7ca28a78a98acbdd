"""Turns at the service: at most `active_requests` requests run it at once, and when more wait,
the next turn goes to the user with the fewest requests running, and among those to the one
served longest ago (a user never served first): round robin between users, first come first
served within one.

A single process runs Python on one core, so the server lets only a few requests into the
service at a time (more only fight over the GIL). In arrival order alone, a user whose Searches
are slow (the answer window over a 100,000-message memory: ~150 ms each) holds every turn while
its clients keep sending: another user's small Search waited behind 16 of them, 2.5 s against 44
ms alone (bench/bench_window_size.py). By user, it waits for the next turn to free, at most one
of those Searches.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager


class Turns:
    """At most `slots` holders at once; the next turn to the waiting user with the fewest held,
    then the one served longest ago."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}  # user -> turns held
        self._waiting: dict[str, deque[threading.Event]] = {}
        self._arrivals = itertools.count()
        self._served: dict[str, int] = {}  # user -> when its last turn was granted
        self._running = 0

    @contextmanager
    def turn(self, user: str) -> Iterator[None]:
        """Wait for a turn for `user`'s request, hold it while the body runs."""
        with self._lock:
            granted = self._running < self.slots and not self._waiting
            if granted:
                self._grant(user)
            else:
                event = threading.Event()
                self._waiting.setdefault(user, deque()).append(event)
        if not granted:
            event.wait()
        try:
            yield
        finally:
            self._release(user)

    def _grant(self, user: str) -> None:
        self._running += 1
        self._held[user] = self._held.get(user, 0) + 1
        self._served[user] = next(self._arrivals)

    def _release(self, user: str) -> None:
        with self._lock:
            self._running -= 1
            held = self._held[user] - 1
            if held:
                self._held[user] = held
            else:
                del self._held[user]
                if user not in self._waiting:  # kept only while it has requests: bounded
                    del self._served[user]
            if self._waiting:
                after = min(self._waiting, key=lambda u: (self._held.get(u, 0),
                                                          self._served.get(u, -1)))
                queue = self._waiting[after]
                event = queue.popleft()
                if not queue:
                    del self._waiting[after]
                self._grant(after)
                event.set()
