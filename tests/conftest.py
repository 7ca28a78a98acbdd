"""Shared fixtures: a real server on an ephemeral loopback port over a temporary store, and a
small keep-alive JSON client. No test touches ./aml.db or a real home directory."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from aml_retriever.app import App
from aml_retriever.settings import load


def pytest_report_header() -> list[str]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        fts5 = "available"
    except sqlite3.Error:
        fts5 = "MISSING"
    finally:
        conn.close()
    return [f"SQLite {sqlite3.sqlite_version}, FTS5 {fts5}"]


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: Any
    raw: bytes


class Client:
    """A keep-alive HTTP/1.1 client for one server."""

    def __init__(self, port: int, api_key: str | None = None) -> None:
        self.port = port
        self.api_key = api_key
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
                raw: bytes | None = None) -> Response:
        sent = dict(headers or {})
        if self.api_key and "Authorization" not in sent and "X-Api-Key" not in sent:
            sent["Authorization"] = f"Bearer {self.api_key}"
        data = raw
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            sent.setdefault("Content-Type", "application/json")
        try:
            self.conn.request(method, path, body=data, headers=sent)
            response = self.conn.getresponse()
        except (http.client.HTTPException, OSError):
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            self.conn.request(method, path, body=data, headers=sent)
            response = self.conn.getresponse()
        payload = response.read()
        if response.getheader("Connection", "").lower() == "close":
            self.conn.close()
        parsed = json.loads(payload) if payload else None
        return Response(response.status, {k.lower(): v for k, v in response.getheaders()}, parsed,
                        payload)

    def post(self, path: str, body: Any, **kwargs: Any) -> Response:
        return self.request("POST", path, body, **kwargs)

    def add(self, user: str, request_id: str, contents: list[str], session: str = "s1",
            start_ms: int = 1_700_000_000_000, role: str = "user") -> Response:
        messages = [{"role": role, "content": c, "timestamp": start_ms + i * 1000}
                    for i, c in enumerate(contents)]
        return self.post("/add", {"request_id": request_id, "user_id": user, "session_id": session,
                                  "messages": messages})

    def search(self, user: str, query: str, top_k: int = 10, **extra: Any) -> Response:
        return self.post("/search", {"user_id": user, "query": query, "top_k": top_k, **extra})

    def contents(self, user: str, query: str, top_k: int = 10) -> list[str]:
        response = self.search(user, query, top_k)
        assert response.status == 200, response.body
        return [item["content"] for item in response.body["data"]]

    def close(self) -> None:
        self.conn.close()


@contextmanager
def saturated(app: App) -> Iterator[None]:
    """Fill a server of one turn and a queue of one (`active_requests=1, queue_size=1`): a
    request running (held until the block ends) and a second one waiting its turn, so the next
    request finds the queue full. Idle or slow connections fill nothing: only whole requests
    wait for a turn."""
    release = threading.Event()
    original = app.service.stats

    def held() -> Any:
        release.wait(30)
        return original()

    app.service.stats = held  # type: ignore[method-assign]
    holders = []
    try:
        for _ in range(2):
            holder = socket.create_connection(("127.0.0.1", app.port))
            holder.sendall(b"GET /stats HTTP/1.1\r\nHost: localhost\r\n\r\n")
            holders.append(holder)
            time.sleep(0.3)  # let the worker take the first before the second arrives
        yield
    finally:
        release.set()
        app.service.stats = original  # type: ignore[method-assign]
        for holder in holders:
            holder.close()


def start_app(directory: Any, **overrides: Any) -> App:
    """A real server on an ephemeral loopback port over a store in `directory`."""
    values = {"db_path": str(directory / "aml.db"), "port": 0, "host": "127.0.0.1",
              "socket_timeout": 5.0, "checkpoint_interval": 0.2, **overrides}
    return App(load(values, environ={})).start()


@pytest.fixture
def make_app(tmp_path: Any) -> Iterator[Any]:
    """Start servers with settings overrides; every one is stopped after the test."""
    apps: list[App] = []

    def start(**overrides: Any) -> App:
        app = start_app(tmp_path, **overrides)
        apps.append(app)
        return app

    yield start
    for app in apps:
        app.stop()


@pytest.fixture
def app(make_app: Any) -> App:
    return make_app()


@pytest.fixture(scope="module", name="http")
def module_client(server: App) -> Iterator[Client]:
    """A keep-alive client of the module's own `server` fixture (a module-scoped App)."""
    c = Client(server.port)
    yield c
    c.close()


@pytest.fixture
def client(app: App) -> Iterator[Client]:
    c = Client(app.port)
    yield c
    c.close()


@pytest.fixture(autouse=True)
def _quiet_access_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="aml_retriever")


@pytest.fixture
def memory(tmp_path: Any) -> Iterator[Any]:
    """An agent's two memories (project and account) in the test's directory."""
    from aml_retriever.agents.scopes import ScopedMemory

    memory = ScopedMemory.at(tmp_path / "project", tmp_path / "account")
    yield memory
    memory.close()


def ids(results: list[dict[str, Any]]) -> list[str]:
    """The statement ids of a recall or recent answer, in order."""
    return [r["id"] for r in results]


def free_port() -> int:
    """A port no one listens on, for a server a test starts by a port it names (a README block,
    a cluster's shards). Taken below the kernel's range of ephemeral ports: a port found free by
    binding port 0 is an ephemeral one, and any client socket opened before the server binds it
    may take it (a README block's server once exited "address in use" beside a benchmark's
    clients). Random, so tests in parallel processes rarely try the same one; checked by binding
    it on every address, as a server bound to 0.0.0.0 needs."""
    import random
    low = _ephemeral_low()
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(max(1024, low - 16_384), low)
        with socket.socket() as probe:
            try:
                probe.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range")


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 where it cannot be read)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            return int(ports.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
