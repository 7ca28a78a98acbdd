"""What the reliability tests share: a server in its own process, raw HTTP exchanges, the user files
on disk, and the invariants every user file must keep (an Add is whole or absent)."""

from __future__ import annotations

import json
import resource
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aml_retriever.storage.user_files import shard_name

ROOT = Path(__file__).resolve().parent.parent


class ServerProcess:
    """`python3 -m aml_retriever serve` on a free loopback port; its stderr is drained so a busy
    server never blocks on a full pipe."""

    def __init__(self, db: Path, *flags: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "aml_retriever", "serve", "--host", "127.0.0.1", "--port", "0",
             "--db", str(db), *flags],
            cwd=ROOT, stderr=subprocess.PIPE, text=True)
        self.lines: list[str] = []
        self.port = self._wait_for_port()
        threading.Thread(target=self._drain, daemon=True).start()

    def _wait_for_port(self) -> int:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if "serving on" in line:
                return int(line.rsplit(":", 1)[1].split()[0])
            self.lines.append(line)
        raise AssertionError("server did not start:\n" + "".join(self.lines))

    def _drain(self) -> None:
        """Read the access log as it comes; keep only what is not an access line."""
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if "aml_retriever.access" not in line:
                self.lines.append(line)

    def kill(self) -> None:
        self.process.kill()  # SIGKILL: no handler, no checkpoint, no close
        self.process.wait(timeout=15)

    def stop(self) -> int:
        self.process.terminate()
        return self.process.wait(timeout=30)


def serve(db: Path, limits: dict[int, int] | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """The server (`python3 -m aml_retriever serve`) as a process of its own over the store at
    `db`, under these resource limits; returns it, once it accepts connections, and its port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    def limited() -> None:
        for which, value in (limits or {}).items():
            resource.setrlimit(which, (value, value))

    process = subprocess.Popen([sys.executable, "-m", "aml_retriever", "serve", "--port", str(port),
                                "--db", str(db), "--log-level", "WARNING"],
                               cwd=ROOT, preexec_fn=limited, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, port
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError("the server did not start")


def user_file(db: Path, user_id: str) -> Path:
    """Where the store keeps one user's SQLite file (named by a hash of the id)."""
    name = shard_name(user_id)
    return Path(str(db) + ".users") / name[:2] / f"{name}.db"


def store_bytes(db: Path) -> bytes:
    """Every byte of the store on disk: catalog, user files, their WAL and shared memory (a
    WAL or shared-memory file the last connection to its file removes while they are read
    holds nothing on disk any more: the read raced it, now and then, under a loaded run)."""
    files = [db, *sorted(Path(str(db) + ".users").rglob("*"))]
    held = []
    for path in files:
        try:
            held.append(path.read_bytes() if path.is_file() else b"")
        except FileNotFoundError:
            continue
    return b"".join(held)


def open_user(db: Path, user_id: str) -> sqlite3.Connection:
    return sqlite3.connect(user_file(db, user_id), isolation_level=None, timeout=30)


def broken_adds(conn: sqlite3.Connection) -> list[str]:
    """Every way the file breaks "an Add is stored whole or not at all"; empty when it holds."""
    problems = []
    ids = {i for (i,) in conn.execute("SELECT id FROM messages")}
    covered: set[int] = set()
    for rid, first, stored in conn.execute("SELECT request_id, first_message_id, stored FROM requests"):
        span = set(range(first, first + stored))
        if span & covered:
            problems.append(f"request {rid!r} claims messages another request claims")
        covered |= span
        if not span <= ids:
            problems.append(f"request {rid!r} records {stored} messages from {first}, file holds "
                            f"{sorted(span & ids)}")
    if ids - covered:
        problems.append(f"messages {sorted(ids - covered)} without a request record")
    for session_id, counted in conn.execute("SELECT session_id, message_count FROM sessions"):
        held = conn.execute("SELECT count(*) FROM messages WHERE session_id = ?",
                            (session_id,)).fetchone()[0]
        if held != counted:
            problems.append(f"session cursor counts {counted} messages, file holds {held}")
    sessions = {s for (s,) in conn.execute("SELECT DISTINCT session_id FROM messages")}
    cursors = {s for (s,) in conn.execute("SELECT session_id FROM sessions")}
    if sessions != cursors:
        problems.append("sessions with messages and session cursors differ")
    for (members,) in conn.execute("SELECT message_ids FROM views"):
        if not set(json.loads(members)) <= ids:
            problems.append("a view names messages that are not stored")
    problems += broken_links(conn)
    indexed = conn.execute("SELECT count(*) FROM message_index").fetchone()[0]
    if indexed != len(ids):
        problems.append(f"message index has {indexed} rows for {len(ids)} messages")
    return problems


def request_contents(conn: sqlite3.Connection) -> dict[str, list[str]]:
    """Each recorded Add's messages, in the order it sent them (its consecutive ids)."""
    return {rid: [c for (c,) in conn.execute("SELECT content FROM messages WHERE id BETWEEN ? AND ? "
                                             "ORDER BY id", (first, first + stored - 1))]
            for rid, first, stored in conn.execute(
                "SELECT request_id, first_message_id, stored FROM requests").fetchall()}


def broken_links(conn: sqlite3.Connection) -> list[str]:
    """Where the messages' links differ from each session's conversation order (timestamp,
    then its Add's place `said` since shard migration 12, then id); empty when every link is
    right."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(messages)")}
    order = "timestamp_ms, said, id" if "said" in columns else "timestamp_ms, id"
    expected = conn.execute(
        "SELECT id, lag(id) OVER turns, lead(id) OVER turns FROM messages "
        f"WINDOW turns AS (PARTITION BY session_id ORDER BY {order}) ORDER BY id").fetchall()
    held = conn.execute("SELECT id, prev_id, next_id FROM messages ORDER BY id").fetchall()
    return [f"message {want[0]} links {got[1:]}, conversation order says {want[1:]}"
            for want, got in zip(expected, held, strict=True) if want != got]


def fts_tables(conn: sqlite3.Connection) -> list[str]:
    return [name for (name,) in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%fts5%'")]


def integrity(conn: sqlite3.Connection) -> list[str]:
    """SQLite's own check of the file, plus FTS5's check of each full-text index."""
    found = [row[0] for row in conn.execute("PRAGMA integrity_check")]
    for index in fts_tables(conn):
        try:
            conn.execute(f"INSERT INTO {index} ({index}) VALUES ('integrity-check')")
        except sqlite3.DatabaseError as exc:
            found.append(f"{index}: {exc}")
    return [] if found == ["ok"] else found


@dataclass
class RawResponse:
    status: int
    head: bytes
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def exchange(port: int, data: bytes, timeout: float = 5.0, half_close: bool = True) -> bytes:
    """Send raw bytes on a fresh connection and read until the server closes it (or `timeout`).
    With `half_close` the client then shuts its sending side, so the server sees the end of the
    request at once instead of waiting out its socket timeout."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except OSError:  # the server may answer and close before reading everything
            pass
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except (TimeoutError, ConnectionResetError):
            pass
    return b"".join(chunks)


def responses(stream: bytes, head_first: bool = False) -> list[RawResponse]:
    """Split what a server sent on one connection into its HTTP/1.1 responses (each carries a
    Content-Length; the answer to a HEAD request, `head_first`, has none of its body); raises
    AssertionError on anything that is not such a response."""
    found = []
    while stream:
        head, separator, rest = stream.partition(b"\r\n\r\n")
        assert separator, f"incomplete response head: {stream[:200]!r}"
        status_line, *header_lines = head.split(b"\r\n")
        assert status_line.startswith(b"HTTP/1.1 "), f"not an HTTP/1.1 status line: {status_line!r}"
        if status_line.startswith(b"HTTP/1.1 1"):  # an interim answer (100 Continue): no body
            stream = rest
            continue
        headers = dict(line.split(b": ", 1) for line in header_lines)
        length = int(headers[b"Content-Length"])
        if head_first and not found and not rest.startswith(b"{"):
            length = 0  # the answer to HEAD (a line too broken to be read as HEAD gets a body)
        assert len(rest) >= length, "response body shorter than its Content-Length"
        found.append(RawResponse(int(status_line.split()[1]), head, rest[:length]))
        stream = rest[length:]
    return found
