"""A naive FTS5 memory service: the HTTP reference the real server is measured against.

What a developer would write in an afternoon with the standard library: http.server with a thread
per connection (HTTP/1.1 keep-alive), one SQLite file per user holding a plain FTS5 table of the
contents (the same tokenizer as the service's index), POST /add inserting an Add's messages in
one transaction (WAL, synchronous FULL, as the service), POST /search answering one
`MATCH ... ORDER BY rank LIMIT top_k` with the query's words OR-ed. No validation beyond what
keeps it running, no idempotency, no features, no views: the floor of a memory service over HTTP.

    python3 bench/naive_service.py --dir DIR [--port 0]   # prints "serving on http://127.0.0.1:PORT"
"""

from __future__ import annotations

import argparse
import http.server
import json
import re
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any

import benchlib  # noqa: F401  (makes the repository importable)

from aml_retriever.analysis.tokenizer import FTS_TOKENIZE

SCHEMA = f"CREATE VIRTUAL TABLE IF NOT EXISTS messages USING fts5(content, tokenize=\"{FTS_TOKENIZE}\")"
SEARCH_SQL = "SELECT rowid, content, rank FROM messages WHERE messages MATCH ? ORDER BY rank LIMIT ?"
_WORD = re.compile(r"[^\W_]+")


def expression(query: str) -> str:
    """The query's words, each quoted, OR-ed: what a naive service matches."""
    return " OR ".join(f'"{w}"' for w in dict.fromkeys(_WORD.findall(query.lower()))) or '""'


class Stores(threading.local):
    """A connection per user file per thread (sqlite3 connections stay in their thread)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.conns: dict[str, sqlite3.Connection] = {}

    def get(self, user_id: str) -> sqlite3.Connection:
        conn = self.conns.get(user_id)
        if conn is None:
            conn = sqlite3.connect(self.directory / f"{user_id}.db", isolation_level=None,
                                   check_same_thread=False)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA busy_timeout = 10000")
            conn.execute(SCHEMA)
            self.conns[user_id] = conn
        return conn


def add(conn: sqlite3.Connection, body: dict[str, Any]) -> dict[str, Any]:
    contents = [(m["content"],) for m in body["messages"]]
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO messages (content) VALUES (?)", contents)
    conn.execute("COMMIT")
    return {"success": True, "stored": len(contents)}


def search(conn: sqlite3.Connection, body: dict[str, Any]) -> dict[str, Any]:
    rows = conn.execute(SEARCH_SQL, (expression(body["query"]), int(body.get("top_k", 10))))
    return {"data": [{"id": f"m{rowid}", "content": content, "score": -rank}
                     for rowid, content, rank in rows]}


def make_handler(stores: Stores) -> type[http.server.BaseHTTPRequestHandler]:
    routes = {"/add": add, "/search": search}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            answer = json.dumps(routes[self.path](stores.get(body["user_id"]), body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *_: Any) -> None:
            pass

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="where the user files go")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(Stores(args.dir)))
    server.daemon_threads = True
    print(f"serving on http://127.0.0.1:{server.server_address[1]}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
