"""Serving on every core: N server processes sharing one listening socket.

One Python process runs Python on one core (the GIL), so one server process serves one core's
worth of Searches. `serve --processes N` binds and listens once, then forks N processes before any
thread exists; each builds its own server over the inherited socket (its own store connections,
worker threads, connection loop and checkpointer) and accepts from it, so the kernel spreads
connections over them. What must hold across processes already does at the file level: SQLite's
locks serialise the writers of one user file (an Add's idempotency check and insert are one
`BEGIN IMMEDIATE`), deletion is one transaction, every process holds the store's shared lock (so
`purge` refuses), and checkpoints never wait on a reader.

The parent only supervises, and never starts a thread (it forks). It reaps every server process
that ends. One that ends while the server is not stopping (killed, crashed, out of memory) is
logged in one line (its number, pid, exit status or signal) and replaced by a new one with the
same number: that number's metrics slot is emptied first, so a scrape never shows the dead one's
counts, and the new one counts from zero (a counter reset, as after a restart). Bounds: a process
that exits on its own within QUICK_DEATH_S of starting CRASH_LIMIT times in a row (a kill between
them starts the count again), or one of the
first N that cannot build its server at all (exit status START_FAILED: a bad setting, an unusable
store), stops the server with one error line and exit status 1, instead of forking forever. One
killed by a signal (the kernel's out-of-memory killer, a crash) is never a reason to stop: a
request could make that happen again and again, and stop the whole server. It is replaced,
after quick deaths later and later (BACKOFF_S doubling, to BACKOFF_MAX_S), so a process that
cannot live forks a few times a minute, not forever in a loop.

SIGTERM, SIGINT and SIGHUP stop the server gracefully: the parent sends SIGTERM to every process,
each finishes the requests in flight, and the parent exits with 0 when all have ended with 0, 1
otherwise. The server processes ignore SIGHUP themselves (a terminal hang-up reaches the whole
process group: the parent turns it into the graceful stop). SIGUSR1 (close the idle user files,
for the mover) is passed on. docs/RELIABILITY.md, "Processes: dead workers and signals".
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import signal
import socket
import sys
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, NoReturn

from aml_retriever.http.metrics import Peers
from aml_retriever.settings import Config
from aml_retriever.storage.store import Store

log = logging.getLogger("aml_retriever.server")
PR_SET_PDEATHSIG = 1  # prctl(2)
QUICK_DEATH_S = 1.0  # a server process that ends sooner than this after its fork died "quickly"
CRASH_LIMIT = 5  # quick exits in a row, of one process number, that stop the server
BACKOFF_S = 0.5  # the wait before replacing one killed quickly, doubled at each quick death
BACKOFF_MAX_S = 30.0
START_FAILED = 3  # a server process's exit status when its server could not be built
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
HANDLED = (*STOP_SIGNALS, signal.SIGUSR1, signal.SIGCHLD)


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


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: a container's cpuset counts)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # a platform without affinity (macOS)
        return os.cpu_count() or 1


def serve_processes(config: Config) -> int:
    """Fork `config.processes` servers on one socket and supervise them; the exit status."""
    from aml_retriever.app import App, window_note  # imported once here, not in every fork

    # Made (or upgraded) once, here: a store that cannot be used is refused in one line before
    # any process starts, and the processes never race to create it.
    Store(config.db_path, config.synchronous, config.retrieval()).close()
    listener = listen(config)
    log.info("serving on %s:%d with %d processes%s", config.host, listener.getsockname()[1],
             config.processes, window_note(config))
    # Where they show each other their metrics (metrics.py).
    return Supervisor(config, listener, Peers(config.processes), App).run()


@dataclass
class Worker:
    """One server process, as the supervisor knows it."""

    process: int  # its number, 0 to N-1: its metrics slot and `process` label
    started: float  # time.monotonic() at its fork
    replacement: bool  # forked in place of one that died (not one of the first N)


class Supervisor:
    """The parent of `serve --processes N`: forks the server processes, replaces one that dies,
    passes signals on, and stops them all. Signal handlers only note the signal (and wake the
    loop through `signal.set_wakeup_fd`); everything else happens in `run`'s loop, one thing at
    a time."""

    def __init__(self, config: Config, listener: socket.socket, peers: Peers,
                 app: Callable[..., Any]) -> None:
        self.config, self.listener, self.peers, self.app = config, listener, peers, app
        self.pid = os.getpid()
        self.workers: dict[int, Worker] = {}  # by pid
        self.quick_deaths = [0] * config.processes  # in a row, by process number: the backoff
        self.quick_exits = [0] * config.processes  # on its own, in a row: the crash-loop stop
        self.due: dict[int, float] = {}  # process number -> when it is started again
        self.stopping = False
        self.failed = False
        self._signals: deque[int] = deque()
        self._wake = (-1, -1)

    def run(self) -> int:
        """Supervise until every server process has ended after a stop; the exit status."""
        self._wake = os.pipe()
        for fd in self._wake:
            os.set_blocking(fd, False)
        previous = {sig: signal.signal(sig, self._note) for sig in HANDLED}
        previous_wake = signal.set_wakeup_fd(self._wake[1])
        try:
            for process in range(self.config.processes):
                if not self.stopping:
                    self._start(process, replacement=False)
            while self.workers or self.due:
                self._take_signals()
                self._reap()
                self._start_due()
                if self.workers or self.due:
                    wait = min([1.0, *(at - time.monotonic() for at in self.due.values())])
                    select.select([self._wake[0]], [], [], max(0.0, wait))  # a signal wakes it
                    _drain(self._wake[0])
        finally:
            signal.set_wakeup_fd(previous_wake)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for fd in self._wake:
                os.close(fd)
            self.listener.close()
        return 1 if self.failed else 0

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self._signals.append(signum)

    def _take_signals(self) -> None:
        while self._signals:
            signum = self._signals.popleft()
            if signum == signal.SIGUSR1:
                self._send(signal.SIGUSR1)
            elif signum in STOP_SIGNALS:
                if not self.stopping:
                    log.info("stopping on %s: the server processes finish the requests in flight",
                             signal.Signals(signum).name)
                self.stop()

    def stop(self, failed: bool = False) -> None:
        """Stop every server process gracefully (again, if asked again); replace none."""
        self.failed = self.failed or failed
        self.due.clear()
        if not self.stopping:
            self.stopping = True
            self.listener.close()  # once the processes have closed theirs, the port is free
        self._send(signal.SIGTERM)

    def _send(self, signum: int) -> None:
        for pid in self.workers:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def _start(self, process: int, replacement: bool) -> None:
        # Signals are held back over the fork: the child sets its own dispositions before any
        # reaches it, and the parent records the pid before it can pass one on.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)
        try:
            pid = os.fork()
        except OSError as exc:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            log.error("cannot start server process %d (%s); stopping the server", process,
                      exc.strerror or exc)
            self.stop(failed=True)
            return
        if pid == 0:
            self._serve(process, held)  # never returns
        self.workers[pid] = Worker(process, time.monotonic(), replacement)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        log.info("server process %d started (pid %d)", process, pid)

    def _serve(self, process: int, held: set[signal.Signals]) -> NoReturn:
        """A server process, from its fork to its end: nothing but its own server."""
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            for fd in self._wake:
                os.close(fd)
            # Until its server takes over SIGTERM and SIGINT (App.run_forever) it has accepted
            # nothing, so a stop ends it at once; SIGUSR1 has no idle file to close yet.
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, _end_before_serving)
            signal.signal(signal.SIGUSR1, signal.SIG_IGN)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the supervisor's to act on
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            _stop_with_parent()
            if os.getppid() != self.pid:  # the supervisor died before it could be told
                os._exit(0)
            try:
                app = self.app(self.config, listener=self.listener, process=process,
                               peers=self.peers)
            except Exception as exc:
                code = START_FAILED
                reason = getattr(exc, "message", None)  # the service's own errors say it in one line
                if isinstance(reason, str):
                    log.error("server process %d cannot start: %s", process, reason)
                else:
                    log.exception("server process %d cannot start", process)
            else:
                app.run_forever()
                code = 0
        except Exception:
            log.exception("server process %d failed", process)
        finally:
            sys.stderr.flush()
            os._exit(code)

    def _reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            worker = self.workers.pop(pid, None)
            if worker is not None:
                self._ended(pid, worker, status)

    def _ended(self, pid: int, worker: Worker, status: int) -> None:
        process = worker.process
        self.peers.forget(process)  # before any successor: its counts are never shown as alive
        how = describe(status)
        if self.stopping:
            if os.waitstatus_to_exitcode(status) != 0:
                log.warning("server process %d (pid %d) %s while stopping", process, pid, how)
                self.failed = True
            return
        if os.waitstatus_to_exitcode(status) == START_FAILED and not worker.replacement:
            log.error("server process %d (pid %d) could not start; stopping the server",
                      process, pid)
            self.stop(failed=True)
            return
        quick = time.monotonic() - worker.started < QUICK_DEATH_S
        self.quick_deaths[process] = self.quick_deaths[process] + 1 if quick else 0
        # Only quick exits in a row count toward the stop: a kill between them (an operator's
        # `kill`, the out-of-memory killer) starts the count again.
        on_its_own = quick and not os.WIFSIGNALED(status)
        self.quick_exits[process] = self.quick_exits[process] + 1 if on_its_own else 0
        if self.quick_exits[process] >= CRASH_LIMIT:
            log.error("server process %d (pid %d) %s: %d times in a row within %g s of "
                      "starting; stopping the server", process, pid, how, CRASH_LIMIT,
                      QUICK_DEATH_S)
            self.stop(failed=True)
            return
        if not quick:
            log.warning("server process %d (pid %d) %s; starting a new one", process, pid, how)
            self._start(process, replacement=True)
            return
        wait = min(BACKOFF_MAX_S, BACKOFF_S * 2 ** (self.quick_deaths[process] - 1))
        log.warning("server process %d (pid %d) %s within %g s of starting; starting a new one "
                    "in %g s", process, pid, how, QUICK_DEATH_S, wait)
        self.due[process] = time.monotonic() + wait

    def _start_due(self) -> None:
        """Start the replacements whose wait is over."""
        now = time.monotonic()
        for process in [p for p, at in self.due.items() if at <= now]:
            del self.due[process]
            if not self.stopping:
                self._start(process, replacement=True)


def describe(status: int) -> str:
    """How a process ended, from its wait status: "exited with status 1", "was killed by signal
    9 (SIGKILL)"."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "unknown"
        core = ", core dumped" if os.WCOREDUMP(status) else ""
        return f"was killed by signal {number} ({name}{core})"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def _end_before_serving(signum: int, frame: FrameType | None) -> None:
    os._exit(0)


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


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
