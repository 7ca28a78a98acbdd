"""The transport: keep-alive, bounded concurrency with a quick 503, graceful stop on SIGTERM,
and logs that never carry content."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import Client, saturated

ROOT = Path(__file__).resolve().parent.parent
SECRET = "logsecret9931"


def test_keep_alive_serves_many_requests_on_one_connection(client):
    client.add("alice", "r0", ["keepalive kestrel"])
    sock_before = client.conn.sock
    for _i in range(20):
        assert client.search("alice", "kestrel").status == 200
    assert client.conn.sock is sock_before


def test_a_full_queue_gets_a_quick_429_with_retry_after_and_probes_are_still_answered(make_app):
    app = make_app(active_requests=1, queue_size=1, socket_timeout=3.0)
    with saturated(app):
        started = time.monotonic()
        response = Client(app.port).search("alice", "anything")
        assert time.monotonic() - started < 1.0  # answered at once, not after a turn frees
        assert response.status == 429
        assert 1 <= int(response.headers["retry-after"]) <= 60
        assert response.body["error"]["code"] == "overloaded"
        assert Client(app.port).request("GET", "/health").status == 200  # probes never wait
    time.sleep(0.3)
    assert Client(app.port).search("alice", "anything").status == 200  # control: capacity returns


def test_access_log_never_holds_content_queries_or_user_ids(client, caplog):
    user = f"user-{SECRET}"
    client.add(user, f"req-{SECRET}", [f"content {SECRET}"], session=f"session-{SECRET}")
    client.search(user, f"query {SECRET}")
    client.post("/add", {"request_id": "r", "user_id": user, "session_id": "s",
                         "messages": [{"role": "user", "content": ""}]})
    client.request("DELETE", f"/users/{user}")
    client.request("POST", f"/nowhere/{SECRET}")
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "POST /add 200" in logged and "DELETE /users/{user_id} 200" in logged  # control
    assert SECRET not in logged


def test_unexpected_failure_is_a_bare_500_and_logs_no_content(app, client, caplog):
    def explode(request):
        raise ValueError(f"boom {request.query}")

    app.service.search = explode
    response = client.search("alice", f"query {SECRET}")
    assert response.status == 500
    assert response.body == {"error": {"code": "internal_error", "message": "internal error",
                                       "field": None}}
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "unexpected ValueError" in logged and SECRET not in logged


def _start_server(db: Path, *extra: str) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "aml_retriever", "serve", "--port", "0", "--db", str(db), *extra],
        cwd=ROOT, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        if "serving on" in line:
            return process, int(line.rsplit(":", 1)[1].split()[0])
    raise AssertionError("server did not start")


def test_sigterm_finishes_requests_in_flight_and_exits_cleanly(tmp_path):
    process, port = _start_server(tmp_path / "aml.db")
    try:
        results: list[int] = []

        def add(i: int) -> None:
            results.append(Client(port).add("alice", f"r{i}", [f"graceful gecko {i}"] * 20).status)

        threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        idle = http.client.HTTPConnection("127.0.0.1", port)  # an idle keep-alive connection
        idle.request("GET", "/health")
        idle.getresponse().read()
        for t in threads:
            t.join()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0
    finally:
        if process.poll() is None:
            process.kill()
    assert results == [200] * 8
    stderr = process.stderr.read() if process.stderr else ""
    assert "stopped" in stderr
    shards = list((tmp_path / "aml.db.users").rglob("*.db"))
    assert len(shards) == 1
    wal = Path(str(shards[0]) + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # checkpointed on the way out
    process2, port2 = _start_server(tmp_path / "aml.db")
    try:
        data = Client(port2).search("alice", "gecko", top_k=100).body["data"]
        found = "\n".join(item["content"] for item in data).split("\n")
        assert sorted(found) == sorted(f"graceful gecko {i}" for i in range(8))  # each once
    finally:
        process2.send_signal(signal.SIGINT)
        assert process2.wait(timeout=15) == 0


def test_serve_refuses_a_public_bind_without_a_key(tmp_path):
    result = subprocess.run([sys.executable, "-m", "aml_retriever", "serve", "--host", "0.0.0.0",
                             "--port", "0", "--db", str(tmp_path / "aml.db")],
                            cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert "without an API key" in result.stderr


def test_env_settings_are_read(tmp_path):
    env = {**os.environ, "AML_DB_PATH": str(tmp_path / "env.db"), "AML_API_KEY": "envkey"}
    process = subprocess.Popen([sys.executable, "-m", "aml_retriever", "serve", "--port", "0"],
                               cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        port = next(int(line.rsplit(":", 1)[1].split()[0].rstrip(")"))
                    for line in process.stderr if "serving on" in line)
        assert Client(port).request("GET", "/stats").status == 401
        assert json.loads(json.dumps(Client(port, "envkey").request("GET", "/stats").body))["users"] == 0
    finally:
        process.terminate()
        process.wait(timeout=15)
    assert (tmp_path / "env.db").exists()


def _held_searches(app, monkeypatch) -> tuple[threading.Event, list[int]]:
    """Make every Search wait for `release`; `running` counts those inside the service."""
    release, running, lock = threading.Event(), [0, 0], threading.Lock()  # [now, peak]
    original = app.service.search

    def held(request):
        with lock:
            running[0] += 1
            running[1] = max(running[1], running[0])
        release.wait(10)
        with lock:
            running[0] -= 1
        return original(request)

    monkeypatch.setattr(app.service, "search", held)
    return release, running


def _search_in_thread(app) -> threading.Thread:
    thread = threading.Thread(target=lambda: Client(app.port).search("u", "anything"))
    thread.start()
    return thread


@pytest.mark.parametrize("active,expected_peak", [(1, 1), (3, 3)])
def test_only_active_requests_run_the_service_at_once(make_app, monkeypatch, active, expected_peak):
    app = make_app(active_requests=active)
    release, running = _held_searches(app, monkeypatch)
    threads = [_search_in_thread(app) for _ in range(4)]
    deadline = time.monotonic() + 5
    while running[0] < expected_peak and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # a fourth request that could enter would have by now
    assert running[1] == expected_peak
    release.set()
    for thread in threads:
        thread.join(10)
    assert running == [0, expected_peak]


def test_health_answers_while_every_turn_is_taken(make_app, monkeypatch):
    app = make_app(active_requests=1)
    release, running = _held_searches(app, monkeypatch)
    thread = _search_in_thread(app)
    deadline = time.monotonic() + 5
    while running[0] < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert running[0] == 1  # the only turn is held
    assert Client(app.port).request("GET", "/health").status == 200
    release.set()
    thread.join(10)


def test_an_answered_connection_waits_the_keep_alive_timeout_a_silent_one_the_socket_timeout(make_app):
    """A client's next request on a connection it keeps comes after it has read and used the
    last answer: the server waits keep_alive_timeout for it, longer than a client's own idle
    limit, so it is never sent on a connection the server is closing."""
    app = make_app(socket_timeout=0.3, keep_alive_timeout=2.0)
    client = Client(app.port)
    assert client.request("GET", "/health").status == 200
    kept = client.conn.sock
    time.sleep(1.0)  # past the socket timeout, within the keep-alive timeout
    assert client.search("alice", "anything").status == 200
    assert client.conn.sock is kept  # the same connection served the next request
    silent = socket.create_connection(("127.0.0.1", app.port))
    silent.settimeout(5)
    started = time.monotonic()
    assert silent.recv(1) == b""  # a connection that never sent anything: closed
    assert time.monotonic() - started < 1.5
    silent.close()
    started = time.monotonic()
    kept.settimeout(5)
    assert kept.recv(1) == b""  # the answered one too, once its keep-alive timeout passed
    assert 0.5 < time.monotonic() - started < 3.5


def test_every_json_answer_ends_with_a_newline(app):
    """A terminal's next prompt starts on a line of its own after `curl` prints an answer (it was
    glued to the JSON): answers, errors of a route and of the framing alike."""
    for method, path, body in (("GET", "/health", None), ("POST", "/search", b"{}"),
                               ("GET", "/nowhere", None)):
        conn = http.client.HTTPConnection("127.0.0.1", app.port, timeout=10)
        conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        answer = conn.getresponse()
        data = answer.read()
        assert data.endswith(b"}\n") and json.loads(data), (method, path, answer.status)
        conn.close()
    with socket.create_connection(("127.0.0.1", app.port), timeout=10) as raw:
        raw.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 12x\r\n\r\n")
        reply = b""
        while chunk := raw.recv(65536):
            reply += chunk
    assert reply.split(b"\r\n\r\n", 1)[1].endswith(b"}\n")  # the framing's own error


def test_a_user_id_sent_with_an_unencoded_slash_is_told_to_encode_it(client):
    assert client.add("team/ana", "r1", ["a note"]).status == 200
    answer = client.request("GET", "/users/team/ana/messages")
    assert answer.status == 404 and "%2F" in answer.body["error"]["message"]
    assert client.request("GET", "/users/team%2Fana/messages").status == 200  # as encoded
    other = client.request("GET", "/users/ana/nothing")  # control: no id reading makes a route
    assert other.status == 404 and "%2F" not in other.body["error"]["message"]
