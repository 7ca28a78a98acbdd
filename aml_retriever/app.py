"""Assembles store, service and HTTP server, runs them, and stops them gracefully."""

from __future__ import annotations

import logging
import resource
import shutil
import signal
import socket
import threading
from pathlib import Path

from aml_retriever.common.errors import StoreError
from aml_retriever.http.auth import is_loopback
from aml_retriever.http.metrics import Metrics, Peers, Publisher, StoreScan
from aml_retriever.http.server import AmlHTTPServer
from aml_retriever.memory.service import MemoryService
from aml_retriever.settings import Config
from aml_retriever.storage.pool import IDLE_CONNECTIONS
from aml_retriever.storage.store import Store

log = logging.getLogger("aml_retriever.server")
# Below this much free space on the store's disk, start-up warns that writes will fail: an Add
# of the largest accepted body (1 MiB) with its index rows and WAL frames needs a few MiB.
LOW_SPACE_BYTES = 16 * 1024 * 1024
# Descriptors kept for everything else a process holds: standard streams, the log, the catalog,
# the listening socket, Python's own.
DESCRIPTOR_MARGIN = 32
# Extra seconds the stop waits for requests in flight after closing idle connections.
STOP_GRACE_S = 5.0


class App:
    """A running service: started by `start()`, stopped by `stop()` (idempotent)."""

    def __init__(self, config: Config, listener: socket.socket | None = None, process: int = 0,
                 peers: Peers | None = None) -> None:
        """`process` numbers this server among those of `serve --processes N`, which show each
        other their metrics through `peers`."""
        if not config.api_key and not is_loopback(config.host):
            if not config.allow_unauthenticated:
                raise StoreError(f"refusing to serve {config.host} without an API key; set "
                                 "--api-key or pass --allow-unauthenticated to expose it anyway",
                                 "host")
            log.warning("serving %s without an API key (--allow-unauthenticated): anyone who "
                        "reaches it reads and deletes every user's memory", config.host)
        descriptors = _raise_file_limit()
        # A write past a file-size limit must fail with an error the store reports (507), not
        # kill the process with SIGXFSZ.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        self.config = config
        retrieval = config.retrieval()
        idle = idle_connections(descriptors, config)
        self.store = Store(config.db_path, config.synchronous, retrieval, idle_connections=idle)
        self.store.hold_shared()
        _warn_if_full(self.store.path)
        self.service = MemoryService(self.store, config.provenance, retrieval,
                                     config.default_max_words or None,
                                     config.answer_window_tokens, config.reader_view,
                                     config.held_megabytes * 2**20)
        self.metrics = Metrics(process)
        self.metrics.held = self.service.held
        self.metrics.store = StoreScan(self.service.stats)
        self.store.on_checkpoint = self.metrics.checkpointed
        self.server = AmlHTTPServer(config, self.service, self.metrics,
                                    max_connections=config.max_connections
                                    or connection_cap(descriptors, idle, config), listener=listener)
        self.publisher: Publisher | None = None
        if peers is not None:
            self.metrics.peers = peers
            self.publisher = Publisher(self.metrics, peers)
        self.checkpointer = Checkpointer(self.store, config.checkpoint_interval)
        self._serving: threading.Thread | None = None
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def url(self) -> str:
        host = self.config.host
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.port}"

    def start(self) -> App:
        """Serve in a background thread (tests, embedding)."""
        self._start_helpers()
        self._serving = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1},
                                         name="aml-acceptor", daemon=True)
        self._serving.start()
        log.info("serving on %s (store %s)%s", self.url, self.config.db_path, window_note(self.config))
        log.info("the inspector page: %s/ui/", self.url)
        return self

    def run_forever(self) -> None:
        """Serve in this thread until SIGTERM, SIGINT or SIGHUP, then stop gracefully (a hang-up
        of the terminal it was started from ends it as a stop does, never mid-request)."""
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            if sig == signal.SIGHUP and signal.getsignal(sig) is signal.SIG_IGN:
                continue  # started under nohup, or a process of `--processes` (its supervisor's)
            signal.signal(sig, lambda *_: threading.Thread(target=self.server.shutdown).start())
        # Close the idle user files at the next checkpoint tick: the mover asks before it
        # removes the files of users moved to another shard (mover.py).
        signal.signal(signal.SIGUSR1, lambda *_: self.checkpointer.release.set())
        self._start_helpers()
        log.info("serving on %s (store %s)%s", self.url, self.config.db_path, window_note(self.config))
        log.info("the inspector page: %s/ui/", self.url)
        self.server.serve_forever(poll_interval=0.2)
        self.stop()

    def _start_helpers(self) -> None:
        self.checkpointer.start()
        if self.publisher is not None:
            self.publisher.start()

    def stop(self) -> None:
        """Stop accepting, finish requests in flight, checkpoint, close every file."""
        with self._stop_lock:
            if self._stopped.is_set():
                return
            self._stopped.set()
        if self._serving is not None:
            self.server.shutdown()
            self._serving.join()
        self.server.server_close()
        self.server.drain(self.config.socket_timeout + STOP_GRACE_S)
        for helper in (self.checkpointer, self.publisher):
            if helper is not None:
                helper.stop_event.set()
                if helper.is_alive():
                    helper.join()
        self.store.checkpoint_dirty()
        self.store.close()
        log.info("stopped")


def _warn_if_full(path: Path) -> None:
    """Say at start-up when the store's disk is (nearly) full: reads are served, writes will
    fail (507) until space is freed."""
    free = shutil.disk_usage(path.parent).free
    if free < LOW_SPACE_BYTES:
        log.warning("only %d bytes free on the disk of %s: Searches are served, but Adds and "
                    "deletions may fail for lack of space until some is freed", free, path)


def _raise_file_limit() -> int:
    """Each open user file costs three descriptors; lift the soft limit to the hard one.
    Returns the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY
                                                        else 65536, hard))
        except (ValueError, OSError):
            pass
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 65536 if soft == resource.RLIM_INFINITY else soft


def idle_connections(descriptors: int, config: Config) -> int:
    """How many user files may stay open between requests: a third of the descriptor limit at
    most (three descriptors each: the file, its WAL, its shared memory), the rest for
    connections; at least 2, at most the store's default. At the Linux default of 1,024: 64;
    at 256 (macOS): 28."""
    return max(2, min(IDLE_CONNECTIONS, descriptors // 9))


def connection_cap(descriptors: int, idle: int, config: Config) -> int:
    """How many client connections may be open at once: the descriptors left after the idle
    user files, the files the requests being served open (three each), and a margin for logs,
    the catalog and Python's own. At 1,024 descriptors: 794; at 256: 134."""
    return max(8, descriptors - 3 * idle - 3 * config.active_requests - DESCRIPTOR_MARGIN)


class Checkpointer(threading.Thread):
    """Runs the store's planned WAL checkpoints from one place, every `interval` seconds, closes
    the idle connections to user files another process removed (their space comes back), and
    closes the idle user files when asked (`release`, set on SIGUSR1 by the mover)."""

    def __init__(self, store: Store, interval: float) -> None:
        super().__init__(name="aml-checkpointer", daemon=True)
        self.store, self.interval = store, interval
        self.stop_event = threading.Event()
        self.release = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            try:
                self.store.checkpoint_dirty()
                self.store.close_removed()
                if self.release.is_set():
                    self.release.clear()
                    self.store.release_idle()
            except Exception as exc:  # retried on the next tick
                log.warning("checkpoint failed: %s", type(exc).__name__)


def window_note(config: Config) -> str:
    """What a launch's first log line says of the answer window and the reader's view."""
    tokens = config.answer_window_tokens
    note = f"; answer window {tokens} tokens" if tokens else ""
    return note + ("; reader's view on" if config.reader_view else "")
