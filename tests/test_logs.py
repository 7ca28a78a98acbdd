"""Access logs and request ids. `--log-format json` writes one JSON object per line, each access
line with its request id and nothing a client wrote but its method (user ids, content, queries,
paths and query strings never appear; the populated control: they were sent, and stored). The
default text line keeps its shape. X-Request-Id is echoed on every answer, errors and the
connection loop's own included; a hostile one is replaced, never reflected or logged."""

from __future__ import annotations

import json
import logging
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Client

from aml_retriever.http import logs
from aml_retriever.http.logs import JsonFormatter

ROOT = Path(__file__).resolve().parent.parent
SECRET = "logsecret5813"
GENERATED = re.compile(r"[0-9a-f]{32}")
ACCESS_FIELDS = {"time", "level", "logger", "request_id", "method", "route", "status",
                 "duration_ms", "bytes", "client"}


def access_lines(caplog: pytest.LogCaptureFixture, count: int) -> list[str]:
    """The access lines logged, once there are `count` (a line is written after its answer)."""
    deadline = time.monotonic() + 5
    while True:
        lines = [r.getMessage() for r in caplog.records if r.name == "aml_retriever.access"]
        if len(lines) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.01)


def _serve_json(db: Path) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "aml_retriever", "serve", "--port", "0", "--db", str(db),
         "--log-format", "json"], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        message = json.loads(line).get("message", "")
        if message.startswith("serving on"):
            return process, int(message.split()[2].rsplit(":", 1)[1])
    raise AssertionError("server did not start")


def test_json_lines_carry_the_request_id_and_nothing_a_client_wrote(tmp_path):
    process, port = _serve_json(tmp_path / "aml.db")
    c = Client(port)
    user = f"user-{SECRET}"
    sent = [
        c.add(user, f"req-{SECRET}", [f"content {SECRET}"], session=f"session-{SECRET}",
              role=f"role-{SECRET}"),
        c.search(user, f"query {SECRET}"),
        c.request("POST", "/search", body={"user_id": user, "query": "x"},
                  headers={"X-Request-Id": "trace-42"}),
        c.request("GET", f"/users/{user}/audit?cursor=0&note={SECRET}"),
        c.request("GET", f"/nowhere/{SECRET}?q={SECRET}"),
        c.request("GET", "/health", headers={"X-Request-Id": f"{SECRET} with spaces"}),
        c.request("DELETE", f"/users/{user}"),
    ]
    assert SECRET in sent[1].body["data"][0]["content"]  # control: the content was stored
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0
    lines = [json.loads(line) for line in stderr.splitlines()]  # every line is one JSON object
    access = [line for line in lines if line["logger"] == "aml_retriever.access"]
    assert len(access) == len(sent)
    assert all(set(line) == ACCESS_FIELDS for line in access)
    assert [line["request_id"] for line in access] == [r.headers["x-request-id"] for r in sent]
    assert [(line["method"], line["route"], line["status"]) for line in access] == [
        ("POST", "/add", 200), ("POST", "/search", 200), ("POST", "/search", 200),
        ("GET", "/users/{user_id}/audit", 200), ("GET", "-", 404), ("GET", "/health", 200),
        ("DELETE", "/users/{user_id}", 200)]
    assert access[2]["request_id"] == "trace-42"
    assert GENERATED.fullmatch(access[5]["request_id"])  # the hostile one replaced
    assert all(line["bytes"] == len(r.raw) for line, r in zip(access, sent, strict=True))
    assert all(line["client"] == "127.0.0.1" and line["duration_ms"] >= 0 for line in access)
    assert "stopped" in [line.get("message") for line in lines]  # other lines: their message
    assert SECRET not in stderr and "user-" not in stderr


def test_the_text_line_keeps_its_shape_and_gains_the_request_id(client, caplog):
    client.request("GET", "/health", headers={"X-Request-Id": "text-1"})
    client.request("GET", f"/users/{SECRET}/audit")
    lines = access_lines(caplog, 2)
    assert re.fullmatch(r"GET /health 200 [0-9]+\.[0-9]ms id=text-1", lines[0])
    assert re.fullmatch(r"GET /users/\{user_id\}/audit 404 [0-9]+\.[0-9]ms id=[0-9a-f]{32}", lines[1])
    assert SECRET not in "\n".join(lines)


def test_the_json_formatter_renders_other_lines_as_their_message():
    record = logging.LogRecord("aml_retriever.server", logging.WARNING, __file__, 1,
                               "only %d bytes free", (12,), None)
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "only 12 bytes free" and line["level"] == "WARNING"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"])


def _exchange(port: int, request: bytes) -> bytes:
    """The head of the answer to a raw request."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(request)
        sock.settimeout(10)
        data = b""
        while b"\r\n\r\n" not in data and (chunk := sock.recv(65536)):
            data += chunk
    return data.split(b"\r\n\r\n")[0]


def _echoed(head: bytes) -> str:
    found = re.findall(rb"\r\nX-Request-Id: ([^\r\n]*)", head)
    assert len(found) == 1, head
    return found[0].decode("latin-1")


@pytest.mark.parametrize("value", [b"abc-123", b"0af7651916cd43dd8448eb211c80319c",
                                   b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                                   b"a.b_c:d/e+f=g~h", b"x" * 128])
def test_a_safe_request_id_is_echoed(app, value):
    head = _exchange(app.port, b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: "
                     + value + b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and _echoed(head) == value.decode()


@pytest.mark.parametrize("header", [
    b"X-Request-Id: " + b"a" * 10_240 + b"\r\n",  # 10 KB
    b"X-Request-Id: " + b"x" * 129 + b"\r\n",  # one past the bound
    "X-Request-Id: ид-запроса\r\n".encode(),  # non-ASCII
    b"X-Request-Id: abc%0d%0aSet-Cookie:%20x=1\r\n",  # CRLF, percent-encoded
    b"X-Request-Id: a b\r\n", b"X-Request-Id: <script>\r\n", b"X-Request-Id: \"q\"\r\n",
    b"X-Request-Id: \r\n",  # empty
    b"X-Request-Id: one\r\nX-Request-Id: two\r\n",  # twice
    b"",  # absent
], ids=["10KB", "129", "non-ascii", "crlf-encoded", "space", "markup", "quotes", "empty", "twice",
        "absent"])
def test_an_unsafe_or_missing_request_id_is_replaced_by_a_generated_one(app, caplog, header):
    head = _exchange(app.port, b"GET /health HTTP/1.1\r\nHost: localhost\r\n" + header + b"\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    echoed = _echoed(head)
    assert GENERATED.fullmatch(echoed)
    assert b"Set-Cookie" not in head and b"\xd0" not in head and b"aaaaaaaaaa" not in head
    logged = "\n".join(access_lines(caplog, 1))
    assert f"id={echoed}" in logged  # control: the line of this answer is there
    value = header.partition(b":")[2].strip()
    assert not value or value.decode("latin-1") not in logged


def test_a_raw_cr_or_lf_in_the_header_never_reaches_the_answers_head(app):
    for value in (b"abc\rInjected: 1", b"abc\nInjected: 1"):
        head = _exchange(app.port, b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Request-Id: " + value
                         + b"\r\n\r\n")
        assert b"Injected" not in head
        assert re.fullmatch(r"[A-Za-z0-9._~:/+=-]{1,128}", _echoed(head))


def test_two_answers_without_an_id_get_different_ones(client):
    first = client.request("GET", "/health").headers["x-request-id"]
    second = client.request("GET", "/health").headers["x-request-id"]
    assert GENERATED.fullmatch(first) and GENERATED.fullmatch(second) and first != second


def test_every_error_answer_echoes_the_request_id(make_app):
    app = make_app(api_key="k", max_body_bytes=2048)
    c = Client(app.port, api_key="k")
    rid = {"X-Request-Id": "err-1"}
    answers = [
        Client(app.port).request("GET", "/stats", headers=rid),  # 401
        c.request("GET", "/nowhere", headers=rid),  # 404
        c.request("PUT", "/search", headers=rid),  # 405
        c.request("POST", "/search", body={"user_id": ""}, headers=rid),  # 400
        c.request("POST", "/add", raw=b"x" * 4096, headers={**rid, "Content-Type": "application/json"}),
        c.request("POST", "/add", raw=b"{}", headers={**rid, "Content-Type": "text/plain"}),  # 415
    ]
    assert [a.status for a in answers] == [401, 404, 405, 400, 413, 415]
    assert all(a.headers["x-request-id"] == "err-1" for a in answers)
    # http.server's own refusals: a bare LF (headers parsed: echoed), a request line too broken
    # to parse (no headers: generated)
    head = _exchange(app.port, b"GET /health HTTP/1.1\nX-Request-Id: err-2\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and _echoed(head) == "err-2"
    head = _exchange(app.port, b"GARBAGE\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and GENERATED.fullmatch(_echoed(head))


def test_the_openapi_document_declares_the_request_id_everywhere():
    spec = json.loads((ROOT / "aml_retriever" / "http" / "openapi.json").read_text())
    operations = [op for item in spec["paths"].values() for op in item.values()]
    assert len(operations) >= 8
    for op in operations:
        assert {"$ref": "#/components/parameters/RequestId"} in op["parameters"], op["operationId"]
        for status, response in op["responses"].items():
            assert "X-Request-Id" in response["headers"], (op["operationId"], status)
    pattern = spec["components"]["headers"]["RequestId"]["schema"]["pattern"]
    assert pattern.strip("^$") == logs._SAFE_ID.pattern
