"""`serve --processes N`: several server processes on one port, one store. What holds within one
process holds across them: an Add raced on many connections is stored once, deleting a user while
others add leaves nothing partial, purge refuses while they run, and SIGTERM stops them all."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Client
from reliability_support import broken_adds, integrity, open_user

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def two_processes(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    db = tmp_path / "aml.db"
    server = subprocess.Popen([sys.executable, "-m", "aml_retriever", "serve", "--processes", "2",
                               "--port", str(port), "--db", str(db), "--log-level", "WARNING"],
                              cwd=ROOT, stderr=subprocess.PIPE)
    # The supervisor binds the port before it forks: wait for both processes, not the port alone.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (len(children(server.pid)) == 2 and answers(port)):
        time.sleep(0.1)
    yield server, port, db
    if server.poll() is None:
        server.kill()
        server.wait(10)


def answers(port: int) -> bool:
    try:
        return Client(port).request("GET", "/health").status == 200
    except OSError:
        return False


def children(pid: int) -> list[int]:
    found = subprocess.run(["ps", "--ppid", str(pid), "-o", "pid="], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]


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
