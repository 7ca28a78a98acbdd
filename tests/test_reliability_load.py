"""Under load the server loses and duplicates no write, answers no 5xx, and keeps answering
Searches while Adds commit (readers never wait for the writer). A leaderboard's load (64 Adds and
256 Searches at once) is answered in full, each request waiting its turn by user; only past the
queue's bounds is a request refused, with a quick 429 and Retry-After that the client gets to read,
never more threads, and no waiting connection starves; slow clients, trickling a request's head
or body a byte at a time, are cut off at a deadline instead of holding a worker."""

from __future__ import annotations

import http.client
import importlib.util
import json
import select
import socket
import sqlite3
import sys
import threading
import time
from collections import Counter
from typing import Any

import pytest
from conftest import Client, saturated
from reliability_support import ROOT, broken_adds, open_user, request_contents, user_file

spec = importlib.util.spec_from_file_location("load_test", ROOT / "scripts" / "load_test.py")
assert spec and spec.loader
load_test = sys.modules["load_test"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(load_test)


def test_mixed_load_loses_no_write_stores_none_twice_and_answers_no_5xx(make_app):
    app = make_app()
    report = load_test.run(load_test.LoadConfig(url=app.url, threads=6, duration_s=2.0, add_ratio=0.3,
                                                users=4, messages_per_add=3, seed=7))
    assert set(report.statuses) == {"200"}, report.statuses
    assert report.statuses_by_op["search"].get("200", 0) > 50  # searches answered throughout
    assert len(report.acknowledged) > 20  # control: the load did write
    expected = Counter()
    for user, request_id, messages in report.acknowledged:
        expected[user] += messages
        conn = open_user(app.store.path, user)
        try:
            assert len(request_contents(conn)[request_id]) == messages
        finally:
            conn.close()
    for user, messages in expected.items():
        conn = open_user(app.store.path, user)
        try:
            assert conn.execute("SELECT count(*) FROM messages").fetchone()[0] == messages
            assert broken_adds(conn) == []
        finally:
            conn.close()


def test_a_leaderboards_64_adds_and_256_searches_at_once_are_all_answered_200(make_app):
    app = make_app(answer_window_tokens=4000, reader_view=True)
    seed = Client(app.port)
    for user in range(4):
        assert seed.add(f"conv-{user}", "seed", [f"Hey Mel! I went to the lake {i} times, Caroline."
                                                 for i in range(20)]).status == 200
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    start = threading.Barrier(64 + 256)

    def send(kind: str, n: int) -> None:
        client = Client(app.port)
        start.wait()
        if kind == "add":
            response = client.add(f"conv-{n % 4}", f"r{n}", [f"turn {n} about the lake"],
                                  start_ms=1_700_000_000_000 + n * 60_000)
        else:
            response = client.search(f"conv-{n % 4}", "How often did she go to the lake?", top_k=100)
        client.close()
        with lock:
            statuses[response.status] += 1

    threads = [threading.Thread(target=send, args=("add", n)) for n in range(64)]
    threads += [threading.Thread(target=send, args=("search", n)) for n in range(256)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert statuses == {200: 64 + 256}
    assert seed.contents("conv-1", "turn 61 lake", top_k=1)[0].endswith("user: turn 61 about the lake")


def test_a_bystanders_search_waits_for_one_turn_not_behind_a_heavy_users_queue(make_app):
    app = make_app(active_requests=2)
    original = app.service.search
    heavy_s = 0.2

    def slow_for_heavy(request: Any) -> Any:
        if request.user_id == "heavy":
            time.sleep(heavy_s)  # a Search of a very large memory
        return original(request)

    app.service.search = slow_for_heavy
    stop = threading.Event()
    heavy_answers: list[int] = []

    def heavy_client() -> None:
        client = Client(app.port)
        while not stop.is_set():
            heavy_answers.append(client.search("heavy", "anything").status)
        client.close()

    clients = [threading.Thread(target=heavy_client) for _ in range(32)]
    for thread in clients:
        thread.start()
    try:
        time.sleep(1.0)  # every heavy client has a request running or waiting
        started = time.monotonic()
        assert Client(app.port).search("bystander", "anything").status == 200
        waited = time.monotonic() - started
    finally:
        stop.set()
        for thread in clients:
            thread.join(30)
    # First come first served, it would wait for the 30 heavy requests ahead of it, two at a
    # time: 3 s. By user, for the next turn to free: at most one heavy Search.
    assert waited < 1.0, waited
    assert len(heavy_answers) > 32 and set(heavy_answers) == {200}  # control: it was busy


def test_searches_answer_while_a_writer_holds_the_users_file(app, client):
    assert client.add("alice", "r1", ["the heron nests by the lake"]).status == 200
    writer = sqlite3.connect(user_file(app.store.path, "alice"), isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE meta SET value = value WHERE key = 'format'")
    waiting_add: list[int] = []
    adder = threading.Thread(target=lambda: waiting_add.append(
        Client(app.port).add("alice", "r2", ["a second heron"]).status))
    adder.start()
    try:
        for _ in range(20):
            started = time.monotonic()
            assert client.contents("alice", "heron") == ["the heron nests by the lake"]
            assert time.monotonic() - started < 2.0  # a Search waiting for the writer never returns
        assert waiting_add == []  # control: the Add really waits for the writer
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    adder.join(timeout=20)
    assert waiting_add == [200]
    assert sorted(client.contents("alice", "heron")) == ["a second heron", "the heron nests by the lake"]


def test_concurrent_first_adds_of_new_users_all_answer_200(app):
    clients = [Client(app.port) for _ in range(4)]  # four connections: four workers
    statuses: Counter[int] = Counter()

    def first_add(c: Client, user: str, i: int, start: threading.Barrier) -> None:
        start.wait()
        statuses[c.add(user, f"r{i}", [f"first words {i}"]).status] += 1

    for n in range(25):
        start = threading.Barrier(len(clients))
        threads = [threading.Thread(target=first_add, args=(c, f"newcomer-{n}", i, start))
                   for i, c in enumerate(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert statuses == {200: 100}
    found = "\n".join(clients[0].contents("newcomer-7", "first")).split("\n")
    assert sorted(found) == [f"first words {i}" for i in range(4)]  # each Add of the race is stored


def test_a_burst_past_the_queue_gets_quick_429s_and_no_new_threads(make_app):
    app = make_app(active_requests=2, queue_size=2, socket_timeout=2.0)
    release = threading.Event()
    original = app.service.stats
    app.service.stats = lambda: (release.wait(30), original())[1]  # the workers stay busy
    threads_before = threading.active_count()
    burst = [socket.create_connection(("127.0.0.1", app.port)) for _ in range(40)]
    try:
        for sock in burst:
            sock.sendall(b"GET /stats HTTP/1.1\r\nHost: localhost\r\n\r\n")
        time.sleep(0.5)
        assert threading.active_count() == threads_before
        answered = []
        for sock in burst:
            if select.select([sock], [], [], 0)[0]:
                answered.append(sock.recv(4096))
        assert len(answered) >= 40 - 2 - 2  # all but the running ones and the queue's
        assert all(a.startswith(b"HTTP/1.1 429") and b"Retry-After: " in a for a in answered)
    finally:
        release.set()
        for sock in burst:
            sock.close()
    time.sleep(0.3)
    assert Client(app.port).request("GET", "/health").status == 200  # control: capacity returns


def test_idle_connections_hold_no_worker(make_app):
    app = make_app(active_requests=1, queue_size=1, socket_timeout=5.0)
    idle = [socket.create_connection(("127.0.0.1", app.port)) for _ in range(40)]
    try:
        time.sleep(0.3)
        started = time.monotonic()
        assert Client(app.port).request("GET", "/health").status == 200
        assert time.monotonic() - started < 1.0  # served at once beside 40 silent connections
    finally:
        for sock in idle:
            sock.close()


def test_a_refused_client_that_sends_at_once_reads_the_429_not_a_reset(make_app):
    app = make_app(active_requests=1, queue_size=1, socket_timeout=3.0)
    with saturated(app):
        outcomes: Counter[str] = Counter()
        for _ in range(30):
            conn = http.client.HTTPConnection("127.0.0.1", app.port, timeout=5)
            try:
                conn.request("POST", "/search", body=b'{"user_id": "a", "query": "x"}',
                             headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                response.read()
                outcomes[f"{response.status} retry after {response.getheader('Retry-After')}"] += 1
            except OSError as exc:
                outcomes[type(exc).__name__] += 1
            finally:
                conn.close()
        assert len(outcomes) == 1 and next(iter(outcomes)).startswith("429 retry after ")


def test_a_queued_connection_is_served_while_keep_alive_clients_hold_every_worker(make_app):
    app = make_app(active_requests=1, queue_size=4)
    stop = threading.Event()
    busy_answers: list[int] = []

    def keep_the_worker_busy() -> None:
        c = Client(app.port)
        while not stop.is_set():
            busy_answers.append(c.request("GET", "/health").status)
        c.close()

    busy = threading.Thread(target=keep_the_worker_busy)
    busy.start()
    try:
        time.sleep(0.3)
        started = time.monotonic()
        assert Client(app.port).request("GET", "/health").status == 200
        waited = time.monotonic() - started
    finally:
        stop.set()
        busy.join(timeout=10)
    assert waited < 1.0  # answered while the busy client was still sending
    assert len(busy_answers) > 10 and set(busy_answers) == {200}  # control: it was busy throughout


def trickle(sock: socket.socket, data: bytes, interval: float, give_up: float) -> tuple[float, bytes]:
    """Send `data` a byte at a time until the server answers or closes; return how long that took
    and all it sent before closing."""
    started = time.monotonic()
    for byte in data:
        try:
            sock.send(bytes([byte]))
        except OSError:
            return time.monotonic() - started, b""
        if select.select([sock], [], [], interval)[0]:
            elapsed = time.monotonic() - started
            sock.settimeout(2)
            chunks = []
            try:
                while chunk := sock.recv(65536):
                    chunks.append(chunk)
            except OSError:
                pass
            return elapsed, b"".join(chunks)
        if time.monotonic() - started > give_up:
            break
    return time.monotonic() - started, b"still connected"


@pytest.mark.parametrize("head", [
    b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Padding: " + b"a" * 400,
    b"GET /health" + b"a" * 400,
], ids=["headers that never end", "a request line that never ends"])
def test_a_head_trickled_byte_by_byte_is_cut_off_and_frees_the_worker(make_app, head):
    app = make_app(active_requests=1, socket_timeout=0.4)  # the head must arrive within 1.2 s
    served: list[tuple[int, float]] = []

    def meanwhile() -> None:
        time.sleep(0.2)
        started = time.monotonic()
        served.append((Client(app.port).request("GET", "/health").status, time.monotonic() - started))

    other = threading.Thread(target=meanwhile)
    other.start()
    with socket.create_connection(("127.0.0.1", app.port)) as sock:
        elapsed, reply = trickle(sock, head, interval=0.05, give_up=6.0)
    other.join(timeout=10)
    assert reply == b"" and elapsed < 2.5  # closed at the deadline, long before the head ends
    assert served and served[0][0] == 200 and served[0][1] < 3.0  # the one worker served another


def test_a_body_trickled_byte_by_byte_gets_408_at_the_deadline(make_app):
    app = make_app(active_requests=1, socket_timeout=0.4)
    body = json.dumps({"user_id": "alice", "query": "x" * 1000}).encode()
    head = (b"POST /search HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body))
    with socket.create_connection(("127.0.0.1", app.port)) as sock:
        sock.sendall(head)
        elapsed, reply = trickle(sock, body, interval=0.05, give_up=6.0)
    assert reply.startswith(b"HTTP/1.1 408") and b"request_timeout" in reply
    assert b"Connection: close" in reply and elapsed < 2.5
    assert Client(app.port).search("alice", "x").status == 200  # control: the worker is free


def test_a_head_sent_at_a_steady_pace_within_the_deadline_is_served(make_app):
    app = make_app(active_requests=1, socket_timeout=0.4)
    with socket.create_connection(("127.0.0.1", app.port)) as sock:
        elapsed, reply = trickle(sock, b"GET /health HTTP/1.1\r\nHost: localhost\r\n"
                                       b"Connection: close\r\n\r\n",
                                 interval=0.01, give_up=5.0)
    assert reply.startswith(b"HTTP/1.1 200") and elapsed < 1.2


def test_load_tool_reports_percentiles_and_statuses_as_json(app, capsys):
    assert load_test.main(["--url", app.url, "--threads", "2", "--duration", "0.5",
                           "--max-requests", "40", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["requests"] <= 40 and report["statuses"].get("200", 0) == report["requests"]
    assert set(report["ops"]["search"]) == {"count", "p50_ms", "p95_ms", "p99_ms", "max_ms"}


@pytest.mark.parametrize("url", ["http://192.0.2.1:8080", "http://example.com", "https://127.0.0.1:1"])
def test_load_tool_refuses_anything_but_loopback(url):
    with pytest.raises(SystemExit, match="loopback"):
        load_test.main(["--url", url])
