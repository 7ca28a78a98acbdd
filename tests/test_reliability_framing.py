"""Strict HTTP/1.1 framing and refusals a client can read: a bare LF in the request line or the
headers is a 400 that closes the connection (what follows is never run as a request), and a
request refused before its body was read (413, 401, 411) is answered, then drained, so the client
reads the status instead of a reset."""

from __future__ import annotations

import socket

import pytest
from conftest import Client
from reliability_support import responses


def exchange(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def test_a_bare_lf_pipeline_cannot_smuggle_a_second_request(app, client: Client):
    assert client.add("victim", "r1", ["the victim's note"]).status == 200
    smuggled = (b"POST /search HTTP/1.1\nHost: localhost\nContent-Type: application/json\n"
                b"Content-Length: 2\n\n{}DELETE /users/victim HTTP/1.1\nHost: localhost\n\n")
    answers = responses(exchange(app.port, smuggled))
    assert [a.status for a in answers] == [400]  # one answer; the connection is closed
    assert client.contents("victim", "note") == ["the victim's note"]  # the DELETE never ran
    crlf = (b"POST /search HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Content-Length: 2\r\n\r\n{}GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert [a.status for a in responses(exchange(app.port, crlf))] == [400, 200]  # control


@pytest.mark.parametrize("head", [
    b"GET /health HTTP/1.1\n\r\n",                          # request line ends in a bare LF
    b"GET /health HTTP/1.1\r\nHost: localhost\n\r\n",               # a header line does
    b"GET /health HTTP/1.1\r\nHost: localhost\r\nAccept: */*\n\n",  # and the head's end
])
def test_a_bare_lf_anywhere_in_the_head_is_a_400(app, head):
    assert [a.status for a in responses(exchange(app.port, head))] == [400]
    assert [a.status for a in responses(exchange(app.port, b"GET /health HTTP/1.1\r\n\r\n"))] == [200]


BIG = 8 * 1024 * 1024


@pytest.mark.parametrize("extra, status", [
    (b"", 413),                                    # too large
    (b"Authorization: Bearer wrong\r\n", 401),     # refused before the body, with a key
])
def test_a_refused_large_body_is_answered_and_read_back(make_app, extra, status):
    app = make_app(api_key="k" if status == 401 else "")
    head = (b"POST /add HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" + extra
            + f"Content-Length: {BIG}\r\n\r\n".encode())
    answer = responses(exchange(app.port, head + b"x" * BIG, timeout=30))
    assert [a.status for a in answer] == [status]
    assert answer[0].json()["error"]["code"] in ("payload_too_large", "unauthorized")


def test_a_chunked_body_is_411_and_read_back(app):
    head = (b"POST /add HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    body = b"".join(b"4000\r\n" + b"y" * 0x4000 + b"\r\n" for _ in range(256)) + b"0\r\n\r\n"
    assert [a.status for a in responses(exchange(app.port, head + body))] == [411]


def test_a_client_that_expects_100_continue_is_told_to_go_on(app, client: Client):
    assert client.add("u", "r1", ["orchids in the garden"]).status == 200
    body = b'{"user_id": "u", "query": "orchids"}'
    with socket.create_connection(("127.0.0.1", app.port), timeout=5) as sock:
        sock.sendall(b"POST /search HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                     b"Expect: 100-continue\r\nContent-Length: " + str(len(body)).encode()
                     + b"\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")  # at once
        sock.sendall(body)
        answer = b""
        while b"orchids" not in answer:
            chunk = sock.recv(65536)
            assert chunk
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200") and answer.count(b"100 Continue") == 0
