"""Where Adds and Searches go: the service in this process, or any server speaking the contract.

Both take the contract's request bodies (dicts) and give back the contract's result objects, so
the runner cannot tell them apart.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any, Protocol

from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import parse_add, parse_search

# The contract's default limit on messages per Add; generated and converted Adds hold at most 20.
ADD_MESSAGE_LIMIT = 200


class EvalError(RuntimeError):
    """A backend refused or failed a request the evaluation needs."""


class Backend(Protocol):
    def add(self, body: dict[str, Any]) -> None: ...

    def search(self, body: dict[str, Any]) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


class InProcess:
    """A MemoryService over a store file, called directly: no sockets, no JSON.

    `synchronous="NORMAL"` because an evaluation store is scratch data: durability across a power
    cut buys nothing here and costs an fsync per Add.
    """

    def __init__(self, path: str | Path, retrieval: RetrievalConfig | None = None,
                 answer_window_tokens: int = 0, reader_view: bool = False) -> None:
        self.service = MemoryService.open(str(path), retrieval=retrieval, synchronous="NORMAL")
        self.service.answer_window_tokens = answer_window_tokens
        self.service.reader_view = reader_view

    def add(self, body: dict[str, Any]) -> None:
        self.service.add(parse_add(body, ADD_MESSAGE_LIMIT))

    def search(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        return list(self.service.search(parse_search(body))["data"])

    def close(self) -> None:
        self.service.close()


# Statuses worth another try: the server is busy or restarting, not refusing the request.
RETRY_STATUSES = frozenset({429, 502, 503, 504})


class Http:
    """A JSON client for a server speaking the contract: one keep-alive connection per thread (or
    a fresh connection per request with `keep_alive=False`, to tell connection handling apart from
    work in a latency reading), retrying with backoff on connection errors and busy statuses."""

    def __init__(self, url: str, api_key: str | None = None, timeout: float = 60.0,
                 retries: int = 3, keep_alive: bool = True) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.scheme, self.host, self.port = parts.scheme, parts.hostname, parts.port
        self.base = parts.path.rstrip("/")
        self.timeout, self.retries, self.keep_alive = timeout, retries, keep_alive
        self.headers = {"Content-Type": "application/json"}
        if not keep_alive:
            self.headers["Connection"] = "close"
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[http.client.HTTPConnection] = []
        self.retried = 0

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
            conn = self._local.conn = cls(self.host, self.port, timeout=self.timeout)
            with self._lock:
                self._connections.append(conn)
        return conn

    def _drop_connection(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any, float]:
        """(status, parsed JSON body or None, milliseconds of the last attempt)."""
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        last_error = ""
        for attempt in range(self.retries + 1):
            if attempt:
                with self._lock:
                    self.retried += 1
                time.sleep(min(8.0, 0.25 * 2 ** attempt))
            started = time.perf_counter()
            try:
                conn = self._connection()
                conn.request("POST", self.base + path, body=data, headers=self.headers)
                response = conn.getresponse()
                payload = response.read()
            except (http.client.HTTPException, OSError) as exc:
                self._drop_connection()
                last_error = f"{type(exc).__name__}: {exc}"
                continue
            ms = (time.perf_counter() - started) * 1000
            if not self.keep_alive or response.getheader("Connection", "").lower() == "close":
                self._drop_connection()
            if response.status in RETRY_STATUSES:
                last_error = f"HTTP {response.status}"
                continue
            try:
                parsed = json.loads(payload) if payload else None
            except ValueError:
                parsed = None
            return response.status, parsed, ms
        raise EvalError(f"POST {path} failed after {self.retries + 1} attempts ({last_error})")

    def add(self, body: dict[str, Any]) -> None:
        status, parsed, _ = self.post("/add", body)
        if status != 200 or not isinstance(parsed, dict) or parsed.get("success") is not True:
            raise EvalError(f"Add {body.get('request_id')!r} answered {status}: {_error_code(parsed)}")

    def search(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        status, parsed, _ = self.post("/search", body)
        data = parsed.get("data") if isinstance(parsed, dict) else None
        if status != 200 or not isinstance(data, list):
            raise EvalError(f"Search answered {status}: {_error_code(parsed)}")
        return data

    def close(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()


def _error_code(parsed: Any) -> str:
    """The contract's error code, never the body (which could echo content)."""
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        return str(parsed["error"].get("code"))
    return "no contract error body"
