"""The MCP server over a real pipe, with hand-written JSON-RPC: the handshake, every protocol error
code, notifications, batches, tool errors, oversized lines, a clean stop on end of input and on
SIGTERM, stdout carrying protocol only, and two projects' local memories kept apart while the
global memory is shared."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from aml_retriever.agents.mcp_server import MAX_MESSAGE_BYTES, PROTOCOL_VERSIONS, leading_id

ROOT = Path(__file__).resolve().parent.parent


class McpProcess:
    """`python3 -m aml_retriever mcp` as a subprocess, spoken to line by line."""

    def __init__(self, project: Path, global_root: Path, from_cwd: bool = False) -> None:
        """`from_cwd`: started in the project's directory without --project-root, as a coding
        client starts it."""
        project.mkdir(parents=True, exist_ok=True)
        root = [] if from_cwd else ["--project-root", str(project)]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aml_retriever", "mcp", *root, "--global-root", str(global_root)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=project if from_cwd else ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.stdout: list[bytes] = []
        self.stderr = b""
        self._next_id = 0
        self._readers = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for reader in self._readers:
            reader.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.stdout.append(line)
            self.lines.put(line)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = self.proc.stderr.read()

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def read(self, timeout: float = 10) -> Any:
        return json.loads(self.lines.get(timeout=timeout))

    def request(self, method: str, params: Any = None) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        answer = self.read()
        assert answer["id"] == self._next_id
        return answer

    def initialize(self, version: str = PROTOCOL_VERSIONS[0]) -> dict[str, Any]:
        answer = self.request("initialize", {"protocolVersion": version, "capabilities": {},
                                             "clientInfo": {"name": "test", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer["result"]

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        return self.request("tools/call", {"name": tool, "arguments": arguments})["result"]

    def close(self, timeout: float = 10) -> int:
        """Close stdin (end of input) and wait for the exit code."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return self.wait(timeout)

    def wait(self, timeout: float = 10) -> int:
        code = self.proc.wait(timeout)
        for reader in self._readers:
            reader.join(timeout)
        return code


@pytest.fixture
def start(tmp_path: Path):
    processes: list[McpProcess] = []

    def starter(project: str = "project") -> McpProcess:
        process = McpProcess(tmp_path / project, tmp_path / "account")
        processes.append(process)
        return process

    yield starter
    for process in processes:
        if process.proc.poll() is None:
            process.proc.kill()
            process.wait()


@pytest.fixture
def server(start) -> McpProcess:
    process = start()
    process.initialize()
    return process


# ---- the handshake ---------------------------------------------------------------------------

def test_initialize_negotiates_the_revision_and_names_the_server(start):
    process = start()
    for version in PROTOCOL_VERSIONS:
        result = process.request("initialize", {"protocolVersion": version})["result"]
        assert result["protocolVersion"] == version
    result = process.initialize("2024-11-05")  # not supported here: answered with the newest
    assert result["protocolVersion"] == PROTOCOL_VERSIONS[0]
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["serverInfo"]["name"] == "aml_retriever" and result["instructions"]
    assert process.request("ping")["result"] == {}
    assert process.close() == 0


def test_tools_list_describes_the_seven_tools(server):
    tools = server.request("tools/list")["result"]["tools"]
    assert [t["name"] for t in tools] == ["remember", "update", "recall", "forget", "recent",
                                          "history", "handoff"]
    assert all("outputSchema" in t and "inputSchema" in t for t in tools)


# ---- protocol errors -------------------------------------------------------------------------

def test_an_unknown_method_is_32601_with_the_request_id(server):
    answer = server.request("resources/list")
    assert answer["error"]["code"] == -32601 and "tools/call" in answer["error"]["message"]
    assert server.request("server/discover", {"_meta": {}})["error"]["code"] == -32601


@pytest.mark.parametrize("method, params", [
    ("tools/call", {"arguments": {}}),
    ("tools/call", {"name": 7}),
    ("tools/call", {"name": "delete_everything", "arguments": {}}),
    ("tools/call", {"name": "recall", "arguments": ["query"]}),
    ("tools/list", ["not", "an", "object"]),
    ("initialize", {"capabilities": {}}),
])
def test_bad_params_are_32602(server, method, params):
    answer = server.request(method, params)
    assert answer["error"]["code"] == -32602 and answer["error"]["message"]


@pytest.mark.parametrize("line", [b"nonsense", b"{\"jsonrpc\": \"2.0\", ", b"\xff\xfe{}",
                                  b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "x": NaN}'])
def test_a_line_that_is_not_json_is_32700_with_id_null(server, line):
    server.send_raw(line + b"\n")
    assert server.read() == {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32700, "message": "not JSON: send one UTF-8 JSON-RPC message per line"}}
    assert server.request("ping")["result"] == {}


@pytest.mark.parametrize("message, answered_id", [
    (42, None),
    ({"id": 1, "method": "ping"}, None),
    ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": None, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": True, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, None),
    ({"jsonrpc": "2.0", "id": 9, "method": 5}, 9),
    ({"jsonrpc": "2.0", "id": 9}, None),
    ([], None),
])
def test_a_message_that_is_not_a_request_is_32600(server, message, answered_id):
    server.send(message)
    answer = server.read()
    assert answer["error"]["code"] == -32600 and answer["id"] == answered_id


def test_notifications_and_client_answers_get_no_answer(server):
    server.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                 "params": {"requestId": 1, "reason": "changed my mind"}})
    server.send({"jsonrpc": "2.0", "method": "notifications/unheard_of", "params": [1, 2]})
    server.send({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "nope"}})
    server.send({"jsonrpc": "2.0", "id": 77, "result": {}})
    server.send_raw(b"\n  \n")
    assert server.request("ping")["result"] == {}  # the first answer after them is the ping's
    assert server.lines.empty()


def test_a_batch_gets_an_array_of_answers_without_the_notifications(server):
    server.send([{"jsonrpc": "2.0", "id": "a", "method": "ping"},
                 {"jsonrpc": "2.0", "method": "notifications/initialized"},
                 {"jsonrpc": "2.0", "id": "b", "method": "no/such"}])
    answers = server.read()
    assert [a["id"] for a in answers] == ["a", "b"]
    assert answers[0]["result"] == {} and answers[1]["error"]["code"] == -32601
    server.send([{"jsonrpc": "2.0", "method": "notifications/initialized"}])
    assert server.request("ping")["result"] == {}  # an all-notification batch is not answered


def test_an_oversized_message_is_answered_with_its_id_and_the_next_one_is_served(server):
    huge = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                       "params": {"name": "remember",
                                  "arguments": {"content": "x" * MAX_MESSAGE_BYTES}}})
    server.send_raw(huge.encode() + b"\n")
    answer = server.read()
    assert answer["id"] == 5 and answer["error"]["code"] == -32600
    assert str(MAX_MESSAGE_BYTES) in answer["error"]["message"]
    assert server.request("ping")["result"] == {}
    assert server.call("recent")["structuredContent"] == {"results": [], "next_cursor": None}


def test_an_oversized_message_without_a_readable_id_ends_the_session_cleanly(server):
    huge = json.dumps({"jsonrpc": "2.0", "method": "tools/call", "params": {
        "name": "remember", "arguments": {"content": "x" * MAX_MESSAGE_BYTES}}, "id": 6})
    server.send_raw(huge.encode() + b"\n")
    answer = server.read()
    assert answer["id"] is None and answer["error"]["code"] == -32600
    assert server.proc.wait(timeout=10) == 0  # the client sees the pipe close, not silence


@pytest.mark.parametrize("prefix, expected", [
    (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":"aaaa', 7),
    (b'{"id": "r-1" , "params": {"content": "aa', "r-1"),
    (b'{"params":{"id":3,"content":"aaaa', None),  # an id inside params is not the request's
    (b'{"jsonrpc":"2.0","method":"x","params":{"content":"aaaa', None),
    (b'{"id":true,"params":"', None),
])
def test_the_id_of_a_message_read_in_part(prefix, expected):
    assert leading_id(prefix) == expected


# ---- tools over the pipe ---------------------------------------------------------------------

def test_a_tool_error_is_a_result_and_the_server_keeps_serving(server):
    result = server.call("recall", query="anything", limit=1000)
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": "limit must be an integer from 1 to 100"}]
    unknown = server.call("forget", id="local:3")
    assert unknown["isError"] is True and "use recall or recent" in unknown["content"][0]["text"]
    assert server.call("remember", content="Still here.")["isError"] is False


def test_remember_recall_forget_over_the_pipe(server):
    stored = server.call("remember", content="The user's editor is Helix.", kind="preference")
    assert stored["structuredContent"]["statement"]["id"] == "local:1"
    assert json.loads(stored["content"][0]["text"]) == stored["structuredContent"]
    server.call("remember", content="The user's shell is fish.")
    found = server.call("recall", query="which editor")["structuredContent"]["results"]
    assert [r["id"] for r in found] == ["local:1"] and "lexical" in found[0]["why"]
    assert server.call("forget", text="The user's editor is Helix.")["isError"] is False
    assert server.call("recall", query="which editor")["structuredContent"]["results"] == []
    assert [r["id"] for r in server.call("recent")["structuredContent"]["results"]] == ["local:2"]


def test_without_a_project_root_the_project_is_where_the_client_starts_it(tmp_path):
    """A coding client starts the server in the project's directory: without --project-root the
    local memory is that project's (`DIR/.aml/`); the control, a server given another root,
    writes there and not here."""
    project = tmp_path / "where-the-client-is"
    process = McpProcess(project, tmp_path / "account", from_cwd=True)
    try:
        process.initialize()
        assert process.call("remember", content="The build uses make.")["isError"] is False
    finally:
        assert process.close() == 0
    assert (project / ".aml" / "memory.db").is_file()
    other = McpProcess(tmp_path / "elsewhere", tmp_path / "account")
    try:
        other.initialize()
        other.call("remember", content="Another project's fact.")
    finally:
        other.close()
    assert (tmp_path / "elsewhere" / ".aml" / "memory.db").is_file()
    assert not (ROOT / ".aml").exists()


def test_forget_of_ambiguous_text_lists_the_ids_and_removes_nothing(server):
    for scope in ("local", "global"):
        server.call("remember", content="Use UTC in logs.", scope=scope)
    result = server.call("forget", text="Use UTC in logs.")
    assert result["isError"] is True
    matches = result["structuredContent"]["matches"]
    assert [m["id"] for m in matches] == ["local:1", "global:1"]
    assert "local:1, global:1" in json.loads(result["content"][0]["text"])["error"]
    found = server.call("recall", query="UTC logs")["structuredContent"]["results"]
    assert [r["id"] for r in found] == ["local:1", "global:1"]
    server.call("forget", id="global:1")
    found = server.call("recall", query="UTC logs")["structuredContent"]["results"]
    assert [r["id"] for r in found] == ["local:1"]


# ---- streams and stopping --------------------------------------------------------------------

def test_stdout_carries_only_protocol_and_logs_go_to_stderr(server):
    server.call("remember", content="Confidential marker plumtree.")
    server.call("recall", query="plumtree")
    server.send_raw(b"garbage\n")
    server.read()
    assert server.close() == 0
    for line in server.stdout:
        assert json.loads(line)["jsonrpc"] == "2.0"
    log = server.stderr.decode()
    assert "serving MCP on stdio" in log and "tools/call remember ok" in log
    assert "plumtree" not in log  # content and queries are never logged


def test_end_of_input_stops_the_server_with_exit_code_0(start, tmp_path):
    process = start()
    process.initialize()
    process.call("remember", content="Durable before exit.")
    assert process.close() == 0
    again = start()
    again.initialize()
    found = again.call("recall", query="durable")["structuredContent"]["results"]
    assert [r["content"] for r in found] == ["Durable before exit."]


def test_sigterm_stops_the_server_with_exit_code_0(server):
    server.call("remember", content="Kept across a SIGTERM.")
    server.proc.send_signal(signal.SIGTERM)
    assert server.wait() == 0
    assert "Traceback" not in server.stderr.decode()


def test_a_project_root_that_is_not_a_directory_is_refused(tmp_path):
    result = subprocess.run([sys.executable, "-m", "aml_retriever", "mcp", "--project-root",
                             str(tmp_path / "missing"), "--global-root", str(tmp_path / "g")],
                            capture_output=True, text=True, timeout=30, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert result.returncode == 1 and "not a directory" in result.stderr and result.stdout == ""


# ---- scopes across processes -----------------------------------------------------------------

def test_two_projects_never_see_each_others_local_memory_and_share_the_global_one(start):
    alpha, beta = start("alpha"), start("beta")
    for process in (alpha, beta):
        process.initialize()
    alpha.call("remember", content="Alpha uses the orange deploy pipeline.")
    beta.call("remember", content="Beta uses the purple deploy pipeline.")
    alpha.call("remember", content="The user reviews every deploy pipeline change.", scope="global")

    def contents(process: McpProcess, tool: str, **arguments: Any) -> set[str]:
        results = process.call(tool, **arguments)["structuredContent"]["results"]
        return {r["content"] for r in results}

    shared = "The user reviews every deploy pipeline change."
    for tool, arguments in (("recall", {"query": "deploy pipeline"}), ("recent", {})):
        assert contents(alpha, tool, **arguments) == {"Alpha uses the orange deploy pipeline.", shared}
        assert contents(beta, tool, **arguments) == {"Beta uses the purple deploy pipeline.", shared}
    # Neither project finds the other's statement, even by its own distinctive word (each may
    # find its own colour as the word's neighbour in meaning: the related signal).
    assert contents(alpha, "recall", query="purple") <= {"Alpha uses the orange deploy pipeline."}
    assert contents(beta, "recall", query="orange") <= {"Beta uses the purple deploy pipeline."}
    assert beta.call("forget", id="global:1")["isError"] is False  # one account, one memory
    assert contents(alpha, "recent") == {"Alpha uses the orange deploy pipeline."}


def test_the_project_is_the_clients_root_when_it_offers_roots(tmp_path):
    """Started without --project-root in one directory, by a client whose root is another: the
    server asks for the roots and keeps the project's memory in the root; a client offering no
    roots keeps it where it started the server (the control)."""
    started_in, root = tmp_path / "started", tmp_path / "the project"
    root.mkdir()
    server = McpProcess(started_in, tmp_path / "account", from_cwd=True)
    try:
        server.request("initialize", {"protocolVersion": PROTOCOL_VERSIONS[0],
                                      "capabilities": {"roots": {"listChanged": True}},
                                      "clientInfo": {"name": "test", "version": "1"}})
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        asked = server.read()
        assert asked["method"] == "roots/list" and "id" in asked
        server.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": [
            {"uri": root.as_uri(), "name": "the project"}]}})
        assert not server.call("remember", content="The project uses Poetry.").get("isError")
        assert server.close() == 0
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
    assert (root / ".aml" / "memory.db").is_file()
    assert not (started_in / ".aml").exists()
    plain = McpProcess(started_in, tmp_path / "account", from_cwd=True)
    try:
        plain.initialize()  # no roots capability
        assert not plain.call("remember", content="The project uses uv.").get("isError")
        assert plain.close() == 0
    finally:
        if plain.proc.poll() is None:
            plain.proc.kill()
    assert (started_in / ".aml" / "memory.db").is_file()


@pytest.mark.parametrize("bad", ["file://[x", "file:///" + "d/" * 3000, "file:///%ff%fe"])
def test_a_root_that_cannot_be_read_is_skipped_and_the_server_serves_on(tmp_path, bad):
    """A root whose URI does not parse, whose path is too long or not UTF-8, or a folder this
    user cannot enter: skipped (before, the MCP server ended with a traceback or "Permission
    denied", and the agent lost its memory tools); the next root that can be read is taken."""
    started_in, root = tmp_path / "started", tmp_path / "the project"
    root.mkdir()
    server = McpProcess(started_in, tmp_path / "account", from_cwd=True)
    try:
        server.request("initialize", {"protocolVersion": PROTOCOL_VERSIONS[0],
                                      "capabilities": {"roots": {"listChanged": True}},
                                      "clientInfo": {"name": "test", "version": "1"}})
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        asked = server.read()
        server.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"roots": [
            {"uri": bad}, {"uri": root.as_uri()}]}})
        assert not server.call("remember", content="The project uses Poetry.").get("isError")
        assert server.close() == 0
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
    assert (root / ".aml" / "memory.db").is_file()  # the readable root was taken


def test_a_root_folder_this_user_cannot_enter_names_no_project(tmp_path, monkeypatch):
    """(Root may enter any folder, so the refusal is made here as the system makes it.)"""
    from aml_retriever.agents import mcp_server

    def refused(path: object) -> list[str]:
        raise PermissionError(13, "Permission denied")

    assert mcp_server._directory_of({"uri": tmp_path.as_uri()}) == tmp_path.resolve()  # control
    monkeypatch.setattr(mcp_server.os, "listdir", refused)
    assert mcp_server._directory_of({"uri": tmp_path.as_uri()}) is None
