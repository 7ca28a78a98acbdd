"""The security review, as tests: the key is compared in constant time and a 401 is the same
whatever was wrong; no key, content or user id reaches a log line, an error or /stats; hostile
user ids never name a file outside the store; the package imports only the standard library."""

from __future__ import annotations

import ast
import hmac
import sys
from pathlib import Path

import pytest
from conftest import Client
from reliability_support import ROOT, exchange, responses

import aml_retriever.http.auth as auth_module
from aml_retriever.cli import main
from aml_retriever.storage.gate import GATE_FILE

KEY = "k-7f3a9c1e-secret"
CANARY = "cnryZ81"


@pytest.fixture
def keyed(make_app):
    return make_app(api_key=KEY)


def comparable(response) -> tuple:
    """An answer less what differs on every answer: its date and its generated request id."""
    return response.status, tuple(sorted((k, v) for k, v in response.headers.items()
                                         if k not in ("date", "x-request-id"))), response.raw


def test_a_401_is_byte_for_byte_the_same_whatever_was_wrong(keyed):
    c = Client(keyed.port)
    wrong = [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {KEY[:-1]}"},
             {"Authorization": f"Bearer {KEY}x"}, {"X-Api-Key": KEY.upper()}, {"Authorization": KEY},
             {"Authorization": f"Basic {KEY}"}, {"X-Api-Key": ""}, {"Authorization": "Bearer"}]
    for path in ("/stats", "/search", "/nowhere", "/users/alice"):
        answers = {comparable(c.request("GET", path, headers=headers)) for headers in wrong}
        assert len(answers) == 1 and next(iter(answers))[0] == 401
    assert c.request("GET", "/stats", headers={"X-Api-Key": KEY}).status == 200  # control


def test_the_key_is_checked_with_a_constant_time_comparison(keyed, monkeypatch):
    compared = []
    compare = hmac.compare_digest

    def spy(a, b):
        compared.append((a, b))
        return compare(a, b)

    monkeypatch.setattr(auth_module.hmac, "compare_digest", spy)
    c = Client(keyed.port)
    assert c.request("GET", "/stats", headers={"X-Api-Key": "nope"}).status == 401
    assert c.request("GET", "/stats", headers={"X-Api-Key": KEY}).status == 200
    assert compared == [(b"nope", KEY.encode()), (KEY.encode(), KEY.encode())]


def test_no_key_content_or_user_id_reaches_logs_errors_or_stats(keyed, caplog):
    c = Client(keyed.port, api_key=KEY)
    user = f"user-{CANARY}"
    assert c.add(user, f"req-{CANARY}", [f"content {CANARY}"], session=f"s-{CANARY}").status == 200
    raws = [c.search(user, f"query {CANARY}").raw,
            c.post("/add", {"request_id": f"req-{CANARY}", "user_id": user, "session_id": "s",
                            "messages": [{"role": "user", "content": f"other {CANARY}"}]}).raw,
            c.post("/add", {"request_id": CANARY, "user_id": user, "session_id": "s",
                            "messages": [{"role": CANARY * 100, "content": CANARY}]}).raw,
            c.request("GET", "/stats").raw,
            c.request("GET", f"/{CANARY}").raw,
            Client(keyed.port).request("GET", "/stats", headers={"X-Api-Key": KEY + CANARY}).raw]
    for hostile in (f"{CANARY} /add HTTP/1.1\r\n\r\n", f"GET /{CANARY} HTTP/1.1 {CANARY}\r\n\r\n",
                    f"GET /health HTTP/1.1\r\n{CANARY}\r\n\r\n", f"G{CANARY}T /health HTTP/1.1\r\n\r\n"):
        raws.append(exchange(keyed.port, hostile.encode()))
    assert c.request("DELETE", f"/users/{user}").status == 200
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "POST /search 200" in logged and "OTHER - 401" in logged  # control: the lines are there
    assert CANARY not in logged and KEY not in logged
    assert raws[0].count(CANARY.encode()) >= 1  # control: a Search returns the user's own content
    for raw in raws[1:]:
        assert CANARY.encode() not in raw and KEY.encode() not in raw, raw


def test_printed_config_redacts_the_key(capsys):
    assert main(["print-config", "--api-key", KEY]) == 0
    printed = capsys.readouterr().out
    assert KEY not in printed and '"api_key"' in printed


@pytest.mark.parametrize("user_id", ["../../escape", "/etc/passwd", "..", "a\x00b", "CON", "x" * 256,
                                     "aml.db", "users/../../../tmp/x"])
def test_a_hostile_user_id_never_names_a_file_outside_the_store(make_app, tmp_path, user_id):
    c = Client(make_app().port)
    assert c.add(user_id, "r1", ["path probe"]).status == 200
    assert c.contents(user_id, "probe") == ["path probe"]
    files = [p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()]
    shards = [p for p in files if p.parts[0] == "aml.db.users" and p.name != GATE_FILE]
    assert shards and all(len(p.parts) == 3 and all(ch in "0123456789abcdef" for ch in p.parts[1])
                          for p in shards)
    assert {p for p in files if p.parts[0] != "aml.db.users"} <= {
        Path("aml.db"), Path("aml.db-wal"), Path("aml.db-shm")}


def test_the_package_imports_only_the_standard_library():
    imported = set()
    for source in (ROOT / "aml_retriever").rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(), str(source))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    assert "sqlite3" in imported and "http" in imported  # control: the scan sees imports
    assert imported - set(sys.stdlib_module_names) == {"aml_retriever"}


def test_an_unknown_method_is_a_json_405_not_a_501(app):
    answers = responses(exchange(app.port, b"BREW /add HTTP/1.1\r\nHost: localhost\r\n\r\n"))
    assert [a.status for a in answers] == [405]
    assert answers[0].json()["error"]["code"] == "method_not_allowed"
    assert b"Allow: POST" in answers[0].head


def test_a_body_on_a_request_that_takes_none_is_never_run_as_a_second_request(app):
    smuggled = b"DELETE /users/victim HTTP/1.1\r\nHost: localhost\r\n\r\n"
    c = Client(app.port)
    assert c.add("victim", "r1", ["still here"]).status == 200
    answers = responses(exchange(app.port, b"GET /health HTTP/1.1\r\nHost: localhost\r\n"
                                           b"Content-Length: %d\r\n\r\n"
                                 % len(smuggled) + smuggled))
    assert [a.status for a in answers] == [200] and b"Connection: close" in answers[0].head
    assert c.contents("victim", "still") == ["still here"]
    # control: the same bytes sent as a request of their own do delete
    assert responses(exchange(app.port, smuggled))[0].status == 200
    assert c.contents("victim", "still") == []


# Latin-1 superscript digits (the bytes B2, B3, B9) pass str.isdigit() but not int().
@pytest.mark.parametrize("length", [b"\xb2", b"1\xb3", b"\xb9", "\u0663".encode(), b"+1", b"0x1",
                                    b" 1 1 "])
def test_a_content_length_of_anything_but_ascii_digits_is_a_400(app, length):
    answers = responses(exchange(app.port, b"POST /search HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                                 b"application/json\r\nContent-Length: " + length + b"\r\n\r\n{}"))
    assert [a.status for a in answers] == [400]
    assert answers[0].json()["error"]["field"] == "Content-Length"


def test_a_request_line_without_a_version_is_a_400_not_a_bare_body(app):
    answers = responses(exchange(app.port, b"GET /health\r\n"))
    assert [a.status for a in answers] == [400]
