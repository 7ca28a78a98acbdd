"""Every error is JSON of one shape, names the field, and never echoes content."""

from __future__ import annotations

import socket

import pytest

SECRET = "SECRET-CONTENT-7731"
GOOD_ADD = {"request_id": "r1", "user_id": "alice", "session_id": "s1",
            "messages": [{"role": "user", "content": "hello"}]}


def read_until_close(sock: socket.socket) -> bytes:
    sock.settimeout(5)
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def assert_error(response, status, code, field=None):
    assert response.status == status, response.body
    assert set(response.body) == {"error"}
    assert set(response.body["error"]) == {"code", "message", "field"}
    assert response.body["error"]["code"] == code
    assert response.body["error"]["field"] == field
    assert SECRET not in response.raw.decode("utf-8", "replace")
    assert response.headers["content-type"].startswith("application/json")


def with_message(**message):
    return {**GOOD_ADD, "messages": [{"role": "user", "content": SECRET, **message}]}


INVALID_ADDS = [
    ({**GOOD_ADD, "request_id": ""}, "request_id"),
    ({**GOOD_ADD, "request_id": "   "}, "request_id"),
    ({**GOOD_ADD, "request_id": "x" * 257}, "request_id"),
    ({**GOOD_ADD, "user_id": 7}, "user_id"),
    ({**GOOD_ADD, "user_id": None}, "user_id"),
    ({k: v for k, v in GOOD_ADD.items() if k != "session_id"}, "session_id"),
    ({**GOOD_ADD, "messages": []}, "messages"),
    ({**GOOD_ADD, "messages": "hello"}, "messages"),
    ({**GOOD_ADD, "messages": [SECRET]}, "messages[0]"),
    (with_message(role=""), "messages[0].role"),
    (with_message(role=["user"]), "messages[0].role"),
    ({**GOOD_ADD, "messages": [{"role": "user", "content": ""}]}, "messages[0].content"),
    ({**GOOD_ADD, "messages": [{"role": "user", "content": 12}]}, "messages[0].content"),
    (with_message(timestamp=True), "messages[0].timestamp"),
    (with_message(timestamp="yesterday " + SECRET), "messages[0].timestamp"),
    (with_message(timestamp=10 ** 20), "messages[0].timestamp"),
    (with_message(timestamp={"ms": 1}), "messages[0].timestamp"),
]


@pytest.mark.parametrize("body,field", INVALID_ADDS)
def test_invalid_add_field_is_400_naming_the_field(client, body, field):
    assert_error(client.post("/add", body), 400, "invalid_field", field)


INVALID_SEARCHES = [
    ({"user_id": "alice"}, "query"),
    ({"user_id": "alice", "query": ""}, "query"),
    ({"user_id": "alice", "query": "   "}, "query"),
    ({"user_id": "alice", "query": 5}, "query"),
    ({"query": SECRET}, "user_id"),
    ({"user_id": "alice", "query": SECRET, "top_k": 0}, "top_k"),
    ({"user_id": "alice", "query": SECRET, "top_k": 101}, "top_k"),
    ({"user_id": "alice", "query": SECRET, "top_k": -1}, "top_k"),
    ({"user_id": "alice", "query": SECRET, "top_k": 10.5}, "top_k"),
    ({"user_id": "alice", "query": SECRET, "top_k": "10"}, "top_k"),
    ({"user_id": "alice", "query": SECRET, "top_k": True}, "top_k"),
    ({"user_id": "alice", "query": SECRET, "options": "a"}, "options"),
    ({"user_id": "alice", "query": SECRET, "options": [""]}, "options[0]"),
    ({"user_id": "alice", "query": SECRET, "options": [1]}, "options[0]"),
    ({"user_id": "alice", "query": SECRET, "options": ["a"] * 33}, "options"),
    ({"user_id": "alice", "query": SECRET, "filter_session": "yes"}, "filter_session"),
    ({"user_id": "alice", "query": SECRET, "filter_session": True}, "session_id"),
]


@pytest.mark.parametrize("body,field", INVALID_SEARCHES)
def test_invalid_search_field_is_400_naming_the_field(client, body, field):
    assert_error(client.post("/search", body), 400, "invalid_field", field)


def test_lone_surrogate_is_refused_by_name(client):
    raw = b'{"request_id":"r1","user_id":"alice","session_id":"s1",' \
          b'"messages":[{"role":"user","content":"bad \\ud800 text"}]}'
    response = client.request("POST", "/add", raw=raw, headers={"Content-Type": "application/json"})
    assert_error(response, 400, "invalid_field", "messages[0].content")


@pytest.mark.parametrize("raw,field", [
    (b"{not json", "body"),
    (b"[1, 2]", "body"),
    (b"\xff\xfe{}", "body"),
    (b'{"query": NaN, "user_id": "a"}', "body"),
    (b'{"user_id": "a", "user_id": "b", "query": "x"}', "user_id"),
    (b"[" * 100_000 + b"]" * 100_000, "body"),
])
def test_malformed_body_is_400(client, raw, field):
    response = client.request("POST", "/search", raw=raw, headers={"Content-Type": "application/json"})
    assert_error(response, 400, "invalid_body", field)


def test_unknown_route_is_404(client):
    assert_error(client.request("GET", "/nowhere"), 404, "not_found")
    assert_error(client.post("/add/", GOOD_ADD), 404, "not_found")


@pytest.mark.parametrize("method,path,allowed", [
    ("GET", "/add", "POST"), ("PUT", "/search", "POST"), ("POST", "/health", "GET"),
    ("DELETE", "/stats", "GET"), ("GET", "/users/alice", "DELETE"), ("PATCH", "/delete_user", "POST"),
])
def test_wrong_method_is_405_with_allow(client, method, path, allowed):
    response = client.request(method, path)
    assert_error(response, 405, "method_not_allowed")
    assert response.headers["allow"] == allowed


def test_post_without_length_is_411(app):
    with socket.create_connection(("127.0.0.1", app.port)) as sock:
        sock.sendall(b"POST /add HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\r\n")
        head = sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 411")


def test_chunked_body_is_411(app):
    with socket.create_connection(("127.0.0.1", app.port)) as sock:
        sock.sendall(b"POST /add HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
        head = sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 411")


def test_body_over_the_limit_is_413_and_connection_closes(make_app):
    from conftest import Client

    c = Client(make_app(max_body_bytes=2048).port)
    body = {**GOOD_ADD, "messages": [{"role": "user", "content": SECRET * 400}]}
    response = c.post("/add", body)
    assert_error(response, 413, "payload_too_large", "body")
    assert response.headers["connection"] == "close"
    assert c.post("/add", GOOD_ADD).status == 200  # control: a small body passes


def test_too_many_messages_is_413(make_app):
    from conftest import Client

    c = Client(make_app(max_messages=3).port)
    body = {**GOOD_ADD, "messages": [{"role": "user", "content": "m"}] * 4}
    assert_error(c.post("/add", body), 413, "payload_too_large", "messages")
    assert c.post("/add", {**body, "messages": body["messages"][:3]}).status == 200


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_body_that_is_not_json_is_415(client, content_type):
    headers = {"Content-Type": content_type} if content_type else {}
    response = client.request("POST", "/search", raw=b'{"user_id":"a","query":"x"}', headers=headers)
    assert_error(response, 415, "unsupported_media_type", "Content-Type")


def test_json_with_charset_is_accepted(client):
    response = client.request("POST", "/search", raw=b'{"user_id":"a","query":"x"}',
                              headers={"Content-Type": "application/json; charset=utf-8"})
    assert response.status == 200


def test_malformed_request_line_gets_json_400_and_server_keeps_serving(app, client):
    with socket.create_connection(("127.0.0.1", app.port)) as sock:
        sock.sendall(f"GARBAGE {SECRET} NONSENSE EXTRA\r\n\r\n".encode())
        reply = read_until_close(sock)
    assert reply.startswith(b"HTTP/1.1 400") and SECRET.encode() not in reply
    assert b'"error"' in reply
    assert client.request("GET", "/health").status == 200


def test_bad_content_length_is_400(app):
    with socket.create_connection(("127.0.0.1", app.port)) as sock:
        sock.sendall(b"POST /search HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     b"Content-Length: -5\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 400")


def test_stalled_body_is_408_and_the_connection_closes(make_app):
    app = make_app(socket_timeout=0.5)
    with socket.create_connection(("127.0.0.1", app.port)) as sock:
        sock.sendall(b"POST /search HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n{\"user_id\"")
        reply = read_until_close(sock)
    assert reply.startswith(b"HTTP/1.1 408") and b"request_timeout" in reply


def test_header_line_without_colon_is_400(app):
    with socket.create_connection(("127.0.0.1", app.port)) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost x\r\nBadHeader\r\n\r\n")
        reply = read_until_close(sock)
    assert reply.startswith(b"HTTP/1.1 400") and b'"bad_request"' in reply


@pytest.mark.parametrize("request_bytes,status,code", [
    (b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\n\r\n", 414, b'"request_uri_too_long"'),
    (b"GET /health HTTP/1.1\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(120)) + b"\r\n",
     431, b'"request_header_fields_too_large"'),
    (b"GET /health HTTP/9.9\r\n\r\n", 505, b'"http_version_not_supported"'),
])
def test_framing_errors_use_the_json_shape(app, request_bytes, status, code):
    with socket.create_connection(("127.0.0.1", app.port)) as sock:
        sock.sendall(request_bytes)
        reply = read_until_close(sock)
    assert reply.startswith(b"HTTP/1.1 %d" % status) and code in reply


def test_bad_content_length_names_the_header(client):
    response = client.request("POST", "/search", raw=b"{}", headers={
        "Content-Type": "application/json", "Content-Length": "abc"})
    assert_error(response, 400, "bad_request", "Content-Length")


def test_null_top_k_means_the_default_and_bom_is_tolerated(client):
    client.add("alice", "r1", [f"ibis {i}" for i in range(15)])
    assert len(client.search("alice", "ibis", top_k=None).body["data"]) == 10
    raw = '\ufeff{"user_id": "alice", "query": "ibis"}'.encode("utf-8")
    response = client.request("POST", "/search", raw=raw, headers={"Content-Type": "application/json"})
    assert response.status == 200 and len(response.body["data"]) == 10
