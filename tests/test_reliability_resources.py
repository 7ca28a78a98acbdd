"""Broken disks and exhausted resources: a damaged user file is set aside and its user refused
(503 user_store_damaged) without touching anyone else or /stats; a full disk or a file-size limit
is 507 storage_full; no file descriptors left is 429 overloaded at once; deletion works through
all of them; never a 500."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Client, start_app
from reliability_support import serve, user_file

ROOT = Path(__file__).resolve().parent.parent


def fill(client: Client, user: str, count: int = 20) -> None:
    for i in range(count):
        assert client.add(user, f"{user}-{i}", [f"{user} note {i} about orchids and tulips"]
                          ).status == 200


def damage(path: Path, how: str) -> None:
    if how == "truncated":
        with path.open("r+b") as f:
            f.truncate(path.stat().st_size // 2)
    else:  # a foreign file where the user's file was
        path.write_bytes(os.urandom(64 * 1024))
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


@pytest.mark.parametrize("how", ["truncated", "foreign"])
def test_a_damaged_user_file_is_set_aside_and_its_user_can_still_be_deleted(tmp_path, how):
    app = start_app(tmp_path)
    client = Client(app.port)
    fill(client, "alice", 200)
    fill(client, "bob")
    app.stop()
    damage(user_file(app.store.path, "alice"), how)
    app = start_app(tmp_path)
    client = Client(app.port)
    try:
        for response in (client.search("alice", "orchids"), client.search("alice", "orchids"),
                         client.add("alice", "later", ["a new note"])):
            assert response.status == 503, response.body
            assert response.body["error"]["code"] == "user_store_damaged"
            assert str(tmp_path) not in response.raw.decode()  # no path in the answer
            assert response.headers["retry-after"] == "60"
        assert client.search("bob", "orchids").status == 200  # control: another user is served
        assert len(client.contents("bob", "orchids")) == 10
        stats = client.request("GET", "/stats")
        assert stats.status == 200 and stats.body["quarantined_user_files"] == 1
        assert stats.body["messages"] == 20  # bob's, counted as ever
        quarantined = list(app.store.quarantine_dir.glob("*.db"))
        assert len(quarantined) == 1 and not user_file(app.store.path, "alice").exists()
        deleted = client.request("DELETE", "/users/alice")
        assert deleted.status == 200 and deleted.body["files_removed"] >= 1
        assert list(app.store.quarantine_dir.glob("*")) == []
        assert client.add("alice", "again", ["a fresh start with orchids"]).status == 200
        assert client.contents("alice", "orchids") == ["a fresh start with orchids"]
    finally:
        client.close()
        app.stop()


def test_stats_and_check_report_a_damaged_file_instead_of_failing(tmp_path, capsys):
    from aml_retriever.cli import main

    app = start_app(tmp_path)
    client = Client(app.port)
    fill(client, "alice")
    fill(client, "bob")
    app.stop()
    assert main(["check", "--db", str(app.store.path)]) == 0  # control: all is well
    capsys.readouterr()
    damage(user_file(app.store.path, "alice"), "foreign")
    assert main(["stats", "--db", str(app.store.path)]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["damaged_user_files"] == 1 and stats["messages"] == 20
    assert main(["check", "--db", str(app.store.path)]) == 1
    report = capsys.readouterr().out
    assert "FAIL 2 user files, 1 damaged: " + user_file(app.store.path, "alice").name in report
    assert "ok   catalog" in report


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB filesystem, mounted for the test (needs root; skipped otherwise)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a 2 MiB tmpfs here ({done.stderr.strip()}); needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_is_507_for_writes_and_deletion_still_works(tiny_disk):
    app = start_app(tiny_disk)
    client = Client(app.port)
    statuses: list[int] = []
    try:
        fill(client, "bob", 5)
        for i in range(400):
            response = client.add(f"user{i % 7}", f"r{i}", [f"filler {i} " + "x" * 4000] * 20)
            statuses.append(response.status)
            if response.status == 507:
                assert response.body["error"]["code"] == "storage_full"
                assert "retry-after" in response.headers
                break
        assert statuses[-1] == 507 and 500 not in statuses
        assert client.search("bob", "orchids").status == 200  # reads go on
        assert client.request("GET", "/stats").status == 200
        for user in [f"user{i}" for i in range(7)]:
            assert client.request("DELETE", f"/users/{user}").status == 200
        for user in [f"user{i}" for i in range(7)]:
            found = client.search(user, "filler")  # every one of them gone (or, on a disk with
            assert (found.status, found.body.get("data")) in ((200, []), (507, None))  # no room
            # to reopen an emptied file's shared-memory index, a documented 507)
        assert len(client.contents("bob", "orchids")) > 0  # control: bob untouched
    finally:
        client.close()
        app.stop()


def test_a_file_size_limit_is_507_and_the_server_lives_on(tmp_path):
    process, port = serve(tmp_path / "aml.db", {resource.RLIMIT_FSIZE: 1024 * 1024})
    client = Client(port)
    statuses = []
    try:
        for i in range(200):
            response = client.add("big", f"r{i}", [f"filler {i} " + "y" * 4000] * 20)
            statuses.append(response.status)
            if response.status != 200:
                break
        assert statuses[-1] == 507 and 500 not in statuses
        assert client.request("GET", "/health").status == 200  # not killed by SIGXFSZ
        assert client.request("DELETE", "/users/big").status == 200
        assert client.add("small", "s1", ["fits again"]).status == 200
    finally:
        client.close()
        process.terminate()
        process.wait(timeout=30)


NO_DESCRIPTORS_SCRIPT = """
import json, os, resource, sys, time
from aml_retriever.common.errors import AmlError
from aml_retriever.memory.service import MemoryService
from aml_retriever.storage.store import Store
from aml_retriever.memory.validation import AddRequest, Message
service = MemoryService(Store(sys.argv[1], idle_connections=2))
in_use = len(os.listdir("/proc/self/fd"))
resource.setrlimit(resource.RLIMIT_NOFILE, (in_use + 8, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
held = [open(os.devnull) for _ in range(4)]  # what a busy server's sockets would hold
outcomes = []
for i in range(12):
    started = time.monotonic()
    try:
        service.add(AddRequest("r1", f"user{i}", "s", (Message("user", f"note {i}", 1),)))
        outcomes.append(["ok", time.monotonic() - started])
    except AmlError as exc:
        outcomes.append([f"{exc.status} {exc.code}", time.monotonic() - started])
for f in held:
    f.close()
service.add(AddRequest("r1", "after", "s", (Message("user", "room again", 1),)))
print(json.dumps(outcomes))
"""


def test_no_file_descriptors_left_is_429_at_once_never_a_hang_or_500(tmp_path):
    # In a process of its own: the limit is lowered to a few descriptors above what it holds.
    done = subprocess.run([sys.executable, "-c", NO_DESCRIPTORS_SCRIPT, str(tmp_path / "aml.db")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    outcomes = json.loads(done.stdout)
    kinds = {kind for kind, _ in outcomes}
    assert kinds == {"ok", "429 overloaded"}, outcomes  # the limit was reached, and answered
    assert max(seconds for _, seconds in outcomes) < 2.0  # at once, not after a lock wait


def test_a_server_starts_on_a_full_disk_and_serves_reads(tiny_disk):
    app = start_app(tiny_disk)
    client = Client(app.port)
    fill(client, "bob", 5)
    for i in range(400):  # fill the disk
        if client.add("filler", f"r{i}", ["z" * 4000] * 20).status != 200:
            break
    client.close()
    app.stop()
    app = start_app(tiny_disk)  # before: "not a usable store (cannot rollback ...)"
    client = Client(app.port)
    try:
        found = "\n".join(client.contents("bob", "orchids", top_k=20))
        assert all(f"bob note {i} " in found for i in range(5))  # reads are served
        assert client.add("bob", "late", ["z" * 4000] * 20).status == 507
    finally:
        client.close()
        app.stop()


def test_a_user_left_at_an_earlier_schema_is_read_on_a_full_disk_and_upgraded_later(tiny_disk):
    """Upgrading the program on a full disk: a user file still at an earlier schema cannot be
    upgraded (that writes), and was 507 for reads too. Now it is read from an upgraded copy in
    memory; writes are 507; once space is back, its file is upgraded on the next open."""
    from old_schema import take_back

    from aml_retriever.storage.migrations import SHARD_MIGRATIONS

    app = start_app(tiny_disk)
    client = Client(app.port)
    fill(client, "bob", 5)
    fill(client, "ann", 5)
    client.close()
    app.stop()
    for user in ("bob", "ann"):
        take_back(user_file(tiny_disk / "aml.db", user), 8)
    app = start_app(tiny_disk)
    client = Client(app.port)
    try:
        assert len(client.contents("ann", "orchids", top_k=20)) > 0  # upgraded while there is room
        for i in range(400):  # fill the disk
            if client.add("filler", f"r{i}", ["z" * 4000] * 20).status != 200:
                break
        assert client.add("filler", "one more", ["z" * 4000] * 20).status == 507  # populated
        found = "\n".join(client.contents("bob", "orchids", top_k=20))
        assert all(f"bob note {i} " in found for i in range(5))  # read at its old schema
        assert client.add("bob", "late", ["a late note"]).status == 507
        assert schema_of(user_file(tiny_disk / "aml.db", "bob")) == 8  # no room to upgrade
        assert client.request("DELETE", "/users/filler").status == 200  # space again
        assert len(client.contents("bob", "orchids", top_k=20)) > 0
        assert schema_of(user_file(tiny_disk / "aml.db", "bob"), whole=True) == len(SHARD_MIGRATIONS)
        assert client.add("bob", "later", ["a later note"]).status == 200
    finally:
        client.close()
        app.stop()


def schema_of(path: Path, whole: bool = False) -> int:
    """A file's schema version: of the file alone, read without making its shared-memory file
    (a full disk), or `whole`, with its write-ahead log (there is room)."""
    import sqlite3

    conn = sqlite3.connect(path if whole else f"{path.as_uri()}?mode=ro&immutable=1", uri=not whole)
    try:
        return conn.execute("PRAGMA user_version").fetchone()[0]
    finally:
        conn.close()
