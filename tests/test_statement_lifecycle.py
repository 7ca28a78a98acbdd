"""The lifecycle of statements and messages: supersession, tombstones, bi-temporal reads, trust and
review, and the append-only audit log, each with a populated control, over real SQLite files and
a real server."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from conftest import Client, ids
from old_schema import take_back
from reliability_support import open_user, store_bytes, user_file

from aml_retriever.agents.scopes import ScopedMemory
from aml_retriever.memory.lifecycle import Replaced, Tombstoned
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import AddRequest, Message, SearchRequest
from aml_retriever.storage.timeline import ReadFilter


def local_file(memory: ScopedMemory) -> sqlite3.Connection:
    service = memory._service("local", create=False)
    assert service is not None
    return sqlite3.connect(service.store.shard_path("memory"))


# ---- supersession ------------------------------------------------------------------------------

def test_update_links_the_versions_and_default_recall_sees_only_the_new_one(memory):
    memory.remember("The project targets Python 3.10.")
    memory.remember("The docs target Python readers.")  # control: another statement stays
    answer = memory.update("local:1", "The project targets Python 3.12.")
    assert answer["statement"]["id"] == "local:3"
    assert answer["replaced"] == {**answer["replaced"], "id": "local:1", "superseded_by": "local:3"}
    assert ids(memory.recall("python project target")["results"]) == ["local:3", "local:2"]
    everything = memory.recall("python project target", read=ReadFilter(include_history=True))
    assert set(ids(everything["results"])) == {"local:1", "local:2", "local:3"}
    replaced = next(r for r in everything["results"] if r["id"] == "local:1")
    assert replaced["superseded_by"] == "local:3"
    assert ids(memory.recent()["results"]) == ["local:3", "local:2"]
    with pytest.raises(Replaced, match="already replaced by local:3"):
        memory.update("local:1", "The project targets Python 3.11.")


def test_an_update_to_the_same_text_and_kind_changes_nothing(memory):
    memory.remember("The user writes in British English.")
    answer = memory.update("local:1", "the user writes in  British English.")
    assert answer["replayed"] is True and answer["statement"]["id"] == "local:1"
    changed = memory.update("local:1", "The user writes in British English.", kind="preference")
    assert changed["statement"]["kind"] == "preference" and changed["statement"]["id"] == "local:2"


def test_forgetting_the_newest_version_makes_the_one_before_current_again(memory):
    memory.remember("Caching uses Redis 6.")
    memory.update("local:1", "Caching uses Redis 7.")
    memory.update("local:2", "Caching uses Valkey 8.")
    memory.forget("local:2")  # the middle one: the first now points past it
    history = memory.history("local:1")
    assert ids(history["versions"]) == ["local:1", "local:3"]
    assert history["versions"][0]["superseded_by"] == "local:3"
    memory.forget("local:3")
    assert ids(memory.recall("caching")["results"]) == ["local:1"]
    assert "superseded_by" not in memory.history("local:1")["versions"][0]


def test_history_lists_versions_and_events_and_a_forgotten_id_keeps_only_events(memory):
    memory.remember("The team meets on Mondays.")
    memory.update("local:1", "The team meets on Tuesdays.")
    found = memory.history("local:2")
    assert ids(found["versions"]) == ["local:1", "local:2"]
    assert [(e["action"], e["message_ids"], e["actor"]) for e in found["events"]] == [
        ("remember", ["local:1"], "mcp"), ("update", ["local:1", "local:2"], "mcp")]
    memory.forget("local:2")
    after = memory.history("local:2")
    assert after["versions"] == [] and [e["action"] for e in after["events"]] == [
        "update", "forget"]


# ---- bi-temporal reads -------------------------------------------------------------------------

def test_as_of_reads_the_memory_as_it_was_recorded_at_that_time(memory):
    memory.remember("The release branch is release-1.")
    time.sleep(0.01)
    between = int(time.time() * 1000)
    time.sleep(0.01)
    memory.update("local:1", "The release branch is release-2.")
    now = memory.recall("release branch")["results"]
    assert ids(now) == ["local:2"]  # control: today it is the new one
    then = memory.recall("release branch", read=ReadFilter(as_of_ms=between))["results"]
    assert ids(then) == ["local:1"]
    before_anything = memory.recall("release branch", read=ReadFilter(as_of_ms=between - 10_000))
    assert before_anything["results"] == []


def test_since_and_until_filter_by_the_time_a_statement_says_it_became_true(memory):
    memory.remember("Since March 2021 the service runs on Kubernetes.")
    memory.remember("As of 2024-06, the service runs on Nomad.")
    memory.remember("The service runs health checks.")  # true from when it was remembered
    march_2021 = memory.recent()["results"][-1]
    assert march_2021["valid_from"] == "2021-03-01T00:00:00Z"
    between = ReadFilter(since_ms=1_577_836_800_000, until_ms=1_704_067_200_000)  # 2020 to 2024
    assert ids(memory.recall("service runs", read=between)["results"]) == ["local:1"]
    recent_only = ReadFilter(since_ms=1_717_200_000_000)  # from June 2024
    assert set(ids(memory.recall("service runs", read=recent_only)["results"])) == {
        "local:2", "local:3"}
    assert len(memory.recall("service runs")["results"]) == 3  # control: no range, all three


# ---- trust and review --------------------------------------------------------------------------

def test_an_inferred_statement_is_proposed_flagged_or_withheld_until_confirmed(tmp_path):
    flagging = ScopedMemory.at(tmp_path / "p", tmp_path / "a")
    withholding = ScopedMemory.at(tmp_path / "p", tmp_path / "a", proposed="WITHHOLD")
    try:
        told = flagging.remember("The user prefers short answers.")
        inferred = flagging.remember("The user seems to prefer dark themes.", origin="agent")
        assert (told["statement"]["trust"], inferred["statement"]["trust"]) == (
            "confirmed", "proposed")
        shown = flagging.recall("user prefer")["results"]
        assert {r["id"]: r["trust"] for r in shown} == {"local:1": "confirmed",
                                                      "local:2": "proposed"}
        assert ids(withholding.recall("user prefer")["results"]) == ["local:1"]
        assert ids(withholding.proposed()["results"]) == ["local:2"]
        withholding.confirm("local:2")
        assert set(ids(withholding.recall("user prefer")["results"])) == {"local:1", "local:2"}
        assert withholding.proposed()["results"] == []
    finally:
        flagging.close()
        withholding.close()


def test_rejecting_a_proposal_forgets_it_and_leaves_a_tombstone(memory):
    memory.remember("The user works nights.", origin="agent")
    memory.remember("The user works remotely.")
    with pytest.raises(Exception, match="confirmed, not proposed"):
        memory.reject("local:2")  # control: a person's statement is not up for review
    memory.reject("local:1")
    assert ids(memory.recall("user works")["results"]) == ["local:2"]
    with pytest.raises(Tombstoned, match="rejected on"):
        memory.remember("The user works nights.", origin="agent")
    conn = local_file(memory)
    assert conn.execute("SELECT reason FROM tombstones").fetchall() == [("reject",)]
    assert b"works nights" not in store_bytes(Path(str(memory.stores["local"])))


# ---- audit -------------------------------------------------------------------------------------

def test_every_change_is_audited_and_the_database_refuses_edits_to_the_log(memory):
    memory.remember("Deploys happen on Thursdays.")
    memory.update("local:1", "Deploys happen on Fridays.")
    memory.remember("The user may like tea.", origin="agent")
    memory.confirm("local:3")
    memory.forget("local:3")
    conn = local_file(memory)
    rows = conn.execute("SELECT action, actor, message_ids, content_hash FROM audit ORDER BY seq")
    events = rows.fetchall()
    assert [e[0] for e in events] == ["remember", "update", "remember", "confirm", "forget"]
    assert all(e[1] == "mcp" and len(e[3]) == 32 for e in events)
    assert events[0][3] != events[1][3] and events[2][3] == events[3][3] == events[4][3]
    for statement in ("UPDATE audit SET action = 'x'", "DELETE FROM audit"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(statement)
    assert conn.execute("SELECT count(*) FROM audit").fetchone()[0] == 5


def test_the_content_hash_is_keyed_so_it_confirms_nothing_without_the_file(memory):
    import hashlib

    memory.remember("The vault code is 4711.")
    (stored,) = local_file(memory).execute("SELECT content_hash FROM audit").fetchone()
    plain = hashlib.sha256(b"The vault code is 4711.").hexdigest()
    assert stored not in plain  # a dictionary of plain hashes finds nothing


def test_http_adds_and_deletions_are_audited_per_user_and_paged(client: Client, app):
    for i in range(5):
        assert client.add("alice", f"a{i}", [f"alice note {i}"]).status == 200
    assert client.add("bob", "b0", ["bob note"]).status == 200
    first = client.request("GET", "/users/alice/audit?limit=2")
    assert first.status == 200 and first.body["user_id"] == "alice"
    assert [e["request_id"] for e in first.body["events"]] == ["a0", "a1"]
    assert first.body["events"][0]["actor"] == "http"
    assert first.body["events"][0]["message_ids"] == ["m1"]
    rest = client.request("GET", f"/users/alice/audit?cursor={first.body['next_cursor']}")
    assert [e["request_id"] for e in rest.body["events"]] == ["a2", "a3", "a4"]
    assert rest.body["next_cursor"] is None
    newest = client.request("GET", "/users/alice/audit?limit=2&order=newest")
    assert [e["request_id"] for e in newest.body["events"]] == ["a4", "a3"]
    older = client.request("GET", f"/users/alice/audit?order=newest&cursor={newest.body['next_cursor']}")
    assert [e["request_id"] for e in older.body["events"]] == ["a2", "a1", "a0"]
    assert older.body["next_cursor"] is None
    assert client.request("GET", "/users/alice/audit?order=oldest").body == client.request(
        "GET", "/users/alice/audit").body  # the default: the order it was written in
    bob = client.request("GET", "/users/bob/audit").body["events"]
    assert [e["request_id"] for e in bob] == ["b0"]  # only bob's own, beside alice's five
    assert client.request("GET", "/users/nobody/audit").body["error"]["code"] == "unknown_user"
    for query in ("limit=0", "limit=1001", "cursor=-1", "cursor=x", "limit=1&limit=2",
                  "order=latest", "order=newest&order=oldest"):
        refused = client.request("GET", f"/users/alice/audit?{query}")
        assert refused.status == 400 and refused.body["error"]["field"] in query, query
    assert client.request("DELETE", "/users/alice").status == 200
    assert client.request("GET", "/users/alice/audit").status == 404  # nothing of her is left
    catalog = sqlite3.connect(app.store.path)
    deletions = catalog.execute("SELECT * FROM deletions").fetchall()
    assert len(deletions) == 1 and deletions[0][2] == "http"
    assert b"alice" not in b"".join(str(v).encode() for v in deletions[0])
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        catalog.execute("DELETE FROM deletions")


def test_deleting_a_user_replaces_the_key_of_its_hashes(tmp_path):
    service = MemoryService.open(str(tmp_path / "aml.db"))
    try:
        service.add(AddRequest("r1", "u", "s", (Message("user", "hello there", 1),)))
        conn = open_user(service.store.path, "u")
        key = conn.execute("SELECT value FROM meta WHERE key = 'secret'").fetchone()
        conn.close()
        service.delete_user("u", actor="cli")  # its file unlinked: no process holds it
        service.add(AddRequest("r2", "u", "s", (Message("user", "back again", 2),)))
        conn = open_user(service.store.path, "u")
        assert conn.execute("SELECT value FROM meta WHERE key = 'secret'").fetchone() != key
        assert conn.execute("SELECT count(*) FROM audit").fetchone() == (1,)  # the new Add's
        with pytest.raises(sqlite3.IntegrityError):  # the guard is there after the deletion
            conn.execute("DELETE FROM audit")
        conn.close()
    finally:
        service.close()


# ---- the HTTP Search extensions ------------------------------------------------------------------

def test_search_without_the_extensions_answers_as_before_and_with_them_filters(client: Client):
    day = 86_400_000
    assert client.add("u", "r1", ["the garden has tulips"], start_ms=1_700_000_000_000).status == 200
    assert client.add("u", "r2", ["the garden has roses"], start_ms=1_700_000_000_000 + 30 * day,
                      session="s2").status == 200
    plain = client.search("u", "garden")
    assert plain.status == 200 and len(plain.body["data"]) == 2
    assert set(plain.body["data"][0]) == {"id", "content", "score", "created_at", "role",
                                          "session_id", "view", "source_message_ids",
                                          "evidence_flags"}
    same = client.search("u", "garden", include_history=False)
    assert same.raw == plain.raw  # the extensions at their defaults change no byte
    since = client.search("u", "garden", since="2023-12-01T00:00:00Z")
    assert [d["content"] for d in since.body["data"]] == ["the garden has roses"]
    until = client.search("u", "garden", until=1_700_000_000_000 + day)
    assert [d["content"] for d in until.body["data"]] == ["the garden has tulips"]
    before = client.search("u", "garden", as_of="2001-01-01")
    assert before.body["data"] == []  # nothing had been recorded by then
    for body, field in (({"since": "soon"}, "since"), ({"as_of": True}, "as_of"),
                        ({"include_history": "yes"}, "include_history"),
                        ({"since": "2024-01-02", "until": "2024-01-01"}, "since")):
        refused = client.search("u", "garden", **body)
        assert refused.status == 400 and refused.body["error"]["field"] == field


def test_a_user_file_of_schema_4_upgrades_with_record_times_and_an_empty_log(tmp_path):
    from aml_retriever.storage.migrations import SHARD_MIGRATIONS

    db = tmp_path / "aml.db"
    service = MemoryService.open(str(db))
    service.add(AddRequest("r1", "u", "s", (Message("user", "an older note", 5_000),)))
    service.close()
    take_back(user_file(db, "u"), 4)  # the file as schema 4 wrote it
    conn = open_user(db, "u")
    (created,) = conn.execute("SELECT created_ms FROM requests").fetchone()
    conn.close()
    service = MemoryService.open(str(db))
    try:
        found = service.search(SearchRequest("older note", "u", 5, (), None))["data"]
        assert [d["content"] for d in found] == ["an older note"]
        conn = open_user(db, "u")
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(SHARD_MIGRATIONS)
        assert conn.execute("SELECT recorded_ms, origin, trust FROM messages").fetchone() == (
            created, "user", "confirmed")
        assert conn.execute("SELECT count(*) FROM audit").fetchone() == (0,)
        as_of = service.search(SearchRequest("older note", "u", 5, (), None,
                                             read=ReadFilter(as_of_ms=created - 1)))["data"]
        assert as_of == []  # recorded at its request's time, not before
    finally:
        service.close()


# ---- the command line --------------------------------------------------------------------------

def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    from aml_retriever.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_person_reviews_proposals_from_the_command_line(tmp_path, capsys):
    import json

    (tmp_path / "p").mkdir()
    memory = ScopedMemory.at(tmp_path / "p", tmp_path / "a")
    memory.remember("The user likes tea.", origin="agent")
    memory.remember("The user likes coffee.", origin="agent")
    memory.remember("The user drinks water.")  # control: a person's statement is never listed
    memory.close()
    db = str(tmp_path / "p" / ".aml" / "memory.db")
    code, out, _ = run_cli(capsys, "review", "--db", db)
    proposed = json.loads(out)["proposed"]  # shown as agents see them: one id style everywhere
    assert [(s["id"], s["kind"]) for s in proposed] == [("local:1", "note"), ("local:2", "note")]
    code, out, _ = run_cli(capsys, "review", "--db", db, "--confirm", "local:1", "--reject", "m2")
    assert code == 0 and json.loads(out)["rejected"][0]["content"] == "The user likes coffee."
    code, out, _ = run_cli(capsys, "review", "--db", db)
    assert json.loads(out)["proposed"] == []
    code, out, _ = run_cli(capsys, "audit", "--db", db)  # newest first, as the inspector lists
    events = json.loads(out)["events"]
    assert [(e["action"], e["actor"]) for e in events][:2] == [("reject", "cli"), ("confirm", "cli")]
    assert [e["message_ids"] for e in events][:2] == [["local:2"], ["local:1"]]  # agents' ids
    code, out, _ = run_cli(capsys, "audit", "--db", db, "--order", "oldest")
    oldest = json.loads(out)["events"]
    assert oldest == events[::-1] and oldest[0]["action"] == "remember"
    code, out, _ = run_cli(capsys, "history", "--db", db, "2")
    assert [e["action"] for e in json.loads(out)["events"]] == ["remember", "reject"]
    code, _, err = run_cli(capsys, "review", "--db", str(tmp_path / "missing.db"))
    assert code == 1 and err.startswith("error: --db") and not (tmp_path / "missing.db").exists()
    code, _, err = run_cli(capsys, "history", "--db", db, "x1")
    assert code == 1 and "not a statement id" in err
    code, _, err = run_cli(capsys, "history", "--db", db, "local:999")
    assert code == 1 and "there is no statement local:999" in err
    code, _, err = run_cli(capsys, "review", "--db", db, "--reject", "local:1")
    assert code == 1 and "local:1 is confirmed" in err
    code, _, err = run_cli(capsys, "history", "--db", db, "global:1")
    assert code == 1 and "names the global memory, but this is the local memory" in err


def test_export_renders_one_scope_newest_first_with_the_handoff_first(tmp_path, capsys):
    (tmp_path / "p").mkdir()
    memory = ScopedMemory.at(tmp_path / "p", tmp_path / "a")
    memory.remember("First decision:\nuse SQLite.")
    memory.handoff("Next: write the migration.")
    memory.remember("Second decision: keep the stdlib only.")
    memory.remember("The user is called Ana.", scope="global")
    memory.close()
    out = tmp_path / "MEMORY.md"
    code, _, _ = run_cli(capsys, "export", "--markdown", "--project-root", str(tmp_path / "p"),
                         "--global-root", str(tmp_path / "a"), "--out", str(out))
    lines = out.read_text().splitlines()
    items = [line for line in lines if line.startswith("- ")]
    assert code == 0 and len(items) == 3
    assert "Next: write the migration." in items[0] and "Second decision" in items[1]
    assert items[2].endswith("First decision: use SQLite.")  # one line per statement
    assert all("Ana" not in line for line in lines)  # only the scope asked for, and it says so:
    assert lines[0] == "# Memory (local: this project's)" and "`--scope global`" in lines[2]
    code, printed, _ = run_cli(capsys, "export", "--markdown", "--project-root", str(tmp_path / "p"),
                               "--global-root", str(tmp_path / "a"), "--scope", "global")
    assert "The user is called Ana." in printed
    memory = ScopedMemory.at(tmp_path / "p", tmp_path / "a")
    assert len(memory.recent(100, "local")["results"]) == 3  # the file was not read back
    memory.close()


def test_mcp_takes_the_layered_settings_of_serve(tmp_path, capsys):
    import json
    import os
    import subprocess
    import sys

    config = tmp_path / "c.json"
    config.write_text(json.dumps({"proposed_statements": "withhold", "log_level": "WARNING"}))
    code, out, _ = run_cli(capsys, "print-config", "--config", str(config))
    assert code == 0
    assert json.loads(out)["proposed_statements"] == {"value": "WITHHOLD", "from": "file"}
    (tmp_path / "p").mkdir()
    lines = [{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                 "name": "remember", "arguments": {"content": "The user may like jazz.",
                                                   "origin": "agent"}}},
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                 "name": "recall", "arguments": {"query": "jazz"}}}]
    done = subprocess.run(
        [sys.executable, "-m", "aml_retriever", "mcp", "--project-root", str(tmp_path / "p"),
         "--global-root", str(tmp_path / "a"), "--config", str(config)],
        input="".join(json.dumps(line) + "\n" for line in lines).encode(), capture_output=True,
        timeout=60, cwd=Path(__file__).resolve().parent.parent, env={**os.environ})
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert answers[1]["result"]["structuredContent"]["results"] == []  # withheld by the file
    assert b"INFO" not in done.stderr  # the file's log level applies
    flagged = subprocess.run(
        [sys.executable, "-m", "aml_retriever", "mcp", "--project-root", str(tmp_path / "p"),
         "--global-root", str(tmp_path / "a")],
        input=(json.dumps(lines[1]) + "\n").encode(), capture_output=True, timeout=60,
        cwd=Path(__file__).resolve().parent.parent)
    found = json.loads(flagged.stdout.splitlines()[0])["result"]["structuredContent"]["results"]
    assert [r["trust"] for r in found] == ["proposed"]  # control: the default shows it, flagged


def test_what_a_read_withholds_follows_changes_made_through_another_connection(tmp_path):
    stores = {"local": tmp_path / "p" / "memory.db", "global": tmp_path / "g" / "memory.db"}
    reader, writer = ScopedMemory(stores), ScopedMemory(stores)
    try:
        writer.remember("The build runs on Jenkins.")
        writer.remember("The build uses Gradle.")
        writer.update("local:2", "The build uses Bazel.")
        assert ids(reader.recall("build")["results"]) == ["local:3", "local:1"]  # made and kept
        assert ids(reader.recall("build")["results"]) == ["local:3", "local:1"]
        writer.update("local:1", "The build runs on Buildkite.")
        assert set(ids(reader.recall("build")["results"])) == {"local:3", "local:4"}
        writer.forget("local:4")  # the replaced version is current again
        assert set(ids(reader.recall("build")["results"])) == {"local:1", "local:3"}
    finally:
        reader.close()
        writer.close()


def test_remembering_a_replaced_version_again_says_so(memory):
    memory.remember("The project targets Python 3.10.")
    memory.update("local:1", "The project targets Python 3.12.")
    again = memory.remember("The project targets Python 3.10.")
    assert again["statement"]["id"] == "local:3" and not again["replayed"]
    assert "the same text as local:1, which local:2 replaced" in again["note"]
    fresh = memory.remember("The docs target Python readers.")  # control: a new text, no note
    assert "note" not in fresh
