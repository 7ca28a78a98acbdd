"""Mistakes on the command line end in one line on stderr and exit 1 (2 for usage), never in a
traceback, and a mistyped --db is never turned into a new empty store."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from aml_retriever.cli import main
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import AddRequest, Message, parse_add
from aml_retriever.storage import copies

ROOT = Path(__file__).resolve().parent.parent


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # a usage error: argparse exits 2
        code = exc.code if isinstance(exc.code, int) else 1
    return code, capsys.readouterr().err


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and (lines[0].startswith("error: ") or ": error: " in lines[0]), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    db = tmp_path / "aml.db"
    service = MemoryService.open(str(db))
    service.add(AddRequest("r1", "alice", "s", (Message("user", "hello", 1),)))
    service.close()
    return db


@pytest.mark.parametrize("argv, says, code", [
    # A flag's bad value is a usage error (2), out of range as not a number; a config file's is
    # a start that cannot be made (1).
    (["serve", "--port", "99999"], "argument --port: port must be at most 65535", 2),
    (["serve", "--port", "-1"], "argument --port: port must be at least 0", 2),
    (["serve", "--port", "abc"], "argument --port: port must be a number", 2),
    (["serve", "--prot", "8080"], "unrecognized arguments: --prot 8080; did you mean --port?", 2),
    (["stats", "--dbb", "x"], "did you mean --db?", 2),
    (["serve", "--config", "{missing}"], "cannot be opened: No such file or directory", 1),
    (["serve", "--config", "{bad_json}"], "is not valid JSON", 1),
    (["serve", "--config", "{big_port}"], "port must be at most 65535", 1),
    (["serve", "--db", "{a_file}/sub/aml.db"], "the folder", 1),
    (["serve", "--db", "{typo}/aml.db"], "does not exist (check --db, or make the folder first", 1),
])
def test_serve_refuses_a_bad_setting_or_path_in_one_line(tmp_path, capsys, argv, says, code):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "big.json").write_text(json.dumps({"port": 70000}))
    (tmp_path / "afile").write_text("")
    names = {"missing": tmp_path / "missing.json", "bad_json": tmp_path / "bad.json",
             "big_port": tmp_path / "big.json", "a_file": tmp_path / "afile",
             "typo": tmp_path / "no" / "such"}
    exit_code, err = run(capsys, *(a.format(**names) for a in argv))
    assert exit_code == code and says in one_line_error(err)
    assert not (tmp_path / "no").exists()  # a mistyped folder is never made


@pytest.mark.parametrize("command", [["stats"], ["delete-user", "--user", "alice"], ["reindex"],
                                     ["purge", "--yes"]])
def test_a_mistyped_db_is_refused_and_nothing_is_created(tmp_path, capsys, store, command):
    missing = tmp_path / "typo" / "aml.db"
    code, err = run(capsys, command[0], "--db", str(missing), *command[1:])
    assert code == 1 and "there is no store at" in one_line_error(err)
    assert not (tmp_path / "typo").exists()
    code, _ = run(capsys, command[0], "--db", str(store), *command[1:])
    assert code == 0  # control: the real store is served


def test_delete_user_refuses_an_empty_user_id_as_http_does(capsys, store):
    code, err = run(capsys, "delete-user", "--db", str(store), "--user", "")
    assert code == 1 and "user_id" in one_line_error(err)


def test_reindex_takes_the_index_flags_serve_names(capsys, store):
    code, err = run(capsys, "reindex", "--db", str(store), "--segment-max-messages", "30",
                    "--quiet")
    assert code == 0, err
    code, err = run(capsys, "stats", "--db", str(store))
    assert code == 0  # the store, stamped for the new settings, still opens for whole-store work


def test_a_port_in_use_is_named_in_one_line(tmp_path):
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    try:
        done = subprocess.run([sys.executable, "-m", "aml_retriever", "serve", "--port", str(port),
                               "--db", str(tmp_path / "aml.db")], capture_output=True, text=True,
                              timeout=60, cwd=ROOT)
    finally:
        holder.close()
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in one_line_error(done.stderr.splitlines()[-1])
    assert "Traceback" not in done.stderr


def world_readable_copy(base: Path) -> Path:
    """A copy of the package under `base` that any user can read, so another user can run it wherever
    this checkout lives (a clone under /root, or any directory of mode 700, is closed to them)."""
    copy = base / "src"
    shutil.copytree(ROOT / "aml_retriever", copy / "aml_retriever",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for path in [copy, *copy.rglob("*")]:  # whatever the umask the checkout was made with
        path.chmod(0o755 if path.is_dir() else 0o644)
    return copy


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run the command as another user")
def test_an_unwritable_directory_is_reported_as_a_permission_problem():
    python = "/usr/bin/python3"  # one another user can run (this one may live under /root)
    probe = subprocess.run(["su", "nobody", "-s", "/bin/sh", "-c", f"cd / && {python} -c 'import sys; "
                            "assert sys.version_info >= (3, 11)'"], capture_output=True, timeout=60, cwd="/")
    if probe.returncode != 0:
        pytest.skip(f"{python} (3.11 or later) cannot be run by the user nobody here")
    base = Path(tempfile.mkdtemp(dir="/tmp"))  # pytest's own directories are private to root
    try:
        base.chmod(0o755)
        package = world_readable_copy(base)
        readonly = base / "ro"
        readonly.mkdir(mode=0o555)
        done = subprocess.run(["su", "nobody", "-s", "/bin/sh", "-c",
                               f"cd / && PYTHONPATH={package} PYTHONDONTWRITEBYTECODE=1 timeout 20 {python} "
                               f"-m aml_retriever serve --port 0 --db {readonly}/aml.db"],
                              capture_output=True, text=True, timeout=60, cwd="/")
        assert "No module named" not in done.stderr, done.stderr  # nobody could read the copy
        assert done.returncode == 1 and "permission denied" in one_line_error(done.stderr)
        assert not (readonly / "aml.db").exists()
    finally:
        shutil.rmtree(base)


def test_a_closed_pipe_ends_the_command_quietly():
    reader = subprocess.Popen([sys.executable, "-m", "aml_retriever", "print-config"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert reader.stdout is not None
    reader.stdout.close()  # the reader goes away before the command writes
    _, err = reader.communicate(timeout=60)
    assert b"Traceback" not in err and b"BrokenPipeError" not in err
    assert err == b""  # quietly: the reader going away is no error of the command


@pytest.fixture
def read_only_store(tmp_path: Path) -> Iterator[Path]:
    """A store of one user, seen through a read-only bind mount (needs root; skipped
    otherwise): the user may read every file and write none."""
    source, seen = tmp_path / "rw", tmp_path / "ro"
    source.mkdir()
    seen.mkdir()
    svc = MemoryService.open(str(source / "aml.db"))
    svc.add(parse_add({"user_id": "u", "request_id": "r1", "session_id": "s",
                       "messages": [{"role": "user", "content": "a note about orchids"}]}, 200))
    svc.close()
    for command in (["mount", "--bind", str(source), str(seen)],
                    ["mount", "-o", "remount,ro,bind", str(seen)]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(["umount", str(seen)], capture_output=True)
            pytest.skip(f"cannot make a read-only mount here ({done.stderr.strip()}); needs root")
    try:
        yield seen / "aml.db"
    finally:
        subprocess.run(["umount", "-l", str(seen)], check=False)


@pytest.fixture
def copied_live(tmp_path: Path) -> Iterator[Path]:
    """A copy of a store taken while its server held it open (each user file's write-ahead log
    holding commits, no shared-memory file), seen through a read-only mount (needs root)."""
    source, seen = tmp_path / "rw", tmp_path / "ro"
    seen.mkdir()
    live = MemoryService.open(str(tmp_path / "live" / "aml.db"))
    for user in ("u", "v"):
        live.add(parse_add({"user_id": user, "request_id": "r1", "session_id": "s",
                            "messages": [{"role": "user", "content": f"a note about orchids {user}"}] * 3},
                           200))
    shutil.copytree(tmp_path / "live", source, ignore=shutil.ignore_patterns("*-shm"))
    live.close()
    assert any(p.stat().st_size for p in source.rglob("*-wal"))  # the commits are in the logs
    for command in (["mount", "--bind", str(source), str(seen)],
                    ["mount", "-o", "remount,ro,bind", str(seen)]):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(["umount", str(seen)], capture_output=True)
            pytest.skip(f"cannot make a read-only mount here ({done.stderr.strip()}); needs root")
    try:
        yield seen / "aml.db"
    finally:
        subprocess.run(["umount", "-l", str(seen)], check=False)


def test_a_copy_whose_logs_hold_its_commits_is_read_whole_on_a_read_only_mount(copied_live, capsys):
    """Its files cannot be opened where they lie (the shared-memory file cannot be made): read
    through a copy, every commit counted and exported (before: 0 users and 0 messages, exit 0;
    export blamed a full disk)."""
    assert main(["stats", "--db", str(copied_live)]) == 0
    counted = json.loads(capsys.readouterr().out)
    assert (counted["users"], counted["messages"], counted["unreadable_user_files"]) == (2, 6, 0)
    assert main(["export", "--db", str(copied_live), "--user", "v"]) == 0
    assert capsys.readouterr().out.count("a note about orchids v") == 3


def test_a_user_file_that_cannot_be_read_is_never_counted_as_empty(copied_live, capsys, monkeypatch):
    """Where not even a copy can be made (no room for it), `stats` says how many files it
    could not read and exits 1; never 0 users for a store that holds some."""
    def no_room(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(copies.tempfile, "TemporaryDirectory", no_room)
    assert main(["stats", "--db", str(copied_live)]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["unreadable_user_files"] == 2
    assert "2 user file(s) could not be read" in err and "Traceback" not in err


def test_read_only_commands_work_on_a_store_the_user_cannot_write(read_only_store, capsys):
    """`stats` and `export` open the store read only (they said "permission denied ... cannot
    be written"); a command that writes still says it cannot, in one line (the control)."""
    assert main(["stats", "--db", str(read_only_store)]) == 0
    assert json.loads(capsys.readouterr().out)["messages"] == 1
    assert main(["export", "--db", str(read_only_store), "--user", "u"]) == 0
    assert "a note about orchids" in capsys.readouterr().out
    assert main(["delete-user", "--db", str(read_only_store), "--user", "u"]) != 0
    err = capsys.readouterr().err
    assert "cannot be written" in err and "Traceback" not in err
