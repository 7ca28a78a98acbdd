"""What the server counts, and `GET /metrics`: the Prometheus text exposition format 0.0.4.

Each server process counts its own requests, latencies, connections and checkpoints, under a
`process` label (0 to N-1; always 0 with one process). With `serve --processes N` a scrape reaches
one process at random (the kernel picks who accepts), so every process writes its counts to a
memory map the processes share once a second (`Peers`) and the one answering adds the others'
last counts to its own live ones: a scrape always shows every process, each under its own label (sum them for
the server's totals), the others' numbers at most about a second old (`aml_metrics_age_seconds`).
The store's gauges (users, messages, bytes) come from a scan of every user file, cached
(`StoreScan`). Label values are route templates, methods, statuses and process numbers: never a
user id or anything a client wrote.
"""

from __future__ import annotations

import binascii
import bisect
import json
import mmap
import struct
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Latency buckets (seconds), from what was measured here (docs/BENCHMARKS.md): GET /health is
# answered in about 0.3 ms; a Search alone takes 1.5-7.6 ms (users of 1k-100k messages), an Add
# 2-3 ms; with 4 to 16 clients at once p50 is 10-60 ms and p99 100-311 ms; the longest waits a
# request can meet are SQLite's busy timeout (15 s) and a socket timeout (10 s by default), and
# under a leaderboard's 256 Searches at once a request waits its turn for seconds (p99 4.5 s on
# two cores) to minutes. So: a bucket under /health, two to three per decade through the usual
# range, and a tail to 5 minutes.
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
           30.0, 60.0, 300.0)
# How often a process of `serve --processes N` writes its counts for the others to show, and the
# room it has for them: a snapshot is about 100 bytes a series; 8 routes x 8 methods x 10
# statuses, with their histograms, come to about 80 KB.
PUBLISH_INTERVAL_S = 1.0
PEER_SLOT_BYTES = 1024 * 1024
# The store scan opens every user file (about 1 ms each: 1.0-1.4 s for 1,000 users, measured): it
# runs at most once in STORE_SCAN_MIN_AGE_S, and never more often than once in
# STORE_SCAN_COST_FACTOR times its own last duration, so it takes at most a twentieth of one
# core's time (10,000 users: a scan every 4 minutes or so).
STORE_SCAN_MIN_AGE_S = 30.0
STORE_SCAN_COST_FACTOR = 20
# How long a scrape waits for a scan it started; past that it answers with the previous scan's
# values (none on the very first) and the scan finishes in the background.
STORE_SCAN_WAIT_S = 1.0

Labels = tuple[tuple[str, str], ...]
Sample = tuple[str, Labels, float]  # (name with any _bucket/_sum/_count suffix, labels, value)


@dataclass(frozen=True)
class Family:
    name: str
    kind: str  # counter, gauge or histogram
    help: str


FAMILIES = (
    Family("aml_http_requests_total", "counter",
           "Requests answered, by method, route template and status (answers of the connection "
           "loop itself, 408 and 429, have route -)."),
    Family("aml_http_request_duration_seconds", "histogram",
           "Time from a whole request's arrival to its answer written (queue wait included), by "
           "route template."),
    Family("aml_http_requests_in_flight", "gauge",
           "Requests being answered now (the scrape reading it included)."),
    Family("aml_http_requests_waiting", "gauge",
           "Whole requests waiting for a turn at the service (they hold their bytes, no thread)."),
    Family("aml_connections_open", "gauge", "Client connections open now."),
    Family("aml_connections_accepted_total", "counter", "Client connections accepted."),
    Family("aml_connections_shed_total", "counter",
           "Connections closed to stay under max_connections (reason cap) or under the memory "
           "bound on request bytes still arriving (reason memory)."),
    Family("aml_connections_refused_total", "counter",
           "Requests answered 429 with Retry-After at once because the queue of requests "
           "waiting for a turn was full (queue_size requests or 256 MiB)."),
    Family("aml_connections_expired_total", "counter",
           "Connections closed for slowness: idle past socket_timeout, or keep_alive_timeout once "
           "answered (stage idle), a head too "
           "slow (stage head, closed without an answer), a body too slow (stage body, 408)."),
    Family("aml_wal_checkpoints_total", "counter",
           "WAL checkpoints of user files: done, or busy (a reader or a full disk in the way: "
           "retried)."),
    Family("aml_held_users", "gauge", "Users whose state this process holds between Searches."),
    Family("aml_held_bytes", "gauge",
           "Bytes this process holds of its users between Searches (its estimate)."),
    Family("aml_metrics_age_seconds", "gauge",
           "How old each process's numbers in this answer are (0: the process answering)."),
    Family("aml_store_users", "gauge", "Users with at least one message (from the store scan)."),
    Family("aml_store_messages", "gauge", "Messages stored (from the store scan)."),
    Family("aml_store_size_bytes", "gauge",
           "Bytes of the store's files: catalog, user files, their logs (from the store scan)."),
    Family("aml_store_damaged_user_files", "gauge",
           "User files the store scan could not read."),
    Family("aml_store_quarantined_user_files", "gauge", "Damaged user files set aside."),
    Family("aml_store_scan_age_seconds", "gauge", "Seconds since the store scan shown ended."),
    Family("aml_store_scan_duration_seconds", "gauge", "How long the store scan shown took."),
)
_ORDER = {f.name: i for i, f in enumerate(FAMILIES)}
_STORE_GAUGES = {"aml_store_users": "users", "aml_store_messages": "messages",
                 "aml_store_size_bytes": "store_bytes",
                 "aml_store_damaged_user_files": "damaged_user_files",
                 "aml_store_quarantined_user_files": "quarantined_user_files"}


class ConnectionCounts(Protocol):
    """What the connection loop counts (connections.py; written by its thread alone)."""

    accepted: int
    shed: dict[str, int]

    def open_count(self) -> int: ...


class HeldCounts(Protocol):
    """What the process holds of its users between Searches (engine/held.HeldUsers)."""

    @property
    def users(self) -> int: ...

    @property
    def held_bytes(self) -> int: ...


class Histogram:
    """Counts per bucket (not cumulative: made so when shown), their sum and count."""

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)  # the last: above every bucket
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1  # le is inclusive
        self.sum += seconds

    def samples(self, name: str, labels: Labels) -> list[Sample]:
        out: list[Sample] = []
        total = 0
        for bound, count in zip((*map(repr, BUCKETS), "+Inf"), self.counts, strict=True):
            total += count
            out.append((f"{name}_bucket", (*labels, ("le", bound)), total))
        return [*out, (f"{name}_sum", labels, self.sum), (f"{name}_count", labels, total)]


class Metrics:
    """One process's counts, safe to update from every worker thread at once."""

    def __init__(self, process: int = 0) -> None:
        self.process = str(process)
        self.connections: ConnectionCounts | None = None
        self.held: HeldCounts | None = None
        self.waiting: Callable[[], int] | None = None  # requests waiting for a turn (turns.py)
        self.store: StoreScan | None = None
        self.peers: Peers | None = None
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, str, int], int] = {}
        self._durations: dict[str, Histogram] = {}
        self._in_flight = 0
        self._refused = 0
        self._expired = dict.fromkeys(("idle", "head", "body"), 0)
        self._checkpoints = dict.fromkeys(("done", "busy"), 0)

    def enter(self) -> None:
        with self._lock:
            self._in_flight += 1

    def leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def answered(self, method: str, route: str, status: int, seconds: float) -> None:
        with self._lock:
            key = (method, route, status)
            self._requests[key] = self._requests.get(key, 0) + 1
            histogram = self._durations.get(route)
            if histogram is None:
                histogram = self._durations[route] = Histogram()
            histogram.observe(seconds)

    def refused(self) -> None:
        with self._lock:
            self._refused += 1

    def expired(self, stage: str) -> None:
        with self._lock:
            self._expired[stage] += 1

    def checkpointed(self, done: bool) -> None:
        with self._lock:
            self._checkpoints["done" if done else "busy"] += 1

    def snapshot(self) -> list[Sample]:
        """This process's samples, each labelled with its process number."""
        p = ("process", self.process)
        with self._lock:
            samples: list[Sample] = [
                ("aml_http_requests_total", (p, ("method", m), ("route", r), ("status", str(s))), n)
                for (m, r, s), n in sorted(self._requests.items())]
            for route, histogram in sorted(self._durations.items()):
                samples += histogram.samples("aml_http_request_duration_seconds", (p, ("route", route)))
            samples.append(("aml_http_requests_in_flight", (p,), self._in_flight))
            samples.append(("aml_connections_refused_total", (p,), self._refused))
            samples += [("aml_connections_expired_total", (p, ("stage", k)), v)
                        for k, v in self._expired.items()]
            samples += [("aml_wal_checkpoints_total", (p, ("result", k)), v)
                        for k, v in self._checkpoints.items()]
        if self.connections is not None:
            samples.append(("aml_connections_open", (p,), self.connections.open_count()))
            samples.append(("aml_connections_accepted_total", (p,), self.connections.accepted))
            samples += [("aml_connections_shed_total", (p, ("reason", k)), v)
                        for k, v in sorted(self.connections.shed.items())]
        if self.waiting is not None:
            samples.append(("aml_http_requests_waiting", (p,), self.waiting()))
        if self.held is not None:
            samples.append(("aml_held_users", (p,), self.held.users))
            samples.append(("aml_held_bytes", (p,), self.held.held_bytes))
        return samples

    def exposition(self) -> bytes:
        """The answer to GET /metrics: this process's live counts, every other process's last
        published ones, and the store's gauges."""
        samples = self.snapshot()
        samples.append(("aml_metrics_age_seconds", (("process", self.process),), 0.0))
        if self.peers is not None:
            for process, age, theirs in self.peers.others(int(self.process)):
                samples += theirs
                samples.append(("aml_metrics_age_seconds", (("process", process),), round(age, 3)))
        if self.store is not None:
            samples += self.store.samples()
        return render(samples).encode("utf-8")


def render(samples: Iterable[Sample]) -> str:
    """Samples in the text format: each family's HELP and TYPE, then its samples, together."""
    grouped: dict[str, list[Sample]] = {}
    for sample in samples:
        grouped.setdefault(_family_of(sample[0]), []).append(sample)
    lines: list[str] = []
    for family in sorted(grouped, key=_ORDER.__getitem__):
        info = FAMILIES[_ORDER[family]]
        lines.append(f"# HELP {family} {_escape_help(info.help)}")
        lines.append(f"# TYPE {family} {info.kind}")
        lines += [f"{name}{_labels(labels)} {_value(value)}" for name, labels, value in grouped[family]]
    return "\n".join(lines) + "\n"


def _family_of(name: str) -> str:
    if name in _ORDER:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name.removesuffix(suffix) in _ORDER:
            return name.removesuffix(suffix)
    raise KeyError(name)


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _labels(labels: Labels) -> str:
    return "{" + ",".join(f'{k}="{escape_label(v)}"' for k, v in labels) + "}" if labels else ""


def _value(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class StoreScan:
    """The store's gauges from a scan of every user file (`scan`: MemoryService.stats), at most
    as often as STORE_SCAN_MIN_AGE_S and STORE_SCAN_COST_FACTOR allow, in a thread of its own."""

    def __init__(self, scan: Callable[[], dict[str, Any]], min_age_s: float = STORE_SCAN_MIN_AGE_S,
                 wait_s: float = STORE_SCAN_WAIT_S) -> None:
        self._scan = scan
        self.min_age_s = min_age_s
        self.wait_s = wait_s
        self._lock = threading.Lock()
        self._last: tuple[dict[str, Any], float, float] | None = None  # values, ended, duration
        self._running: threading.Thread | None = None

    def samples(self) -> list[Sample]:
        running = self._start_if_stale()
        if running is not None:
            running.join(self.wait_s)
        last = self._last
        if last is None:
            return []
        values, ended, duration = last
        return [*((name, (), values[key]) for name, key in _STORE_GAUGES.items()),
                ("aml_store_scan_age_seconds", (), round(time.monotonic() - ended, 3)),
                ("aml_store_scan_duration_seconds", (), round(duration, 3))]

    def _start_if_stale(self) -> threading.Thread | None:
        with self._lock:
            if self._running is None and self._stale():
                self._running = threading.Thread(target=self._run, name="aml-store-scan", daemon=True)
                self._running.start()
            return self._running

    def _stale(self) -> bool:
        if self._last is None:
            return True
        _, ended, duration = self._last
        return time.monotonic() - ended >= max(self.min_age_s, STORE_SCAN_COST_FACTOR * duration)

    def _run(self) -> None:
        started = time.monotonic()
        try:
            values = self._scan()
            self._last = (values, time.monotonic(), time.monotonic() - started)
        except Exception:  # kept: the previous values and their age tell the truth
            pass
        finally:
            with self._lock:
                self._running = None


class Peers:
    """What the processes of `serve --processes N` share: one anonymous memory map, made before
    they are forked (so nothing is left on disk, whatever kills them), with a slot per process.
    A slot holds two copies: a process writes its counts (JSON, with their CRC-32) into the copy
    not in use, then names it the one in use, so a reader never meets a copy being written, even
    when the writer is descheduled halfway; the CRC catches the rare read that spans two writes
    (it is read again). No lock: no process can hold up another's scrape."""

    _ACTIVE = struct.Struct("<Q")  # which copy is in use, 0 or 1
    _HEAD = struct.Struct("<dII")  # when written (epoch seconds), payload length, its CRC-32
    _COPY = (PEER_SLOT_BYTES - _ACTIVE.size) // 2
    READ_TRIES = 3

    def __init__(self, processes: int) -> None:
        self._processes = processes
        self._map = mmap.mmap(-1, processes * PEER_SLOT_BYTES)

    def _copy_at(self, process: int, copy: int) -> int:
        return process * PEER_SLOT_BYTES + self._ACTIVE.size + copy * self._COPY

    def publish(self, process: int, samples: list[Sample]) -> bool:
        """Write one process's samples; False when they do not fit its slot (not written)."""
        payload = json.dumps(samples, separators=(",", ":")).encode()
        if self._HEAD.size + len(payload) > self._COPY:
            return False
        # The copy not in use, read from the map: a process started in a dead one's place (same
        # slot) knows no more than the map does.
        copy = 1 - (self._ACTIVE.unpack_from(self._map, process * PEER_SLOT_BYTES)[0] & 1)
        at = self._copy_at(process, copy)
        self._map[at:at + self._HEAD.size + len(payload)] = (
            self._HEAD.pack(time.time(), len(payload), binascii.crc32(payload)) + payload)
        self._ACTIVE.pack_into(self._map, process * PEER_SLOT_BYTES, copy)
        return True

    def forget(self, process: int) -> None:
        """Empty a dead process's slot (the supervisor, once it has reaped it): it is shown no
        more, and its successor's counts start from nothing."""
        for copy in (0, 1):
            self._HEAD.pack_into(self._map, self._copy_at(process, copy), 0.0, 0, 0)

    def others(self, process: int) -> list[tuple[str, float, list[Sample]]]:
        """(process, age in seconds, samples) of every other process that has written."""
        found = []
        for other in range(self._processes):
            read = self._read(other) if other != process else None
            if read is not None:
                written, samples = read
                found.append((str(other), max(0.0, time.time() - written), samples))
        return found

    def _read(self, process: int) -> tuple[float, list[Sample]] | None:
        for _ in range(self.READ_TRIES):
            active = self._ACTIVE.unpack_from(self._map, process * PEER_SLOT_BYTES)[0] & 1
            at = self._copy_at(process, active)
            written, length, crc = self._HEAD.unpack_from(self._map, at)
            if not length:
                return None  # not written yet
            payload = self._map[at + self._HEAD.size:at + self._HEAD.size
                                + min(length, self._COPY - self._HEAD.size)]
            if binascii.crc32(payload) == crc:
                return written, [(name, tuple((k, v) for k, v in labels), value)
                                 for name, labels, value in json.loads(payload)]
        return None


class Publisher(threading.Thread):
    """Writes this process's counts for its peers every PUBLISH_INTERVAL_S, until stopped."""

    def __init__(self, metrics: Metrics, peers: Peers) -> None:
        super().__init__(name="aml-metrics", daemon=True)
        self.metrics, self.peers = metrics, peers
        self.stop_event = threading.Event()

    def run(self) -> None:
        while True:
            self.peers.publish(int(self.metrics.process), self.metrics.snapshot())
            if self.stop_event.wait(PUBLISH_INTERVAL_S):
                return
