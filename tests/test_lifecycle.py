"""Deleting a user removes every trace in one transaction; purge empties the store; the CLI
reports through exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Client
from reliability_support import open_user, store_bytes, user_file

from aml_retriever.cli import main
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import AddRequest, Message
from aml_retriever.storage import checkpoints

MARKER = "zqxmarker7781"
CJK_MARKER = "独特标记"


def fill(client: Client, user: str, marker: str, cjk: str = CJK_MARKER) -> None:
    for i in range(30):
        assert client.add(user, f"req-{marker}-{i}", [f"{marker} message {i} {cjk}" * 3,
                                                      f"filler about gardening {i}"],
                          session=f"session-{marker}").status == 200


@pytest.mark.parametrize("how", ["DELETE", "POST"])
def test_delete_user_removes_every_trace_of_that_user_only(app, client, how):
    fill(client, "victim", MARKER)
    fill(client, "bystander", "keepmarker42", "留下的")
    assert MARKER.encode() in store_bytes(app.store.path)  # control: the markers are on disk
    assert CJK_MARKER.encode() in store_bytes(app.store.path)
    response = (client.request("DELETE", "/users/victim") if how == "DELETE"
                else client.post("/delete_user", {"user_id": "victim"}))
    assert response.status == 200
    deleted = response.body["deleted"]
    assert response.body["success"] is True and response.body["user_id"] == "victim"
    assert (deleted["messages"], deleted["requests"], deleted["sessions"]) == (60, 30, 1)
    assert deleted["views"] >= 3  # segments of at most 24 messages
    assert client.contents("victim", MARKER) == []
    assert client.contents("victim", CJK_MARKER) == []
    assert not user_file(app.store.path, "victim").exists()  # no process held it: unlinked
    on_disk = store_bytes(app.store.path)
    assert MARKER.encode() not in on_disk
    assert CJK_MARKER.encode() not in on_disk
    assert b"keepmarker42" in on_disk  # the other user is untouched
    found = "\n".join(client.contents("bystander", "keepmarker42", top_k=100))
    assert all(f"keepmarker42 message {i} " in found for i in range(30))


def test_retried_add_after_deletion_stores_again(client):
    assert client.add("alice", "r1", ["orchid note"]).status == 200
    client.request("DELETE", "/users/alice")
    again = client.add("alice", "r1", ["orchid note"])
    assert again.status == 200 and again.body["replayed"] is False
    assert client.contents("alice", "orchid") == ["orchid note"]


def test_deleting_an_unknown_user_answers_zero_counts_and_says_it_found_none(client):
    client.add("alice", "r1", ["orchid note"])
    response = client.request("DELETE", "/users/nobody")
    assert response.status == 200 and response.body["found"] is False
    assert response.body["deleted"] == {"messages": 0, "requests": 0, "sessions": 0, "views": 0}
    found = client.request("DELETE", "/users/alice").body  # the control
    assert found["found"] is True and found["deleted"]["messages"] == 1
    assert client.request("DELETE", "/users/alice").body["found"] is False  # sent again


def test_percent_encoded_user_id_in_the_path(client):
    client.add("team/a b", "r1", ["slash user quokka"])
    client.add("team", "r1", ["plain user quokka"])
    assert client.request("DELETE", "/users/team%2Fa%20b").body["deleted"]["messages"] == 1
    assert client.contents("team/a b", "quokka") == []
    assert client.contents("team", "quokka") == ["plain user quokka"]


def test_stats_counts_without_content(client):
    client.add("alice", "r1", [f"{MARKER} one", "two"])
    client.add("bob", "r1", ["three"], session="s9")
    response = client.request("GET", "/stats")
    assert response.status == 200
    assert {k: response.body[k] for k in ("users", "messages", "sessions", "requests")} == \
        {"users": 2, "messages": 3, "sessions": 2, "requests": 2}
    assert MARKER not in response.raw.decode() and "alice" not in response.raw.decode()


def test_cli_delete_user_works_beside_a_running_server(app, client, capsys):
    fill(client, "victim", MARKER)
    assert main(["delete-user", "--db", str(app.store.path), "--user", "victim"]) == 0
    assert json.loads(capsys.readouterr().out)["deleted"]["messages"] == 60
    assert client.contents("victim", MARKER) == []
    assert client.add("victim", "new", ["fresh start"]).status == 200  # the server still writes


def test_cli_purge_needs_yes_and_refuses_while_a_server_runs(app, client, capsys):
    client.add("alice", "r1", ["purge target"])
    assert main(["purge", "--db", str(app.store.path)]) == 2
    assert main(["purge", "--db", str(app.store.path), "--yes"]) == 1
    err = capsys.readouterr().err
    assert "in use by a running server" in err and "DELETE /users/{user_id}" in err
    assert client.contents("alice", "purge") == ["purge target"]


def test_cli_reindex_beside_a_running_server_is_refused_without_advice_to_delete(app, client, capsys):
    client.add("alice", "r1", ["reindex target"])
    assert main(["reindex", "--db", str(app.store.path), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "in use by a running server; stop it first" in err
    assert "DELETE" not in err and "delete" not in err  # (the advice copied from purge said so)
    assert client.contents("alice", "reindex") == ["reindex target"]


def test_cli_purge_empties_the_store(tmp_path, capsys):
    db = tmp_path / "aml.db"
    from aml_retriever.memory.service import MemoryService
    from aml_retriever.memory.validation import AddRequest, Message
    from aml_retriever.storage.store import Store

    store = Store(db)
    MemoryService(store).add(AddRequest("r1", "alice", "s1", (Message("user", MARKER, 1),)))
    store.close()
    assert main(["stats", "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)["messages"] == 1
    assert main(["purge", "--db", str(db), "--yes"]) == 0
    assert json.loads(capsys.readouterr().out) == {"success": True, "user_files_removed": 1}
    assert MARKER.encode() not in store_bytes(db)
    assert main(["stats", "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out)["messages"] == 0


def test_cli_check_passes_here(capsys):
    assert main(["check"]) == 0
    assert "FTS5" in capsys.readouterr().out


def test_cli_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["delete-user"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["no-such-command"])
    assert exc.value.code == 2


def test_cli_help_everywhere(capsys):
    for argv in (["--help"], ["serve", "--help"], ["delete-user", "--help"], ["purge", "--help"],
                 ["stats", "--help"], ["check", "--help"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 0
        assert "usage:" in capsys.readouterr().out


def test_cli_refuses_a_file_that_is_not_a_store(tmp_path, capsys):
    bogus = tmp_path / "notes.db"
    bogus.write_bytes(b"this is not sqlite at all" * 100)
    assert main(["stats", "--db", str(bogus)]) == 1
    assert "not a usable aml_retriever store" in capsys.readouterr().err


def test_delete_user_waits_for_a_reader_so_the_text_leaves_the_disk(tmp_path):
    """A reader holding an old snapshot keeps the log from being checkpointed: the delete waits
    for it (briefly) instead of answering while the text is still in the file."""
    svc = MemoryService.open(str(tmp_path / "aml.db"))
    svc.add(AddRequest("r1", "victim", "s", (Message("user", f"{MARKER} secret", None),)))
    assert svc.store.checkpoint_dirty() == 0  # the text is in the file itself now
    reading, done = threading.Event(), threading.Event()

    def hold_a_snapshot() -> None:
        reader = open_user(svc.store.path, "victim")
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM messages").fetchone()
        reading.set()
        time.sleep(0.3)
        reader.execute("COMMIT")
        reader.close()
        done.set()

    threading.Thread(target=hold_a_snapshot).start()
    reading.wait(5)
    assert MARKER.encode() in store_bytes(svc.store.path)  # control: on disk while read
    assert svc.delete_user("victim")["deleted"]["messages"] == 1
    assert done.is_set()  # the delete answered only once the reader had finished
    assert MARKER.encode() not in store_bytes(svc.store.path)
    svc.close()


def busy_first(app: Any, times: int | None) -> list[bool]:
    """The store's checkpoints answer busy, as SQLite does at once while another checkpoint of
    the file holds its lock (the planned pass, another process's), the first `times` tries (None:
    every try); then they checkpoint. Returns what each try found on disk: whether the text of
    the victim's first message was still there."""
    store = app.store._checkpoints
    real = store._truncate
    seen: list[bool] = []

    def truncate(conn: Any) -> bool:
        if threading.current_thread() is app.checkpointer:
            return real(conn)  # the planned pass (held off by its interval in these tests)
        seen.append(b"message 0 " in store_bytes(app.store.path))
        if times is None or len(seen) <= times:
            return False
        return real(conn)

    store._truncate = truncate
    return seen


@pytest.mark.parametrize("how", ["DELETE /users", "DELETE /messages"])
def test_a_deletion_answers_200_only_once_its_text_is_in_no_file(make_app, how):
    """The deletion's truncating checkpoint meets another checkpoint holding the lock: it tries
    again until it is done, rather than answering with its text still in the file and its log."""
    app = make_app(checkpoint_interval=3600)  # no planned pass clears the log meanwhile
    client = Client(app.port)
    fill(client, "victim", MARKER)
    tries = busy_first(app, times=3)
    response = (client.request("DELETE", "/users/victim") if how == "DELETE /users"
                else client.request("DELETE", "/users/victim/messages/m1"))
    assert response.status == 200
    assert tries == [True, True, True, True]  # busy three times with the text on disk, then done
    assert b"message 0 " not in store_bytes(app.store.path)


def test_a_deletion_that_cannot_clear_its_log_in_time_is_503_never_200(make_app, monkeypatch):
    app = make_app(checkpoint_interval=3600)
    client = Client(app.port)
    fill(client, "victim", MARKER)
    monkeypatch.setattr(checkpoints, "ERASE_WITHIN_S", 0.3)
    real = app.store._checkpoints._truncate
    busy_first(app, times=None)
    response = client.request("DELETE", "/users/victim")
    assert response.status == 503 and response.body["error"]["code"] == "erasure_pending"
    assert response.headers["retry-after"] == "1"
    app.store._checkpoints._truncate = real
    again = client.request("DELETE", "/users/victim")  # sent again: answered once it is gone
    assert again.status == 200 and MARKER.encode() not in store_bytes(app.store.path)


def test_deletions_racing_the_planned_checkpoint_answer_only_once_their_text_is_gone(make_app):
    """Three clients each Add a marked message, DELETE their user and look for the marker in
    every file of the store, while the planned pass checkpoints every 50 ms (before: 3-5 of
    60-180 deletions answered 200 with the text still in the user's file and its log)."""
    app = make_app(checkpoint_interval=0.05)
    found: list[str] = []

    def loop(n: int) -> None:
        c = Client(app.port)
        for i in range(40):
            marker = f"racemark{n}x{i}q"
            assert c.add(f"racer{n}", f"r{i}", [f"{marker} {'filler ' * 40}"] * 4).status == 200
            assert c.request("DELETE", f"/users/racer{n}").status == 200
            if marker.encode() in store_bytes(app.store.path):
                found.append(marker)

    racers = [threading.Thread(target=loop, args=(n,)) for n in range(3)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(120)
    assert found == []


def every_name_and_byte(db: Path) -> bytes:
    """Every file of the store, its name and its bytes."""
    found = []
    for path in [db, *sorted(Path(f"{db}.users").rglob("*"))]:
        found.append(str(path).encode())
        if path.is_file():
            found.append(path.read_bytes())
    return b"\n".join(found)


def test_a_deleted_user_leaves_nothing_on_disk_that_says_it_existed(app, client):
    """Not its id, not the hash its file was named by, not its text; and its ids restart (the
    README's quick start run twice finds m1 again)."""
    user = "alice@example.com"
    fill(client, user, MARKER)
    fill(client, "bystander", "keepmarker42", "留下的")
    name = user_file(app.store.path, user).stem.encode()
    before = every_name_and_byte(app.store.path)
    assert user.encode() in before and name in before and MARKER.encode() in before  # control
    assert client.request("DELETE", f"/users/{user}").status == 200
    after = every_name_and_byte(app.store.path)
    for trace in (user.encode(), name, MARKER.encode(), CJK_MARKER.encode()):
        assert trace not in after
    assert b"keepmarker42" in after  # the other user is untouched
    again = client.add(user, "r-again", ["a new first note"])
    assert again.status == 200
    assert client.search(user, "first note").body["data"][0]["id"] == "m1"


HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1])
conn.execute("SELECT count(*) FROM messages").fetchone()  # the file open, its WAL index held
print("open", flush=True)
sys.stdin.readline()
"""


def test_a_file_another_process_holds_is_emptied_then_unlinked_once_it_is_not(app, client):
    """While another process has the user's file open it is not unlinked (a connection still
    open would, when closed, remove the WAL of a file made again at that name): it is emptied,
    its counters and its creation time gone; the next deletion, once nothing holds it, unlinks
    it."""
    fill(client, "victim", MARKER)
    path = user_file(app.store.path, "victim")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        reader = open_user(app.store.path, "victim")
        created = reader.execute("SELECT value FROM meta WHERE key = 'created_ms'").fetchone()[0]
        reader.close()
        assert client.request("DELETE", "/users/victim").status == 200
        assert path.exists()  # held: emptied, not unlinked
        conn = open_user(app.store.path, "victim")
        assert conn.execute("SELECT count(*) FROM sqlite_sequence").fetchone()[0] == 0
        assert conn.execute("SELECT value FROM meta WHERE key = 'created_ms'").fetchone()[0] != created
        assert MARKER.encode() not in store_bytes(app.store.path)
        conn.close()
    finally:
        holder.communicate("\n", timeout=10)
    assert client.request("DELETE", "/users/victim").status == 200
    assert not path.exists()
