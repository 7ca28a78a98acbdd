"""Serving on every core: N server processes sharing one listening socket.

One Python process runs Python on one core (the GIL), so one server process serves one core's
worth of Searches. `serve --processes N` binds and listens once, then forks N processes before any
thread exists; each builds its own server over the inherited socket (its own store connections,
worker threads, connection loop and checkpointer) and accepts from it, so the kernel spreads
connections over them. What must hold across processes already does at the file level: SQLite's
locks serialise the writers of one user file (an Add's idempotency check and insert are one
`BEGIN IMMEDIATE`), deletion is one transaction, every process holds the store's shared lock (so
`purge` refuses), and checkpoints never wait on a reader.

The parent only supervises: SIGTERM or SIGINT is passed to every process, each stops gracefully
(requests in flight finish), and the parent exits with 0 when all have, 1 when one failed.
SIGUSR1 (close the idle user files, for the mover) is passed on too.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import socket
import sys
from types import FrameType

from aml_retriever.http.metrics import Peers
from aml_retriever.settings import Config
from aml_retriever.storage.store import Store

log = logging.getLogger("aml_retriever.server")
PR_SET_PDEATHSIG = 1  # prctl(2)


def listen(config: Config) -> socket.socket:
    """The one listening socket every process accepts from."""
    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((config.host, config.port))
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    return sock


def serve_processes(config: Config) -> int:
    """Fork `config.processes` servers on one socket and wait for them; the exit status."""
    from aml_retriever.app import App

    # Made (or upgraded) once, here: a store that cannot be used is refused in one line before
    # any process starts, and the processes never race to create it.
    Store(config.db_path, config.synchronous, config.retrieval()).close()
    listener = listen(config)
    log.info("serving on %s:%d with %d processes", config.host, listener.getsockname()[1],
             config.processes)
    peers = Peers(config.processes)  # where they show each other their metrics (metrics.py)
    children = []
    for process in range(config.processes):
        pid = os.fork()
        if pid == 0:  # a server process: nothing but its own server from here on
            _stop_with_parent()
            code = 1
            try:
                App(config, listener=listener, process=process, peers=peers).run_forever()
                code = 0
            except Exception:
                log.exception("a server process failed")
            finally:
                sys.stderr.flush()
                os._exit(code)
        children.append(pid)
    listener.close()  # the parent accepts nothing

    def forward(signum: int, frame: FrameType | None) -> None:
        for child in children:
            try:
                os.kill(child, signum)
            except ProcessLookupError:
                pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(sig, forward)
    failed = False
    for child in children:
        while True:
            try:
                _, status = os.waitpid(child, 0)
                break
            except InterruptedError:
                continue
        failed = failed or os.waitstatus_to_exitcode(status) != 0
    return 1 if failed else 0


def _stop_with_parent() -> None:
    """Ask Linux to send this process SIGTERM when its parent dies, so that a supervisor killed
    outright (SIGKILL) leaves no server processes holding the port and the store behind."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass
