"""The MCP tools in process: their schemas are valid JSON Schema that any client accepts, every
argument is checked by name (the checker agrees with a JSON Schema validator), every refusal is a
tool error telling the agent what to do, results match their output schemas, and recall, recent
and history answer within a word budget by default. tools/list, which an agent pays for in every
session, is at most half what it was, and still says everything it said besides prose."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import o200k_oracle
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from o200k_oracle import count

from aml_retriever.agents.mcp_server import (
    ANNOTATION_DEFAULTS,
    MAX_CONTENT_CHARS,
    MAX_QUERY_CHARS,
    PROTOCOL_VERSIONS,
    TOOLS,
    McpServer,
    _conforms,
)
from aml_retriever.agents.scopes import DEFAULT_MAX_WORDS, MAX_WORDS, ScopedMemory, statement_words


@pytest.fixture
def server(tmp_path: Path):
    memory = ScopedMemory.at(tmp_path / "project", tmp_path / "account")
    yield McpServer(memory)
    memory.close()


def call(server: McpServer, tool: str, **arguments: Any) -> dict[str, Any]:
    answer = server.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                            "params": {"name": tool, "arguments": arguments}})
    assert answer is not None and "result" in answer, answer
    return answer["result"]


def error_text(result: dict[str, Any]) -> str:
    assert result["isError"] is True
    return result["content"][0]["text"]


def test_tool_names_and_schemas_are_valid_and_narrow(server):
    tools = server.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})["result"]["tools"]
    assert [t["name"] for t in tools] == ["remember", "update", "recall", "forget", "recent",
                                          "history", "handoff"]
    for tool in tools:
        assert re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", tool["name"])
        for schema in (tool["inputSchema"], tool["outputSchema"]):
            jsonschema.Draft202012Validator.check_schema(schema)
            assert schema["type"] == "object"
        inputs = tool["inputSchema"]
        assert inputs["additionalProperties"] is False
        # Some clients refuse combinators at the top of an input schema.
        assert not {"oneOf", "anyOf", "allOf"} & set(inputs)
        # A description where name and schema do not say it all; none that is empty.
        assert all(p.get("description", "x") for p in inputs["properties"].values())
        assert len(tool["description"]) > 60 and tool["title"]
        assert "title" not in tool["annotations"]  # said once, as the tool's title
        if tool["name"] in ("recall", "recent", "history"):  # bounded, and saying so
            assert inputs["properties"]["max_words"]["maximum"] == MAX_WORDS
            assert "Whole" in tool["description"] and "max_words" in tool["description"]
            assert "omitted counts the rest" in tool["description"]
            assert {"omitted", "words", "note"} <= set(tool["outputSchema"]["properties"])
            assert "omitted" not in tool["outputSchema"]["required"]


# ---- what tools/list costs an agent, and what it still says -----------------------------------

# tools/list at the newest revision before its descriptions were cut, as the server writes it
# (compact JSON, UTF-8): 22,283 bytes, 5,332 o200k_base tokens.
BEFORE_BYTES, BEFORE_TOKENS = 22_283, 5_332
@pytest.fixture(scope="module")
def o200k(tmp_path_factory: pytest.TempPathFactory):
    return o200k_oracle.encoding(tmp_path_factory)


def listed(server: McpServer) -> dict[str, Any]:
    return server.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})["result"]


def as_written(result: dict[str, Any]) -> str:
    """As StdioTransport writes it."""
    return json.dumps(result, ensure_ascii=False, separators=(",", ":"))


def test_tools_list_is_at_most_half_its_former_size_in_bytes(server):
    """Before: 22,283 bytes (23,474 as json.dumps writes it with its default spaces, the 23.5 KB
    an outside tester measured). At most half of each now."""
    result = listed(server)
    assert len(as_written(result).encode("utf-8")) <= BEFORE_BYTES // 2
    assert len(json.dumps(result).encode("utf-8")) <= 23_474 // 2


def test_tools_list_is_at_most_half_its_former_size_in_tokens(server, o200k):
    """Before: 5,332 o200k_base tokens. At most half now."""
    assert count(o200k, as_written(listed(server))) <= BEFORE_TOKENS // 2


# What tools/list said before its descriptions were cut, descriptions aside: every argument's
# schema (type, enum, default, bounds, pattern), the required lists, the answers' schemas, the
# titles and the hints. All of it must still be said.
_TEXT = {"type": "string", "minLength": 1, "pattern": r"\S"}
_ID = {"type": "string", "pattern": "^(local|global):[1-9][0-9]{0,17}$"}
_SCOPE = {"type": "string", "enum": ["local", "global"]}
_KIND = {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_-]{0,31}$"}
_LIMIT = {"type": "integer", "minimum": 1, "maximum": 100, "default": 10}
_MAX_WORDS = {"type": "integer", "minimum": 1, "maximum": 4000, "default": 2000}
_TIME = {"type": "string", "minLength": 4, "maxLength": 40,
         "pattern": r"^\d{4}-\d{2}-\d{2}([T ][0-9:.]+(Z|[+-]\d{2}:?\d{2})?)?$"}
_FLAG = {"type": "boolean"}
BEFORE_ARGUMENTS = {
    "remember": {"content": {**_TEXT, "maxLength": 10_000}, "scope": _SCOPE, "kind": _KIND,
                 "origin": {"type": "string", "enum": ["user", "agent"]}, "force": _FLAG},
    "update": {"id": _ID, "content": {**_TEXT, "maxLength": 10_000}, "kind": _KIND},
    "recall": {"query": {**_TEXT, "maxLength": 2_000}, "limit": _LIMIT, "scope": _SCOPE,
               "kind": _KIND, "as_of": _TIME, "since": _TIME, "until": _TIME,
               "include_history": _FLAG, "include_proposed": _FLAG, "max_words": _MAX_WORDS},
    "forget": {"id": _ID, "text": {**_TEXT, "maxLength": 10_000}, "scope": _SCOPE},
    "recent": {"limit": _LIMIT, "scope": _SCOPE, "kind": _KIND,
               "cursor": {"type": "string", "minLength": 1, "maxLength": 200,
                          "pattern": "^[A-Za-z0-9_-]+$"}, "max_words": _MAX_WORDS},
    "history": {"id": _ID, "limit": _LIMIT, "max_words": _MAX_WORDS},
    "handoff": {"content": {**_TEXT, "maxLength": 10_000}},
}
BEFORE_REQUIRED = {"remember": ["content"], "update": ["id", "content"], "recall": ["query"],
                   "forget": [], "recent": [], "history": ["id"], "handoff": []}
_STRING = {"type": "string"}
_COUNT = {"type": "integer", "minimum": 0}
_FIELDS = {"id": _STRING, "scope": _SCOPE, "content": _STRING, "kind": _STRING, "time": _STRING,
           "valid_from": _STRING, "origin": {"type": "string", "enum": ["user", "agent"]},
           "trust": {"type": "string", "enum": ["confirmed", "proposed"]},
           "superseded_by": _STRING}
_REQUIRED = ["id", "scope", "content", "kind", "time", "valid_from", "origin", "trust"]
_STATEMENT = {"type": "object", "properties": _FIELDS, "required": _REQUIRED}
_CHANGED = {"type": "object", "properties": {"statement": _STATEMENT, "replayed": _FLAG,
                                             "note": _STRING, "replaced": _STATEMENT},
            "required": ["statement", "replayed"]}
_BUDGET = {"omitted": _COUNT, "words": _COUNT, "note": _STRING}
_STRINGS = {"type": "array", "items": _STRING}
BEFORE_OUTPUTS = {
    "remember": _CHANGED,
    "update": _CHANGED,
    "recall": {"type": "object", "properties": {
        "results": {"type": "array", "items": {
            "type": "object", "properties": {**_FIELDS, "score": {"type": "number"},
                                             "match": {"type": "number"},
                                             "why": _STRINGS, "matched": _STRINGS},
            "required": [*_REQUIRED, "score", "match", "why", "matched"]}}, **_BUDGET},
        "required": ["results"]},
    "forget": {"type": "object", "properties": {"forgotten": _STATEMENT},
               "required": ["forgotten"]},
    "recent": {"type": "object", "properties": {
        "results": {"type": "array", "items": _STATEMENT},
        "next_cursor": {"type": ["string", "null"]}, **_BUDGET},
        "required": ["results", "next_cursor"]},
    "history": {"type": "object", "properties": {
        "versions": {"type": "array", "items": _STATEMENT},
        "events": {"type": "array", "items": {"type": "object", "properties": {
            "seq": {"type": "integer"}, "at": _STRING, "action": _STRING, "actor": _STRING,
            "message_ids": _STRINGS, "content_hash": _STRING}}},
        **_BUDGET, "omitted_events": _COUNT}, "required": ["versions", "events"]},
    "handoff": {"type": "object", "properties": {"handoff": {"type": ["object", "null"]},
                                                 "replaced": _STATEMENT},
                "required": ["handoff"]},
}
TITLES = {"remember": "Remember a statement", "update": "Update a statement",
          "recall": "Recall statements", "forget": "Forget a statement",
          "recent": "Recent statements", "history": "History of a statement",
          "handoff": "Hand off to the next session"}
_WRITES = {"readOnlyHint": False, "openWorldHint": False}
_READS = {"readOnlyHint": True, "openWorldHint": False}
BEFORE_HINTS = {"remember": {**_WRITES, "destructiveHint": False, "idempotentHint": True},
                "update": {**_WRITES, "destructiveHint": False, "idempotentHint": True},
                "recall": _READS,
                "forget": {**_WRITES, "destructiveHint": True, "idempotentHint": True},
                "recent": _READS, "history": _READS,
                "handoff": {**_WRITES, "destructiveHint": False, "idempotentHint": True}}


def facts(schema: Any, definitions: dict[str, Any] | None = None) -> Any:
    """A schema without its descriptions, its references to its own $defs written out."""
    if isinstance(schema, list):
        return [facts(item, definitions) for item in schema]
    if not isinstance(schema, dict):
        return schema
    definitions = {**(definitions or {}), **schema.get("$defs", {})}
    if "$ref" in schema:
        return facts(definitions[schema["$ref"].removeprefix("#/$defs/")], definitions)
    return {key: facts(value, definitions) for key, value in schema.items()
            if key not in ("description", "$defs")}


def hints(annotations: dict[str, Any]) -> dict[str, Any]:
    """The hints a client reads: one left out has the default the MCP specification gives it."""
    return {**ANNOTATION_DEFAULTS, **{k: v for k, v in annotations.items() if k != "title"}}


def test_every_tool_argument_and_answer_says_what_it_said_before(server):
    """Cutting the descriptions lost nothing else: the same tools, each with a description, the
    same arguments with the same schema keys, enums, defaults and bounds, the same required lists,
    the same answers, titles and hints."""
    tools = listed(server)["tools"]
    assert [t["name"] for t in tools] == list(BEFORE_ARGUMENTS)
    for tool in tools:
        name = tool["name"]
        assert isinstance(tool["description"], str) and tool["description"].strip()
        properties = tool["inputSchema"]["properties"]
        assert facts(properties) == BEFORE_ARGUMENTS[name], name
        assert all(isinstance(p.get("description", "x"), str) and p.get("description", "x").strip()
                   for p in properties.values())
        assert tool["inputSchema"]["required"] == BEFORE_REQUIRED[name]
        assert tool["inputSchema"]["additionalProperties"] is False
        assert facts(tool["outputSchema"]) == BEFORE_OUTPUTS[name], name
        assert tool["title"] == TITLES[name]
        assert hints(tool["annotations"]) == hints(BEFORE_HINTS[name]), name


def test_the_facts_check_can_fail(server):
    """A lost bound, enum value or required name, or an answer's field, is caught."""
    tools = listed(server)["tools"]
    recall = next(t for t in tools if t["name"] == "recall")
    inputs = json.loads(json.dumps(recall["inputSchema"]["properties"]))
    del inputs["limit"]["maximum"]
    assert facts(inputs) != BEFORE_ARGUMENTS["recall"]
    inputs = json.loads(json.dumps(recall["inputSchema"]["properties"]))
    inputs["scope"]["enum"] = ["local"]
    assert facts(inputs) != BEFORE_ARGUMENTS["recall"]
    remember = next(t for t in tools if t["name"] == "remember")
    output = json.loads(json.dumps(remember["outputSchema"]))
    output["$defs"]["statement"]["required"].remove("trust")
    assert facts(output) != BEFORE_OUTPUTS["remember"]
    assert hints({"openWorldHint": False}) != hints(BEFORE_HINTS["remember"])


def test_results_match_their_output_schemas_and_repeat_as_text(server):
    outputs = {name: tool.output for name, tool in TOOLS.items()}
    results = {
        "remember": call(server, "remember", content="The user likes jq.", kind="preference"),
        "handoff": call(server, "handoff", content="Next: wire the jq filter."),
        "recall": call(server, "recall", query="jq", limit=5, include_history=True),
        "recent": call(server, "recent", limit=1),
        "update": call(server, "update", id="local:1", content="The user likes jq and yq."),
        "history": call(server, "history", id="local:1"),
        "forget": call(server, "forget", id="local:3"),
    }
    for name, result in results.items():
        assert result["isError"] is False
        jsonschema.validate(result["structuredContent"], outputs[name])
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert results["recall"]["structuredContent"]["results"][0]["id"] == "local:1"
    assert results["recent"]["structuredContent"]["next_cursor"] is not None
    assert [v["id"] for v in results["history"]["structuredContent"]["versions"]] == [
        "local:1", "local:3"]
    for name in ("recall", "recent", "history"):  # a small memory: nothing left out, nothing said
        assert "omitted" not in results[name]["structuredContent"]


def long_statement(i: int) -> str:
    """A statement of 10,000 characters: about 1,500 words of prose, distinct per i."""
    words = ("release", "budget", "window", "schema", "answer", "worker", "deploy", "store")
    return f"Statement {i}: " + " ".join(words[(i * j) % 8] for j in range(1, 2000))[:9_980]


def test_recall_recent_and_history_answer_within_the_default_budget(server):
    for i in range(100):
        call(server, "remember", content=long_statement(i), scope="global" if i % 2 else "local")
    current = "local:1"
    for version in range(3):
        current = call(server, "update", id=current, content=long_statement(1000 + version))[
            "structuredContent"]["statement"]["id"]
    outputs = {name: tool.output for name, tool in TOOLS.items()}
    answers = {"recall": call(server, "recall", query="release budget", limit=100),
               "recent": call(server, "recent", limit=100),
               "history": call(server, "history", id=current)}
    for name, result in answers.items():
        answer = result["structuredContent"]
        jsonschema.validate(answer, outputs[name])
        listed = answer["results"] if name != "history" else answer["versions"]
        assert answer["words"] == sum(statement_words(r["content"]) for r in listed)
        assert answer["words"] <= DEFAULT_MAX_WORDS and answer["omitted"] > 0 and answer["note"]
        # Before: limit 100 of these answered a megabyte.
        assert len(result["content"][0]["text"]) < 25_000
    assert answers["recall"]["structuredContent"]["omitted"] == 100 - len(
        answers["recall"]["structuredContent"]["results"])
    assert answers["history"]["structuredContent"]["omitted_events"] > 0
    # The agent can ask for more, within bounds, or less.
    more = call(server, "recall", query="release budget", limit=100, max_words=MAX_WORDS)
    assert len(more["structuredContent"]["results"]) > len(
        answers["recall"]["structuredContent"]["results"])
    one = call(server, "recall", query="release budget", limit=100, max_words=1)["structuredContent"]
    assert len(one["results"]) == 1 and one["words"] > 1 and "alone has" in one["note"]


@pytest.mark.parametrize("tool, arguments, named", [
    ("remember", {}, "content"),
    ("remember", {"content": ""}, "content"),
    ("remember", {"content": " \n\t "}, "content"),
    ("remember", {"content": "x" * (MAX_CONTENT_CHARS + 1)}, "content"),
    ("remember", {"content": 42}, "content"),
    ("remember", {"content": "ok", "scope": "both"}, "scope"),
    ("remember", {"content": "ok", "kind": "two words"}, "kind"),
    ("remember", {"content": "ok", "kind": "k" * 33}, "kind"),
    ("remember", {"content": "ok", "kind": "note\n"}, "kind"),
    ("remember", {"content": "\ud800 lone surrogate"}, "content"),
    ("remember", {"content": "ok", "user_id": "someone"}, "user_id"),
    ("recall", {"query": "q" * (MAX_QUERY_CHARS + 1)}, "query"),
    ("recall", {"query": "q", "limit": 0}, "limit"),
    ("recall", {"query": "q", "limit": 101}, "limit"),
    ("recall", {"query": "q", "limit": "5"}, "limit"),
    ("recall", {"query": "q", "limit": 5.0}, "limit"),
    ("recall", {"query": "q", "limit": True}, "limit"),
    ("recall", {"limit": 5}, "query"),
    ("recent", {"limit": [5]}, "limit"),
    ("recent", {"scope": "LOCAL"}, "scope"),
    ("forget", {"id": "42"}, "id"),
    ("forget", {"id": "local:1", "text": "both given"}, "id"),
    ("forget", {}, "id"),
    ("forget", {"text": ""}, "text"),
    ("remember", {"content": "ok", "origin": "model"}, "origin"),
    ("remember", {"content": "ok", "force": "yes"}, "force"),
    ("remember", {"content": "ok", "kind": "handoff"}, "kind"),
    ("update", {"id": "local:1"}, "content"),
    ("update", {"content": "x"}, "id"),
    ("recall", {"query": "q", "as_of": "yesterday"}, "as_of"),
    ("recall", {"query": "q", "since": "2025-13-45"}, "since"),
    ("recall", {"query": "q", "since": "2025-02-01", "until": "2025-01-01"}, "since"),
    ("recall", {"query": "q", "include_history": 1}, "include_history"),
    ("recent", {"cursor": "not a cursor"}, "cursor"),
    ("recent", {"cursor": "bm90IGpzb24"}, "cursor"),
    ("history", {"id": "local:99"}, "local:99"),
    ("recall", {"query": "q", "max_words": 0}, "max_words"),
    ("recall", {"query": "q", "max_words": MAX_WORDS + 1}, "max_words"),
    ("recall", {"query": "q", "max_words": "2000"}, "max_words"),
    ("recall", {"query": "q", "max_words": 2000.0}, "max_words"),
    ("recent", {"max_words": -1}, "max_words"),
    ("recent", {"max_words": True}, "max_words"),
    ("history", {"id": "local:1", "max_words": 10**9}, "max_words"),
    ("history", {"id": "local:1", "limit": 0}, "limit"),
    ("history", {"id": "local:1", "limit": 101}, "limit"),
])
def test_a_refused_argument_is_a_tool_error_naming_it(server, tool, arguments, named):
    assert re.search(rf"\b{named}\b", error_text(call(server, tool, **arguments)))


def test_refusals_say_what_a_valid_value_is(server):
    assert error_text(call(server, "recall", query="q", limit=0)) == (
        "limit must be an integer from 1 to 100")
    for tool, arguments in (("recall", {"query": "q"}), ("recent", {}), ("history", {"id": "local:1"})):
        assert error_text(call(server, tool, **arguments, max_words=MAX_WORDS + 1)) == (
            "max_words must be an integer from 1 to 4000")
    assert "split a longer text" in error_text(call(server, "remember", content="x" * 10_001))
    assert error_text(call(server, "remember", content="ok", size=1)) == (
        "remember has no argument 'size'; it takes content, scope, kind, origin, force")
    long_name = "n" * 500
    assert len(error_text(call(server, "recent", **{long_name: 1}))) < 120  # not echoed whole


def test_null_stands_for_an_optional_argument_left_out(server):
    result = call(server, "remember", content="Nulls are fine.", scope=None, kind=None)
    assert result["structuredContent"]["statement"]["id"] == "local:1"
    assert call(server, "recall", query="nulls", limit=None, scope=None)["isError"] is False
    assert "content is required" in error_text(call(server, "remember", content=None))


def test_a_failing_store_is_a_tool_error_and_the_server_keeps_serving(server, tmp_path):
    project = tmp_path / "project" / ".aml"
    project.mkdir(parents=True)
    (project / "memory.db").write_bytes(b"not a database at all" * 100)
    text = error_text(call(server, "remember", content="Goes nowhere."))
    assert "not a usable aml_retriever store" in text
    assert call(server, "remember", content="Goes global.", scope="global")["isError"] is False


def test_an_unexpected_failure_is_a_tool_error_without_details(server, monkeypatch, caplog):
    def broken(*_: Any) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(ScopedMemory, "recent", broken)
    text = error_text(call(server, "recent"))
    assert "failed unexpectedly" in text and "disk on fire" not in text
    assert "disk on fire" in caplog.text  # the log has the details
    assert call(server, "recall", query="still serving")["isError"] is False


def test_before_structured_output_tools_have_no_output_schema_or_title(server):
    answer = server.handle({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                            "params": {"protocolVersion": "2025-03-26"}})
    assert answer["result"]["protocolVersion"] == "2025-03-26"
    tools = server.handle({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})["result"]["tools"]
    assert all("outputSchema" not in t and "title" not in t for t in tools)
    assert [t["annotations"]["title"] for t in tools] == [TITLES[t["name"]] for t in tools]
    result = call(server, "remember", content="Plain text only.")
    assert "structuredContent" not in result
    assert json.loads(result["content"][0]["text"])["statement"]["id"] == "local:1"


@pytest.mark.parametrize("version", PROTOCOL_VERSIONS)
def test_initialize_answers_a_supported_revision_with_itself(server, version):
    answer = server.handle({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                            "params": {"protocolVersion": version, "capabilities": {}}})
    assert answer["result"]["protocolVersion"] == version


# ---- the argument checker agrees with a JSON Schema validator --------------------------------

ARGUMENT_SCHEMAS = [(f"{tool.name}.{a.name}", a.schema) for tool in TOOLS.values()
                    for a in tool.arguments]
VALUES = st.one_of(
    st.integers(min_value=-5, max_value=205),
    st.booleans(),
    st.text(max_size=40),
    st.text(alphabet="localgbLG:0123456789 _-\n", max_size=20),
    st.sampled_from(["local", "global", "local:42", "preference", "x" * 2001, "k" * 33]),
    st.lists(st.integers(), max_size=2),
)


@pytest.mark.parametrize("name, schema", ARGUMENT_SCHEMAS, ids=[n for n, _ in ARGUMENT_SCHEMAS])
@settings(max_examples=150, deadline=None)
@given(value=VALUES)
def test_the_argument_checker_agrees_with_json_schema(name, schema, value):
    # jsonschema evaluates patterns with Python's re, whose $ also matches before a final
    # newline; ECMA-262, the dialect JSON Schema names (and the checker follows), does not.
    if isinstance(value, str) and value.endswith("\n") and schema.get("pattern", "").endswith("$"):
        return
    assert _conforms(value, schema) == jsonschema.Draft202012Validator(schema).is_valid(value)
