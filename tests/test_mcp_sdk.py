"""The MCP server driven by the official MCP Python SDK client over a real pipe: the SDK negotiates,
lists the tools, calls each one and validates every structured result against the tool's output
schema; tool errors reach it as errors; its default client falls back from the newer discovery
probe to the initialize handshake. The SDK is a test-only dependency (scripts/run_tests.sh
installs it); without it these tests skip."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

try:
    import anyio
    from mcp.client.client import Client
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    try:
        from mcp.shared.exceptions import MCPError
    except ImportError:  # the name before SDK 2
        from mcp.shared.exceptions import McpError as MCPError
except ImportError as missing:
    pytest.skip(f"the official MCP Python SDK is not installed ({missing}); "
                "scripts/run_tests.sh installs it with `pip install mcp`", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent


def server_parameters(tmp_path: Path, project: str = "project") -> StdioServerParameters:
    (tmp_path / project).mkdir(exist_ok=True)
    return StdioServerParameters(
        command=sys.executable, cwd=str(ROOT),
        args=["-m", "aml_retriever", "mcp", "--project-root", str(tmp_path / project),
              "--global-root", str(tmp_path / "account"), "--log-level", "WARNING"])


def run(scenario: Any, *args: Any) -> Any:
    async def bounded() -> Any:
        with anyio.fail_after(30):
            return await scenario(*args)

    return anyio.run(bounded)


def test_the_sdk_client_negotiates_lists_and_calls_every_tool(tmp_path):
    async def scenario() -> None:
        async with stdio_client(server_parameters(tmp_path)) as (read, write), \
                ClientSession(read, write) as session:
            initialized = await session.initialize()
            assert initialized.protocol_version == "2025-11-25"
            assert initialized.server_info.name == "aml_retriever"
            tools = (await session.list_tools()).tools
            assert [t.name for t in tools] == ["remember", "update", "recall", "forget", "recent",
                                               "history", "handoff"]
            assert all(t.output_schema for t in tools)
            await session.send_ping()

            # call_tool validates each structured result against the tool's output schema.
            stored = await session.call_tool("remember", {"content": "The user deploys on Fridays.",
                                                          "kind": "habit"})
            assert not stored.is_error
            assert stored.structured_content["statement"]["id"] == "local:1"
            await session.call_tool("remember", {"content": "The user's name is Ana.",
                                                 "scope": "global"})
            found = await session.call_tool("recall", {"query": "When does the user deploy?"})
            assert found.structured_content["results"][0]["id"] == "local:1"
            recent = await session.call_tool("recent", {"limit": 5})
            assert [r["id"] for r in recent.structured_content["results"]] == ["global:1", "local:1"]
            forgotten = await session.call_tool("forget", {"id": "local:1"})
            assert forgotten.structured_content["forgotten"]["id"] == "local:1"
            found = await session.call_tool("recall", {"query": "deploys Fridays"})
            assert found.structured_content["results"] == []

    run(scenario)


def test_the_sdk_client_keeps_a_changing_fact_current_and_reads_its_history(tmp_path):
    async def scenario() -> None:
        async with stdio_client(server_parameters(tmp_path)) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("remember", {"content": "The project targets Python 3.10."})
            await session.call_tool("remember", {"content": "Redis caches sessions."})
            updated = await session.call_tool("update", {"id": "local:1", "content":
                                                         "The project targets Python 3.12."})
            assert not updated.is_error, updated.content
            assert updated.structured_content["replaced"]["superseded_by"] == "local:3"
            found = await session.call_tool("recall", {"query": "which python version"})
            assert [r["id"] for r in found.structured_content["results"]] == ["local:3"]
            past = await session.call_tool("recall", {"query": "which python version",
                                                      "include_history": True})
            assert {r["id"] for r in past.structured_content["results"]} == {"local:1", "local:3"}
            history = await session.call_tool("history", {"id": "local:3"})
            assert [v["id"] for v in history.structured_content["versions"]] == ["local:1", "local:3"]
            assert [e["action"] for e in history.structured_content["events"]] == [
                "remember", "update"]
            await session.call_tool("handoff", {"content": "Next: drop Python 3.10 from CI."})
            first = await session.call_tool("recent", {"limit": 2})
            assert first.structured_content["results"][0]["kind"] == "handoff"
            cursor = first.structured_content["next_cursor"]
            rest = await session.call_tool("recent", {"limit": 2, "cursor": cursor})
            assert [r["id"] for r in rest.structured_content["results"]] == ["local:2"]
            assert rest.structured_content["next_cursor"] is None
            proposed = await session.call_tool("remember", {"content": "The user seems to like "
                                                            "short answers.", "origin": "agent"})
            assert proposed.structured_content["statement"]["trust"] == "proposed"

    run(scenario)


def test_the_sdk_client_accepts_answers_a_word_budget_cut_short_and_pages_on(tmp_path):
    words = ("release", "budget", "window", "schema", "answer", "worker")
    statements = [f"Statement {i}: " + " ".join(words[(i + j) % 6] for j in range(1350))
                  for i in range(4)]  # ~1,350 words each: only one fits the default budget

    async def scenario() -> None:
        async with stdio_client(server_parameters(tmp_path)) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            for content in statements:
                assert not (await session.call_tool("remember", {"content": content})).is_error
            # call_tool validates each structured result against the tool's output schema.
            found = await session.call_tool("recall", {"query": "release budget", "limit": 4})
            assert len(found.structured_content["results"]) == 1
            assert found.structured_content["omitted"] == 3
            listed, cursor = [], None
            while True:
                page = await session.call_tool("recent", {"limit": 4, **(
                    {"cursor": cursor} if cursor else {})})
                listed += [r["content"] for r in page.structured_content["results"]]
                cursor = page.structured_content["next_cursor"]
                if cursor is None:
                    break
            assert listed == statements[::-1]
            history = await session.call_tool("history", {"id": "local:1", "max_words": 1})
            assert history.structured_content["words"] > 1

    run(scenario)


def test_an_oversized_call_is_answered_so_the_sdk_client_does_not_wait(tmp_path):
    async def scenario() -> None:
        async with stdio_client(server_parameters(tmp_path)) as (read, write), \
                ClientSession(read, write, read_timeout_seconds=20) as session:
            await session.initialize()
            with pytest.raises(MCPError, match="at most"):
                await session.call_tool("remember", {"content": "x" * (2 * 1024 * 1024)})
            assert not (await session.call_tool("remember", {"content": "Still here."})).is_error

    run(scenario)


def test_tool_errors_reach_the_sdk_client_as_errors_and_the_session_goes_on(tmp_path):
    async def scenario() -> None:
        async with stdio_client(server_parameters(tmp_path)) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            refused = await session.call_tool("recall", {"query": "x", "limit": 0})
            assert refused.is_error and refused.content[0].text == (
                "limit must be an integer from 1 to 100")
            unknown = await session.call_tool("remember", {"content": "ok", "colour": "red"})
            assert unknown.is_error and "'colour'" in unknown.content[0].text
            missing = await session.call_tool("forget", {"id": "global:9"})
            assert missing.is_error and "use recall or recent" in missing.content[0].text
            assert not (await session.call_tool("recent", {})).is_error

    run(scenario)


def test_the_sdk_default_client_falls_back_from_discovery_to_the_handshake(tmp_path):
    async def scenario() -> None:
        async with Client(server_parameters(tmp_path)) as client:
            assert client.session.protocol_version == "2025-11-25"
            result = await client.call_tool("remember", {"content": "Probed, then initialized."})
            assert not result.is_error

    run(scenario)


def test_two_sdk_sessions_on_two_projects_share_only_the_global_memory(tmp_path):
    async def remember_and_recall(project: str, local: str) -> set[str]:
        async with stdio_client(server_parameters(tmp_path, project)) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("remember", {"content": local})
            if project == "alpha":
                await session.call_tool("remember", {"content": "Shared: the user is Ana.",
                                                     "scope": "global"})
            found = await session.call_tool("recent", {})
            return {r["content"] for r in found.structured_content["results"]}

    async def scenario() -> None:
        assert await remember_and_recall("alpha", "Alpha note.") == {
            "Alpha note.", "Shared: the user is Ana."}
        assert await remember_and_recall("beta", "Beta note.") == {
            "Beta note.", "Shared: the user is Ana."}

    run(scenario)
