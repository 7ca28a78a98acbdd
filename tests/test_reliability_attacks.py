"""What an outside attack of the listing, review, import and framing surfaces found, each held
shut: concurrent reviews of one statement, request targets a router reads otherwise, cross-site
form POSTs and DNS rebinding of a keyless server, numbers past Python's 4,300-digit limit,
cursors edited by hand, leading empty lines and bytes that are not HTTP, another application's
SQLite file at a user's path, and an import line without end. Each exclusion beside a populated
control."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import Client, start_app

from aml_retriever.agents.scopes import ScopedMemory
from aml_retriever.common.errors import InvalidField
from aml_retriever.memory.lifecycle import Statements

ROOT = Path(__file__).resolve().parents[1]
HUGE = "9" * 4301  # one digit past what Python's int() converts from text


def exchange(port: int, data: bytes, timeout: float = 10.0) -> tuple[bytes, float]:
    """Send raw bytes; the reply read until the server closes, and how long that took."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply, time.monotonic() - started


# ---- reviews: check and change in one transaction --------------------------------------------


def _propose(app, count: int) -> list[int]:
    statements = Statements(app.service, "alice", "mcp")
    return [int(statements.remember("s1", f"The user owns boat number {n}", "fact",
                                    origin="agent").statement["id"][1:]) for n in range(count)]


def _at_once(port: int, requests: list[tuple[str, str]]) -> list[int]:
    """Send the requests at the same moment, each on its own connection; their statuses."""
    clients = [Client(port) for _ in requests]
    for c in clients:
        assert c.request("GET", "/health").status == 200  # connected before the start
    start, statuses = threading.Barrier(len(requests)), [0] * len(requests)

    def send(i: int) -> None:
        start.wait()
        statuses[i] = clients[i].request(*requests[i]).status

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients:
        c.close()
    return statuses


def _audited(client: Client, message_id: int) -> list[str]:
    events = client.request("GET", "/users/alice/audit?limit=1000").body["events"]
    return [e["action"] for e in events if f"m{message_id}" in e["message_ids"]
            and e["action"] in ("confirm", "reject")]


def test_of_a_confirm_and_a_reject_sent_at_once_exactly_one_wins(app, client):
    for message_id in _propose(app, 200):
        path = f"/users/alice/messages/m{message_id}"
        statuses = _at_once(app.port, [("POST", f"{path}/confirm"), ("POST", f"{path}/reject")])
        assert sorted(statuses) in ([200, 404], [200, 409]), statuses
        won = "confirm" if statuses[0] == 200 else "reject"
        assert _audited(client, message_id) == [won]
        kept = client.request("GET", path).status == 200
        assert kept == (won == "confirm")


def test_of_two_rejects_sent_at_once_exactly_one_wins(app, client):
    for message_id in _propose(app, 50):
        path = f"/users/alice/messages/m{message_id}/reject"
        statuses = _at_once(app.port, [("POST", path), ("POST", path)])
        assert sorted(statuses) == [200, 404], statuses
        assert _audited(client, message_id) == ["reject"]


# ---- request targets --------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["//add", "///add", "//search", "//users", "//stats",
                                    "//users/alice", "http://127.0.0.1/add", "*"])
def test_a_target_that_is_not_a_path_with_one_leading_slash_is_a_400(app, client, target):
    body = json.dumps({"user_id": "alice", "request_id": "r0", "session_id": "s1",
                       "messages": [{"role": "user", "content": "smuggled"}]})
    request = (f"POST {target} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}").encode()
    reply, _ = exchange(app.port, request)
    assert reply.startswith(b"HTTP/1.1 400")
    assert client.search("alice", "smuggled").body["data"] == []
    control = client.add("alice", "r1", ["stored through /add"])  # the one spelling served
    assert control.status == 200 and client.contents("alice", "stored") == ["stored through /add"]


# ---- cross-site changes and DNS rebinding ----------------------------------------------------


def _proposed_one(app) -> int:
    return _propose(app, 1)[0]


@pytest.mark.parametrize("headers", [
    {"Origin": "http://evil.example"}, {"Origin": "null"},
    {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
    {"Origin": "http://127.0.0.1:1", "Content-Type": "text/plain"},
])
def test_a_change_sent_by_another_sites_page_is_refused(app, client, headers):
    message_id = _proposed_one(app)
    response = client.request("POST", f"/users/alice/messages/m{message_id}/confirm", headers=headers)
    assert response.status == 403 and response.body["error"]["code"] == "forbidden"
    forget = client.request("DELETE", f"/users/alice/messages/m{message_id}", headers=headers)
    assert forget.status == 403
    assert client.request("GET", f"/users/alice/messages/m{message_id}").body["trust"] == "proposed"
    # Controls: the page's own origin, as the inspector sends it, and a client that is no browser.
    own = {"Origin": f"http://127.0.0.1:{app.port}", "Sec-Fetch-Site": "same-origin"}
    assert client.request("POST", f"/users/alice/messages/m{message_id}/confirm",
                          headers=own).status == 200
    assert client.request("DELETE", f"/users/alice/messages/m{message_id}").status == 200


def test_the_page_behind_a_proxy_that_rewrites_host_still_makes_changes(app, client):
    """A reverse proxy sets Host to the upstream address; the browser's Sec-Fetch-Site decides,
    and an Origin on a default port matches a Host that names none."""
    message_id, other = _propose(app, 2)
    path = f"/users/alice/messages/m{message_id}/confirm"
    behind_proxy = {"Origin": "https://mem.example.com", "Sec-Fetch-Site": "same-origin"}
    assert client.request("POST", path, headers=behind_proxy).status == 200
    refused = {"Origin": "https://mem.example.com", "Sec-Fetch-Site": "cross-site"}
    assert client.request("POST", f"/users/alice/messages/m{other}/confirm",
                          headers=refused).status == 403  # control: still proposed, refused
    assert client.request("GET", f"/users/alice/messages/m{other}").body["trust"] == "proposed"


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1.evil.example",
                                  "10.0.0.1", "[", "", "evil.com@127.0.0.1", "127.0.0.1@evil.com",
                                  "user:pw@localhost", "localhost.", "127.0.0.1 evil.com",
                                  "127.0.0.1:80/evil", "127.999.0.1", "[::1]x"])
def test_a_keyless_loopback_server_answers_only_to_this_machines_names(app, client, host):
    client.add("alice", "r1", ["a secret about the harbour"])
    response = client.request("GET", "/users/alice/messages", headers={"Host": host})
    assert response.status == 403 and b"harbour" not in json.dumps(response.body).encode()
    for name in (f"127.0.0.1:{app.port}", f"localhost:{app.port}", "LOCALHOST", "[::1]:8080"):
        shown = client.request("GET", "/users/alice/messages", headers={"Host": name})
        assert shown.status == 200 and shown.body["messages"], name


def test_two_host_headers_are_refused_even_when_one_names_this_machine(app, client):
    client.add("alice", "r1", ["a secret about the harbour"])
    raw = socket.create_connection(("127.0.0.1", app.port), timeout=10)
    try:
        raw.sendall(b"GET /users/alice/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Host: evil.example\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := raw.recv(65536):
            answer += chunk
    finally:
        raw.close()
    assert answer.startswith(b"HTTP/1.1 403") and b"harbour" not in answer
    shown = client.request("GET", "/users/alice/messages", headers={"Host": "127.0.0.1"})
    assert shown.status == 200 and shown.body["messages"]  # control: one Host is answered


def test_a_server_with_a_key_leaves_the_host_to_the_key(tmp_path):
    app = start_app(tmp_path, api_key="k")
    try:
        c = Client(app.port, api_key="k")
        assert c.request("GET", "/users", headers={"Host": "memory.example"}).status == 200
        assert Client(app.port).request("GET", "/users",
                                        headers={"Host": "memory.example"}).status == 401
    finally:
        app.stop()


# ---- numbers past 4,300 digits ------------------------------------------------------------


@pytest.mark.parametrize("path", ["/users?limit=", "/users/alice/messages?limit=",
                                  "/users/alice/sessions?limit=", "/users/alice/audit?limit=",
                                  "/users/alice/audit?cursor="])
def test_a_number_of_4301_digits_in_a_query_is_a_400_naming_it(client, path):
    client.add("alice", "r1", ["a message"])
    response = client.request("GET", path + HUGE)
    field = path.rsplit("?", 1)[1].rstrip("=")
    assert response.status == 400 and response.body["error"]["field"] == field
    assert client.request("GET", path + "1").status == 200  # control


def test_a_content_length_of_4301_digits_is_answered_at_once(app):
    reply, took = exchange(app.port, b"POST /add HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                           b"application/json\r\nContent-Length: " + HUGE.encode() + b"\r\n\r\n{}")
    assert reply.startswith(b"HTTP/1.1 413") and took < app.config.socket_timeout


def test_a_recent_cursor_holding_a_number_beyond_64_bits_is_a_clear_error(tmp_path):
    memory = ScopedMemory.at(tmp_path / "p", tmp_path / "a")
    try:
        for n in range(3):
            memory.remember(f"The user noted thing {n}.")
        cursor = memory.recent(limit=1)["next_cursor"]
        assert len(memory.recent(limit=1, cursor=cursor)["results"]) == 1  # control
        from aml_retriever.agents.scopes import encode_cursor
        for forged in (encode_cursor(b"another key", (2**70, 0, 1)), cursor[:-2] + "AA"):
            with pytest.raises(InvalidField, match="cursor"):
                memory.recent(limit=1, cursor=forged)
    finally:
        memory.close()


# ---- framing: empty lines first, bytes that are not HTTP -------------------------------------


def test_empty_lines_before_a_request_line_are_ignored(app):
    reply, _ = exchange(app.port, b"\r\n\r\n\nGET /health HTTP/1.1\r\nHost: localhost\r\n"
                        b"Connection: close\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("data", [
    bytes.fromhex("16030100a5010000a103035f"),  # the start of a TLS ClientHello
    b"GET /\r\n",  # HTTP/0.9: no version
    b"\x00\x01\x02\x03\r\n",
])
def test_bytes_that_are_not_http_1_are_a_400_at_once(app, data):
    reply, took = exchange(app.port, data)
    assert reply.startswith(b"HTTP/1.1 400") and took < app.config.socket_timeout / 2
    control, _ = exchange(app.port, b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: "
                          b"close\r\n\r\n")
    assert control.startswith(b"HTTP/1.1 200")


# ---- another application's file, an import line without end -------------------------------


def test_another_applications_sqlite_file_at_a_new_users_path_is_set_aside(app, client):
    path = app.store.shard_path("mallory")
    path.parent.mkdir(parents=True, exist_ok=True)
    foreign = sqlite3.connect(path)
    foreign.execute("CREATE TABLE photos (name TEXT)")
    foreign.commit()
    foreign.close()
    response = client.add("mallory", "r1", ["hello"])
    assert response.status == 503 and response.body["error"]["code"] == "user_store_damaged"
    assert str(app.store.path.parent) not in json.dumps(response.body) and "/" not in \
        response.body["error"]["message"].replace("/users/{user_id}", "").replace("docs/", "")
    assert (app.store.quarantine_dir / path.name).exists()  # set aside, never deleted
    assert client.add("alice", "r1", ["control"]).status == 200


def test_import_refuses_a_line_longer_than_its_bound_by_number(tmp_path):
    good = {"user_id": "alice", "request_id": "r1", "session_id": "s1",
            "messages": [{"role": "user", "content": "a short line"}]}
    long = {**good, "request_id": "r2", "messages": [{"role": "user", "content": "x" * 5000}]}
    path = tmp_path / "in.ndjson"
    path.write_text(json.dumps(good) + "\n" + json.dumps(long) + "\n")
    db = tmp_path / "aml.db"

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "aml_retriever", "import", "--db", str(db),
                               "--in", str(path), *extra], capture_output=True, text=True,
                              cwd=ROOT, timeout=60)

    refused = run("--max-line-bytes", "1000")
    assert refused.returncode == 1 and "line 2 is longer than 1000 bytes" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    assert not (tmp_path / "aml.db.users").exists() or not list((tmp_path / "aml.db.users").rglob("*.db"))
    imported = run()  # control: the default bound takes both
    assert imported.returncode == 0 and json.loads(imported.stdout)["success"] is True

