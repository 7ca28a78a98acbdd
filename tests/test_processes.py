"""`serve --processes N`: several server processes on one port, one store. What holds within one
process holds across them: an Add raced on many connections is stored once, deleting a user while
others add leaves nothing partial, purge refuses while they run, and SIGTERM stops them all. The
supervisor reaps and replaces a server process that dies (logged; its metrics slot emptied, so
no scrape shows the dead one), stops instead of forking forever when they keep dying, and takes
SIGHUP as a graceful stop: an Add in flight is answered."""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import Client
from prometheus_text import parse
from reliability_support import broken_adds, integrity, open_user, user_file

from aml_retriever import processes
from aml_retriever.http.metrics import PEER_SLOT_BYTES, Peers
from aml_retriever.processes import CRASH_LIMIT, Supervisor, Worker
from aml_retriever.settings import load

ROOT = Path(__file__).resolve().parent.parent
DEATH = re.compile(r"server process (\d+) \(pid (\d+)\) (.*); starting a new one$")


class Server:
    """`serve --processes N` in its own session (its own process group, so a test can hang it
    up as a terminal would), its stderr collected line by line."""

    def __init__(self, tmp_path: Path, *extra: str, processes: int = 2) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.db = tmp_path / "aml.db"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aml_retriever", "serve", "--processes", str(processes),
             "--port", str(self.port), "--db", str(self.db), "--log-level", "WARNING", *extra],
            cwd=ROOT, stderr=subprocess.PIPE, text=True, start_new_session=True,
            # As from a terminal: a suite run under nohup would pass on SIGHUP ignored, and a
            # server respects that (it is what nohup asks).
            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def ready(self, processes: int = 2) -> Server:
        # The supervisor binds the port before it forks: wait for every process, not the port alone.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (
                len(children(self.proc.pid)) == processes and answers(self.port)):
            time.sleep(0.1)
        assert len(children(self.proc.pid)) == processes, self.lines
        return self

    def line(self, pattern: re.Pattern[str], timeout: float = 15) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if found := pattern.search(line):
                    return found
            time.sleep(0.01)
        raise AssertionError(f"no line matching {pattern.pattern!r} in {self.lines}")

    def stderr(self) -> str:
        self._reader.join(10)
        return "\n".join(self.lines)

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    started: list[Server] = []

    def run(*extra: str, processes: int = 2) -> Server:
        server = Server(tmp_path, *extra, processes=processes)
        started.append(server)
        return server

    yield run
    for server in started:
        server.close()


@pytest.fixture
def two_processes(start: Callable[..., Server]) -> Iterator[tuple[subprocess.Popen[str], int, Path]]:
    server = start().ready()
    yield server.proc, server.port, server.db


def answers(port: int) -> bool:
    try:
        return Client(port).request("GET", "/health").status == 200
    except OSError:
        return False


def children(pid: int) -> list[int]:
    found = subprocess.run(["ps", "--ppid", str(pid), "-o", "pid="], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]


def gone(pid: int) -> bool:
    """Ended and reaped: not even a zombie is left."""
    return not Path(f"/proc/{pid}").exists()


def wait_until(condition: Callable[[], bool], timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def scrape(port: int) -> tuple[set[str], dict[str, float], dict[str, float]]:
    """One scrape on a new connection (either process may take it): the process answering (its
    numbers are 0 seconds old), every process's age, and every process's count of GET /health 200."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        assert response.status == 200
        found = parse(response.read().decode("utf-8"))
    finally:
        conn.close()
    ages = {labels["process"]: value for _, labels, value in found["aml_metrics_age_seconds"].samples}
    health = {labels["process"]: value for name, labels, value in found["aml_http_requests_total"].samples
              if (labels["method"], labels["route"], labels["status"]) == ("GET", "/health", "200")}
    return {process for process, age in ages.items() if age == 0}, ages, health


def test_two_processes_serve_one_port_and_a_raced_add_is_stored_once(two_processes):
    server, port, _ = two_processes
    assert len(children(server.pid)) == 2
    answers: list[dict] = []

    def add() -> None:
        client = Client(port)
        response = client.add("alice", "same-request", ["raced from many connections"])
        answers.append({"status": response.status, **(response.body or {})})
        client.close()

    threads = [threading.Thread(target=add) for _ in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert [a["status"] for a in answers] == [200] * 24
    assert sum(not a["replayed"] for a in answers) == 1  # stored once, replayed 23 times
    assert Client(port).request("GET", "/stats").body["messages"] == 1


def test_deleting_a_user_while_both_processes_add_leaves_nothing_partial(two_processes):
    _, port, db = two_processes
    stop = threading.Event()
    statuses: list[int] = []

    def adder(n: int) -> None:
        client = Client(port)
        i = 0
        while not stop.is_set():
            statuses.append(client.add("bob", f"a{n}-{i}", [f"note {n} {i}", f"more {n} {i}"]).status)
            i += 1
        client.close()

    threads = [threading.Thread(target=adder, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    deleter = Client(port)
    for _ in range(5):
        time.sleep(0.2)
        assert deleter.request("DELETE", "/users/bob").status == 200
    stop.set()
    for thread in threads:
        thread.join(30)
    assert set(statuses) == {200}
    conn = open_user(db, "bob")
    assert broken_adds(conn) == [] and integrity(conn) == []
    remaining = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    assert remaining % 2 == 0  # every Add whole: two messages or none
    assert deleter.request("DELETE", "/users/bob").status == 200
    assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 0


def test_purge_refuses_and_sigterm_stops_every_process(two_processes):
    server, port, db = two_processes
    assert Client(port).add("carol", "r1", ["kept"]).status == 200
    refused = subprocess.run([sys.executable, "-m", "aml_retriever", "purge", "--db", str(db),
                              "--yes"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "in use by a running server" in refused.stderr
    pids = children(server.pid)
    server.send_signal(signal.SIGTERM)
    assert server.wait(30) == 0
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    done = subprocess.run([sys.executable, "-m", "aml_retriever", "stats", "--db", str(db)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout)["messages"] == 1  # control: the data outlived the servers


def test_a_graceful_stop_checkpoints_what_both_processes_wrote(two_processes):
    server, port, db = two_processes
    clients = [Client(port) for _ in range(6)]  # connections spread over both processes
    for n, client in enumerate(clients):
        for i in range(5):
            assert client.add(f"user-{n % 3}", f"r{n}-{i}", [f"note {n} {i}"]).status == 200
    wal_files = list(db.parent.rglob("*-wal"))
    assert any(f.stat().st_size > 0 for f in wal_files)  # control: the Adds sit in the WAL
    server.send_signal(signal.SIGTERM)
    assert server.wait(30) == 0
    assert [f for f in db.parent.rglob("*-wal") if f.stat().st_size > 0] == []
    for n in range(3):
        assert open_user(db, f"user-{n}").execute("SELECT count(*) FROM messages").fetchone()[0] == 10


def test_a_supervisor_killed_outright_takes_its_server_processes_along(two_processes):
    server, _, _ = two_processes
    pids = children(server.pid)
    assert len(pids) == 2
    server.kill()  # SIGKILL: the supervisor cannot pass anything on
    server.wait(10)
    deadline = time.monotonic() + 15
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if running(pid)]
        time.sleep(0.1)
    assert alive == []


def running(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except FileNotFoundError:
        return False


# ---- a dead server process, signals -------------------------------------------------------------


def test_a_server_process_killed_is_reaped_logged_and_replaced_and_metrics_show_no_dead_one(start):
    server = start().ready()
    before = children(server.proc.pid)
    # Both processes serve some /health and have shown their counts to each other.
    counted: dict[str, float] = {}
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (set(counted) == {"0", "1"} and all(counted.values())):
        for _ in range(10):
            assert answers(server.port)
        time.sleep(1.1)  # each process writes its counts once a second
        _, _, counted = scrape(server.port)
    assert set(counted) == {"0", "1"} and all(counted.values()), counted

    victim = before[0]
    os.kill(victim, signal.SIGKILL)
    died = server.line(DEATH)  # one line: which process, its pid, the signal; no content
    process, pid, how = died.group(1), int(died.group(2)), died.group(3)
    assert pid == victim and how == "was killed by signal 9 (SIGKILL)"
    assert wait_until(lambda: gone(victim))  # reaped: no zombie
    # The dead one's counts are never shown again: its slot was emptied before the log line.
    # Until its successor writes, a scrape shows the survivor alone; then the successor, from 0.
    seen_answering: set[str] = set()
    deadline = time.monotonic() + 30
    scrapes = 0
    while time.monotonic() < deadline and (scrapes < 8 or process not in seen_answering):
        answering, ages, health = scrape(server.port)
        scrapes += 1
        seen_answering |= answering
        assert set(ages) <= {"0", "1"}, ages
        assert health.get(process, 0) == 0, (process, health)  # not the dead one's counts
        assert max(ages.values()) < 5, ages  # nobody shown stale (they write once a second)
    assert process in seen_answering  # the new process with the dead one's number answers
    new = [child for child in children(server.proc.pid) if child not in before]
    assert len(new) == 1 and len(children(server.proc.pid)) == 2
    assert sum(line.count("starting a new one") for line in server.lines) == 1

    everyone = [*before, *new]
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(30) == 0  # a graceful stop after a replacement: exit 0
    assert all(gone(pid) for pid in everyone)


@pytest.mark.parametrize("to", ["supervisor", "process group"])
def test_sighup_stops_gracefully_and_an_add_in_flight_is_answered(start, to):
    server = start("--log-level", "INFO").ready()
    pids = children(server.proc.pid)
    client = Client(server.port)
    assert client.add("dana", "r1", ["the first note"]).status == 200
    # Hold dana's file for writing: the next Add waits inside a worker, in flight.
    writer = sqlite3.connect(user_file(server.db, "dana"), isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE meta SET value = value WHERE key = 'format'")
    answer: list[object] = []

    def add() -> None:
        try:
            answer.append(Client(server.port).add("dana", "r2", ["the note in flight"]).status)
        except OSError as exc:
            answer.append(exc)

    adder = threading.Thread(target=add)
    try:
        adder.start()
        time.sleep(0.5)
        assert answer == []  # control: the Add is held
        if to == "supervisor":
            server.proc.send_signal(signal.SIGHUP)
        else:  # a terminal hang-up: the whole group, server processes included
            os.killpg(server.proc.pid, signal.SIGHUP)
        time.sleep(1.0)
        assert server.proc.poll() is None and answer == []  # stopping, waiting for the Add
        assert not answers(server.port)  # no longer accepting
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    adder.join(30)
    assert answer == [200]
    assert server.proc.wait(30) == 0
    assert all(gone(pid) for pid in pids)
    assert "stopping on SIGHUP: the server processes finish the requests in flight" in server.stderr()
    done = subprocess.run([sys.executable, "-m", "aml_retriever", "stats", "--db", str(server.db)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout)["messages"] == 2  # the Add in flight was stored


def test_one_server_without_processes_also_stops_gracefully_on_sighup(start):
    server = start(processes=1)
    assert wait_until(lambda: answers(server.port))
    client = Client(server.port)
    assert client.add("dana", "r1", ["the first note"]).status == 200
    writer = sqlite3.connect(user_file(server.db, "dana"), isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # the next Add waits in flight
    answer: list[object] = []
    adder = threading.Thread(target=lambda: answer.append(
        Client(server.port).add("dana", "r2", ["the note in flight"]).status))
    try:
        adder.start()
        time.sleep(0.5)
        assert answer == []  # control: the Add is held
        server.proc.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        assert server.proc.poll() is None and answer == []  # stopping, not dead
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    adder.join(30)
    assert answer == [200] and server.proc.wait(30) == 0


def test_server_processes_killed_at_once_again_and_again_never_stop_the_server(start):
    """Killed by a signal within a second of starting, again and again (as a request that makes
    the out-of-memory killer strike could): replaced later and later, never a stop, and serving
    again once the kills end."""
    server = start().ready()
    killed: set[int] = set()
    deadline = time.monotonic() + 12
    while server.proc.poll() is None and time.monotonic() < deadline:
        for pid in children(server.proc.pid):  # each new one killed well within a second
            if pid not in killed:
                killed.add(pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    assert server.proc.poll() is None, server.lines  # never stopped
    assert " ERROR " not in server.stderr()
    assert len(killed) <= 2 * 7  # bounded: 0.5, 1, 2, 4 s ... between forks of one number
    assert "starting a new one in 4 s" in server.stderr()
    assert wait_until(lambda: answers(server.port), timeout=60)  # serving again
    assert all(wait_until(lambda pid=pid: gone(pid)) for pid in killed)


def test_quick_exits_again_and_again_stop_the_server_and_quick_kills_do_not(tmp_path, monkeypatch):
    """The rule itself: CRASH_LIMIT quick exits in a row (a process that cannot live) stop the
    server; as many quick deaths by a signal only delay the next start."""
    config = load({"db_path": str(tmp_path / "aml.db"), "processes": 1}, environ={})
    with socket.socket() as listener:
        for status, stops in ((1 << 8, True), (signal.SIGKILL, False)):  # exit 1; killed
            supervisor = Supervisor(config, listener, Peers(1), app=lambda *a, **k: None)
            monkeypatch.setattr(supervisor, "_start", lambda process, replacement: None)
            monkeypatch.setattr(supervisor, "stop", lambda failed=False, s=supervisor: setattr(
                s, "failed", failed))
            for pid in range(CRASH_LIMIT):
                supervisor._ended(pid, Worker(0, time.monotonic(), True), status)
            assert supervisor.failed is stops
            if not stops:  # the fifth quick kill: started again in 0.5 * 2**4 s
                assert 7 < supervisor.due[0] - time.monotonic() <= 8


def test_quick_kills_then_one_quick_exit_do_not_stop_the_server(tmp_path, monkeypatch):
    """Only quick exits in a row count: four quick kills (the out-of-memory killer) and then one
    quick exit (an operator's `kill PID` of a process that handles SIGTERM) are one exit."""
    config = load({"db_path": str(tmp_path / "aml.db"), "processes": 1}, environ={})
    with socket.socket() as listener:
        supervisor = Supervisor(config, listener, Peers(1), app=lambda *a, **k: None)
        monkeypatch.setattr(supervisor, "_start", lambda process, replacement: None)
        monkeypatch.setattr(supervisor, "stop", lambda failed=False, s=supervisor: setattr(
            s, "failed", failed))
        statuses = [signal.SIGKILL] * (CRASH_LIMIT - 1) + [1 << 8]
        for pid, status in enumerate(statuses):
            supervisor._ended(pid, Worker(0, time.monotonic(), True), status)
        assert supervisor.failed is False
        for pid in range(CRASH_LIMIT - 1):  # control: as many quick exits more stop it
            supervisor._ended(pid, Worker(0, time.monotonic(), True), 1 << 8)
        assert supervisor.failed is True


def test_a_server_process_that_cannot_start_stops_the_server_at_once(start):
    server = start("--host", "0.0.0.0")  # every process refuses: no API key on a public address
    assert server.proc.wait(30) == 1
    text = server.stderr()
    assert "cannot start: refusing to serve 0.0.0.0 without an API key" in text
    assert "could not start; stopping the server" in text
    assert "starting a new one" not in text and "Traceback" not in text


# ---- the mechanism, in this process ------------------------------------------------------------


def test_a_dead_process_is_forgotten_before_its_successor_is_forked(tmp_path, monkeypatch, caplog):
    config = load({"db_path": str(tmp_path / "aml.db"), "processes": 2}, environ={})
    peers = Peers(2)
    with socket.socket() as listener:
        supervisor = Supervisor(config, listener, peers, app=lambda *a, **k: None)
        started: list[tuple[int, bool, list]] = []
        monkeypatch.setattr(supervisor, "_start", lambda process, replacement: started.append(
            (process, replacement, peers.others(0))))
        assert peers.publish(1, [("aml_connections_open", (("process", "1"),), 7)])
        assert [p for p, _, _ in peers.others(0)] == ["1"]
        with caplog.at_level(logging.WARNING, "aml_retriever.server"):
            supervisor._ended(4242, Worker(1, time.monotonic() - 5, False), signal.SIGKILL)
        assert started == [(1, True, [])]  # replaced, same number; forgotten before the fork
        assert caplog.messages == [
            "server process 1 (pid 4242) was killed by signal 9 (SIGKILL); starting a new one"]
        assert peers.others(0) == []


def test_a_successor_never_writes_the_copy_a_reader_may_be_reading():
    peers = Peers(2)
    if (pid := os.fork()) == 0:  # the first process 1: writes once, then dies
        peers.publish(1, [("aml_connections_open", (("process", "1"),), 1)])
        os._exit(0)
    os.waitpid(pid, 0)
    peers.forget(1)
    in_use = peers._copy_at(1, Peers._ACTIVE.unpack_from(peers._map, PEER_SLOT_BYTES)[0])
    before = peers._map[in_use:in_use + 4096]
    if (pid := os.fork()) == 0:  # its successor, forked from the supervisor's copy of Peers
        peers.publish(1, [("aml_connections_open", (("process", "1"),), 2)])
        os._exit(0)
    os.waitpid(pid, 0)
    assert peers._map[in_use:in_use + 4096] == before
    assert [s for _, _, s in peers.others(0)] == [[("aml_connections_open", (("process", "1"),), 2)]]


def test_a_wait_status_is_told_as_an_exit_status_or_a_signal():
    assert processes.describe(signal.SIGKILL) == "was killed by signal 9 (SIGKILL)"
    assert processes.describe(3 << 8) == "exited with status 3"
