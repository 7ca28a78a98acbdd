"""Refused connections closed gently: what their clients still send is read and dropped for a
while, so a client gets to read its answer instead of a reset."""

from __future__ import annotations

import math
import selectors
import socket
import threading
import time
from typing import Any

# A connection refused with a 429 is half-closed, then kept this long (at most this many at once)
# while what the client sends is read and dropped. Closed at once with its request unread, it
# would be reset, and a client still sending would see a broken pipe instead of the 429.
REJECTED_LINGER_S = 1.0
REJECTED_LINGER_MAX = 512


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
