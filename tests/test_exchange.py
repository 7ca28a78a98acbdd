"""Export, import and backup. What must hold: an export imported into an empty store answers every
Search exactly as the original did; importing again (or into the original) changes nothing, and a
retry of an original Add stays a replay; a bad line stops the import with one line naming it and
nothing of that line stored; an export holds nothing of another user; a backup taken while a server
takes Adds is a consistent store holding every Add acknowledged before it began, each whole."""

from __future__ import annotations

import http.client
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import Client, start_app

from aml_retriever.cli import main
from aml_retriever.evaluation import synthetic
from aml_retriever.memory import exchange
from aml_retriever.memory.lifecycle import Statements
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import SearchRequest, parse_add
from aml_retriever.storage.timeline import ReadFilter


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def get(port: int, path: str) -> tuple[int, str, bytes]:
    """Status, Content-Type and body of a GET (the body need not be one JSON document)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()
    finally:
        conn.close()


def open_service(path: Path) -> MemoryService:
    return MemoryService.open(str(path), synchronous="NORMAL")


def searches(service: MemoryService, user: str, queries: list[str], **extra: Any) -> list[Any]:
    return [service.search(SearchRequest(q, user, 10, (), None, **extra))["data"] for q in queries]


@pytest.fixture(scope="module")
def corpus() -> tuple[str, list[dict], list[str]]:
    """A synthetic user (several sessions, dated conversations) and its questions."""
    conversations, _ = synthetic.generate("mixed", "tiny", "mixed", 2)
    conversation = conversations[0]
    return conversation.user_id, list(conversation.adds), [q.question for q in conversation.questions]


def test_an_export_imported_into_an_empty_store_answers_every_search_alike(tmp_path, capsys, corpus):
    user, adds, questions = corpus
    source = open_service(tmp_path / "source.db")
    for add in adds:
        source.add(parse_add(add, 200))
    source.close()
    assert run(capsys, "export", "--db", str(tmp_path / "source.db"), "--user", user,
               "--out", str(tmp_path / "user.ndjson"))[0] == 0
    lines = (tmp_path / "user.ndjson").read_text().splitlines()
    assert [json.loads(line)["request_id"] for line in lines] == [add["request_id"] for add in adds]
    code, out, _ = run(capsys, "import", "--db", str(tmp_path / "copy.db"), "--in",
                       str(tmp_path / "user.ndjson"))
    assert code == 0
    assert json.loads(out) == {"success": True, "lines": len(adds), "imported": len(adds),
                               "replayed": 0, "messages": sum(len(a["messages"]) for a in adds)}
    source, copy = open_service(tmp_path / "source.db"), open_service(tmp_path / "copy.db")
    try:
        assert len(questions) >= 10
        before = searches(source, user, questions)
        assert any(before)  # populated control
        assert searches(copy, user, questions) == before
        assert searches(copy, user, questions, explain=True) == searches(source, user, questions,
                                                                        explain=True)
        middle = json.loads(lines[len(lines) // 2])["original"]["received_at"]
        then = ReadFilter(as_of_ms=middle)  # what the store held when it took the middle Add
        earlier = searches(source, user, questions, read=then)
        assert any(earlier) and earlier != before  # populated control, and the past differs
        assert searches(copy, user, questions, read=then) == earlier
    finally:
        source.close()
        copy.close()


def _agent_memory(service: MemoryService) -> None:
    """A user with every lifecycle state: replaced versions, a proposal, a forgotten message and
    an Add that gave no timestamps."""
    statements = Statements(service, "agent", "mcp")
    paris = statements.remember("run-1", "The user lives in Paris", "fact")
    statements.update("run-2", int(paris.statement["id"][1:]), "The user lives in Lyon")
    tea = statements.remember("run-2", "The user prefers tea in the morning", "preference")
    statements.update("run-3", int(tea.statement["id"][1:]), "The user prefers green tea")
    statements.remember("run-3", "The user might move to Berlin", "fact", origin="agent")
    doomed = statements.remember("run-3", "The user owns a red bicycle", "fact")
    service.forget("agent", [int(doomed.statement["id"][1:])], "forget", "mcp")
    service.add(parse_add({"request_id": "plain", "user_id": "agent", "session_id": "chat",
                           "messages": [{"role": "user", "content": "Where do I live now?"},
                                        {"role": "assistant", "content": "You live in Lyon."}]}, 200))


def test_the_lifecycle_of_statements_survives_the_round_trip(tmp_path):
    source = open_service(tmp_path / "source.db")
    _agent_memory(source)
    exported = b"".join(exchange.ndjson(line) for line in exchange.export(source.store, "agent"))
    copy = open_service(tmp_path / "copy.db")
    importer = exchange.Importer(copy)
    for line in exchange.read_lines(exported.splitlines()):
        importer.add(line)
    queries = ["Where does the user live?", "What does the user drink?", "Berlin", "bicycle"]
    try:
        for read in (ReadFilter(), ReadFilter(include_history=True),
                     ReadFilter(include_history=True, include_proposed=True)):
            mine = [[{k: v for k, v in r.items() if k not in ("id", "source_message_ids")} for r in results]
                    for results in searches(source, "agent", queries, read=read)]
            theirs = [[{k: v for k, v in r.items() if k not in ("id", "source_message_ids")} for r in results]
                      for results in searches(copy, "agent", queries, read=read)]
            assert theirs == mine
        histories = [[v["content"] for v in Statements(s, "agent", "cli").history(
            int(s.messages_with_content("agent", "The user prefers green tea")[0]["id"][1:]))["versions"]]
            for s in (source, copy)]
        assert histories[0] == histories[1] == ["The user prefers tea in the morning",
                                                "The user prefers green tea"]
        assert [m["content"] for m in copy.proposed("agent", 10)] == ["The user might move to Berlin"]
        assert not copy.messages_with_content("agent", "The user owns a red bicycle")  # forgotten
        assert searches(copy, "agent", ["Where does the user live?"])[0][0]["content"] == \
            "The user lives in Lyon"
    finally:
        source.close()
        copy.close()


def test_import_is_idempotent_and_a_retried_original_add_stays_a_replay(tmp_path, capsys):
    source = open_service(tmp_path / "source.db")
    _agent_memory(source)
    source.close()
    out = str(tmp_path / "agent.ndjson")
    assert run(capsys, "export", "--db", str(tmp_path / "source.db"), "--user", "agent", "--out", out)[0] == 0
    lines = Path(out).read_text().count("\n")
    first = json.loads(run(capsys, "import", "--db", str(tmp_path / "copy.db"), "--in", out)[1])
    assert (first["imported"], first["replayed"]) == (lines, 0)
    again = json.loads(run(capsys, "import", "--db", str(tmp_path / "copy.db"), "--in", out)[1])
    assert (again["imported"], again["replayed"], again["messages"]) == (0, lines, 0)
    into_source = json.loads(run(capsys, "import", "--db", str(tmp_path / "source.db"), "--in", out)[1])
    assert (into_source["imported"], into_source["replayed"]) == (0, lines)  # even the forgotten
    copy = open_service(tmp_path / "copy.db")
    try:
        retry = copy.add(parse_add({"request_id": "plain", "user_id": "agent", "session_id": "chat",
                                    "messages": [{"role": "user", "content": "Where do I live now?"},
                                                 {"role": "assistant", "content": "You live in Lyon."}]},
                                   200))
        assert retry["replayed"] is True and retry["timestamps_assigned"] == 2
        events = copy.audit("agent", 0, 1000)["events"]
        assert [e["action"] for e in events] == ["import"] * lines
        assert {e["actor"] for e in events} == {"cli"}
        assert events[-1]["request_id"] == "plain"
    finally:
        copy.close()


GOOD = {"request_id": "r1", "user_id": "alice", "session_id": "s1",
        "messages": [{"role": "user", "content": "one", "timestamp": 1_700_000_000_000}]}


@pytest.mark.parametrize("bad,field", [
    ("{not json", "body"), ("[1]", "body"), (json.dumps({**GOOD, "request_id": ""}), "request_id"),
    (json.dumps({**GOOD, "messages": [{"role": "user", "content": "x", "trust": "maybe"}]}),
     "messages[0].trust"),
    (json.dumps({**GOOD, "messages": [{"role": "user", "content": "x", "colour": "red"}]}), "messages[0]"),
    (json.dumps({**GOOD, "original": {"payload_hash": "xyz", "timestamps_assigned": 0,
                                      "received_at": 1}}), "original.payload_hash"),
    (json.dumps({**GOOD, "messages": [{"role": "user", "content": "x",
                                       "superseded_by": {"request_id": "r", "index": -1}}]}),
     "messages[0].superseded_by"),
])
def test_a_bad_line_stops_the_import_naming_it_and_nothing_is_stored(tmp_path, capsys, bad, field):
    path = tmp_path / "in.ndjson"
    path.write_text(json.dumps(GOOD) + "\n\n" + bad + "\n")
    code, out, err = run(capsys, "import", "--db", str(tmp_path / "aml.db"), "--in", str(path))
    assert code == 1 and out == ""
    assert err.startswith("error: line 3: ") and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "aml.db").exists()  # every line is checked before any is stored
    with pytest.raises(exchange.AmlError) as caught:
        list(exchange.read_lines(path.read_bytes().splitlines()))
    assert caught.value.field == field
    path.write_text(json.dumps(GOOD) + "\n")
    assert run(capsys, "import", "--db", str(tmp_path / "aml.db"), "--in", str(path))[0] == 0  # control


def test_a_reused_request_id_stops_the_import_at_its_line(tmp_path, capsys):
    other = {**GOOD, "messages": [{"role": "user", "content": "another text", "timestamp": 1}]}
    second = {**GOOD, "request_id": "r2"}
    path = tmp_path / "in.ndjson"
    path.write_text("\n".join(json.dumps(x) for x in (GOOD, other, second)) + "\n")
    code, _, err = run(capsys, "import", "--db", str(tmp_path / "aml.db"), "--in", str(path))
    assert code == 1 and err.startswith("error: line 2: request_id was already used")
    service = open_service(tmp_path / "aml.db")
    try:
        assert [m["content"] for m in service.messages("alice", [1, 2, 3])] == ["one"]
    finally:
        service.close()


def test_the_http_export_is_ndjson_of_this_user_only(app, client, monkeypatch):
    client.add("alice", "r1", ["alice one", "alice two"], session="a")
    client.add("alice", "r2", ["alice three"], session="b")
    client.add("bob", "r1", ["bob one"])
    client.add("Alice", "r1", ["the other Alice"])  # a look-alike id is another user
    status, content_type, body = get(app.port, "/users/alice/export")
    assert status == 200 and content_type == "application/x-ndjson"
    lines = [json.loads(line) for line in body.decode().splitlines()]
    assert [(x["request_id"], x["session_id"], [m["content"] for m in x["messages"]]) for x in lines] \
        == [("r1", "a", ["alice one", "alice two"]), ("r2", "b", ["alice three"])]
    assert all(x["user_id"] == "alice" for x in lines)
    bob = get(app.port, "/users/bob/export")[2]
    assert b"alice" not in bob and b"bob one" in bob
    other = get(app.port, "/users/Alice/export")[2]
    assert b"alice one" not in other and b"the other Alice" in other
    files = sorted(Path(f"{app.config.db_path}.users").rglob("*.db"))
    status, _, body = get(app.port, "/users/nobody/export")
    assert status == 404 and json.loads(body)["error"]["code"] == "unknown_user"
    assert sorted(Path(f"{app.config.db_path}.users").rglob("*.db")) == files
    monkeypatch.setattr(exchange, "HTTP_EXPORT_MAX_BYTES", 500)  # bob: one line of ~330
    too_big = client.request("GET", "/users/alice/export")
    assert too_big.status == 413 and too_big.body["error"]["code"] == "payload_too_large"
    assert get(app.port, "/users/bob/export")[0] == 200  # control: a small one passes


def test_export_needs_db_or_markdown_and_markdown_needs_a_project(tmp_path, capsys):
    with pytest.raises(SystemExit) as usage:
        main(["export", "--user", "x"])
    assert usage.value.code == 2
    assert run(capsys, "export", "--markdown")[0] == 2
    code, _, err = run(capsys, "export", "--db", str(tmp_path / "none.db"), "--user", "x")
    assert code == 1 and "no store" in err


def test_a_failed_export_leaves_no_partial_file(tmp_path, capsys, monkeypatch):
    service = open_service(tmp_path / "aml.db")
    service.add(parse_add(GOOD, 200))
    service.close()

    def broken(line: dict) -> bytes:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(exchange, "ndjson", broken)
    out = tmp_path / "out.ndjson"
    code, _, err = run(capsys, "export", "--db", str(tmp_path / "aml.db"), "--user", "alice",
                       "--out", str(out))
    assert code == 1 and "No space left" in err
    assert list(tmp_path.glob("*.ndjson*")) == [] and list(tmp_path.glob(".out*")) == []


# ---- backup ------------------------------------------------------------------------------


def test_a_backup_taken_while_adds_arrive_is_consistent_and_complete(tmp_path, capsys):
    app = start_app(tmp_path)
    acknowledged: list[tuple[str, str]] = []
    stop = threading.Event()

    def adding(user: str) -> None:
        client = Client(app.port)
        n = 0
        while not stop.is_set():
            if client.add(user, f"r{n}", [f"{user} says {n} {i}" for i in range(5)]).status == 200:
                acknowledged.append((user, f"r{n}"))
            n += 1
        client.close()

    threads = [threading.Thread(target=adding, args=(f"user-{u}",)) for u in range(3)]
    for thread in threads:
        thread.start()
    try:
        while len(acknowledged) < 30:
            threading.Event().wait(0.02)
        before = list(acknowledged)
        code, out, _ = run(capsys, "backup", "--db", app.config.db_path, "--to", str(tmp_path / "copy"))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        app.stop()
    assert code == 0
    report = json.loads(out)
    assert report["user_files"] == 3 and report["bytes"] > 0
    copy = tmp_path / "copy" / "aml.db"
    for path in [copy, *Path(f"{copy}.users").rglob("*.db")]:
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()
    service = open_service(copy)
    try:
        for user, request_id in before:
            assert len(service.messages_of_request(user, request_id)) == 5, (user, request_id)
        for u in range(3):  # every Add in the copy is whole
            with service.store.connection(f"user-{u}", create=False) as conn:
                stored = conn.execute("SELECT sum(stored), count(*) FROM requests").fetchone()
                count = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
            assert stored[0] == count == 5 * stored[1]
        assert service.search(SearchRequest("says", "user-0", 5, (), None))["data"]
    finally:
        service.close()
    assert run(capsys, "backup", "--db", app.config.db_path, "--to", str(tmp_path / "copy"))[0] == 1


def test_an_export_that_would_write_nothing_says_so(tmp_path, capsys):
    """No --user (the default names an agent memory's user) or a misspelt one: exit 1, one line,
    no file; a user whose every message was forgotten: an empty export and a warning; the
    control, a user with messages, exports silently."""
    db = tmp_path / "aml.db"
    svc = MemoryService.open(str(db))
    for user in ("user-1", "gone"):
        svc.add(parse_add({"user_id": user, "request_id": "r1", "session_id": "s",
                           "messages": [{"role": "user", "content": "hello there"}]}, 200))
    svc.forget("gone", [1], "forget")
    svc.close()
    out = tmp_path / "x.ndjson"
    for argv in ([], ["--user", "user-l"]):
        assert main(["export", "--db", str(db), *argv, "--out", str(out)]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: {db} holds no user by the id") and err.count("\n") == 1
        assert not out.exists()
    assert "name one with --user" in main_err(db, [], capsys)
    assert main(["export", "--db", str(db), "--user", "gone", "--out", str(out)]) == 0
    assert capsys.readouterr().err == "warning: this user holds no messages: the export is empty\n"
    assert main(["export", "--db", str(db), "--user", "user-1", "--out", str(out)]) == 0
    assert capsys.readouterr().err == "" and out.read_text().count("\n") == 1
    assert main(["audit", "--db", str(db), "--user", "user-l"]) == 1  # the audit says so too
    assert capsys.readouterr().err.startswith(f"error: {db} holds no user by the id")
    assert main(["audit", "--db", str(db), "--user", "user-1"]) == 0
    assert '"events"' in capsys.readouterr().out


def main_err(db, argv, capsys) -> str:
    main(["export", "--db", str(db), *argv])
    return capsys.readouterr().err


def test_an_export_into_a_missing_folder_names_that_folder(tmp_path, capsys):
    db = tmp_path / "aml.db"
    svc = MemoryService.open(str(db))
    svc.add(parse_add({"user_id": "u", "request_id": "r1", "session_id": "s",
                       "messages": [{"role": "user", "content": "hello"}]}, 200))
    svc.close()
    assert main(["export", "--db", str(db), "--user", "u", "--out", str(tmp_path / "no" / "x.ndjson")]) == 1
    assert capsys.readouterr().err == f"error: no such directory for --out ({tmp_path / 'no'})\n"
    assert main(["export", "--db", str(db), "--user", "u", "--out", str(tmp_path / "x.ndjson")]) == 0
