"""The memory tools for agents: a Model Context Protocol server on stdio, standard library only.

Transport: newline-delimited JSON-RPC 2.0 on stdin and stdout, one message per line (json.dumps
never writes a raw newline). stdout carries protocol only: while serving, `sys.stdout` points at
stderr, so a stray print lands in the log instead of corrupting the stream. Logs go to stderr and
name methods, tools and outcomes, never content or queries.

Lifecycle: `initialize` negotiates the revision (the client's when it is one of
PROTOCOL_VERSIONS, else the newest here); `ping` answers {}; `tools/list` and `tools/call` serve
the tools. Nothing depends on the handshake, so a request before it is served at the newest
revision. End of input, SIGTERM and SIGINT end the server cleanly (exit 0); a message being
handled is finished and answered first.

Batches (a JSON array of messages) get an array of the answers, as JSON-RPC 2.0 says: revision
2025-03-26 requires them, later revisions dropped them, and answering one harms no client.

Errors: a message that is not JSON, not a request, names an unknown method or carries malformed
params is a JSON-RPC error (-32700, -32600, -32601, -32602). A tool that cannot do what it was
asked (a refused argument, an unknown id, ambiguous text, an unusable store) answers a result
with `isError: true` and a message that tells the agent what to do instead: revision 2025-11-25
reports argument errors that way so the model can correct its call. Nothing a client sends stops
the server.
"""

from __future__ import annotations

import json
import logging
import re
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, BinaryIO

from aml_retriever import __version__
from aml_retriever.agents.scopes import (
    DEFAULT_KIND,
    DEFAULT_MAX_WORDS,
    HANDOFF_KIND,
    MAX_WORDS,
    SCOPES,
    AmbiguousText,
    ScopedMemory,
)
from aml_retriever.common.errors import AmlError, InvalidField
from aml_retriever.memory.lifecycle import ORIGINS
from aml_retriever.memory.validation import TOP_K_DEFAULT, TOP_K_MAX, is_text, parse_timestamp
from aml_retriever.storage.timeline import ReadFilter

log = logging.getLogger("aml_retriever.mcp")

# Newest first; the first is answered to a client asking for a revision not listed here.
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
# The revisions with structured tool output (outputSchema, structuredContent) and tool titles.
STRUCTURED_VERSIONS = frozenset({"2025-11-25", "2025-06-18"})

# The largest message read, as the HTTP service's default body limit; a longer line is refused
# and skipped without being held in memory.
MAX_MESSAGE_BYTES = 1_048_576
# One statement, not a document: a longer text is better remembered as several statements, each
# findable on its own.
MAX_CONTENT_CHARS = 10_000
# A query looks up at most 64 terms (candidates.MAX_QUERY_TERMS); this bounds the text.
MAX_QUERY_CHARS = 2_000

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = (
    -32700, -32600, -32601, -32602, -32603)

INSTRUCTIONS = (
    "Long-term memory that outlives the conversation. Call recent when a session starts; call "
    "recall before answering from what was said in earlier sessions; remember durable facts, "
    "decisions and preferences as short self-contained statements; forget what is wrong or "
    "outdated. scope 'local' is this project's memory, 'global' the user's across projects.")


# ---- tools ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Argument:
    """One tool argument: its JSON Schema, and the rule an error states when a value breaks it."""

    name: str
    schema: dict[str, Any]
    rule: str

    def check(self, value: Any) -> None:
        if isinstance(value, str) and not is_text(value):
            raise InvalidField(f"{self.name} must be valid Unicode text (no lone surrogates)",
                               self.name)
        if not _conforms(value, self.schema):
            raise InvalidField(f"{self.name} {self.rule}", self.name)


def _conforms(value: Any, schema: dict[str, Any]) -> bool:
    """Whether a value meets the subset of JSON Schema the tool arguments use."""
    if schema["type"] == "boolean":
        return isinstance(value, bool)
    if schema["type"] == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)
                and schema["minimum"] <= value <= schema["maximum"])
    if not isinstance(value, str):
        return False
    if "enum" in schema:
        return value in schema["enum"]
    pattern = schema.get("pattern", "")
    # JSON Schema's $ (ECMA-262) matches only at the very end; Python's also before a final newline.
    pattern = pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern
    return (schema.get("minLength", 0) <= len(value) <= schema.get("maxLength", len(value))
            and re.search(pattern, value) is not None)


def _text(name: str, max_chars: int, description: str, what: str, hint: str = "") -> Argument:
    return Argument(name, {"type": "string", "minLength": 1, "maxLength": max_chars,
                           "pattern": r"\S", "description": description},
                    f"must be {what}: a string of 1 to {max_chars} characters, not only "
                    f"whitespace{hint}")


def _scope(description: str) -> Argument:
    return Argument("scope", {"type": "string", "enum": list(SCOPES), "description": description},
                    'must be "local" or "global"')


LIMIT = Argument("limit", {"type": "integer", "minimum": 1, "maximum": TOP_K_MAX,
                           "default": TOP_K_DEFAULT, "description": "How many statements at most."},
                 f"must be an integer from 1 to {TOP_K_MAX}")
# The word budget of recall, recent and history (scopes.DEFAULT_MAX_WORDS says why this default).
MAX_WORDS_ARGUMENT = Argument(
    "max_words", {"type": "integer", "minimum": 1, "maximum": MAX_WORDS,
                  "default": DEFAULT_MAX_WORDS,
                  "description": "The most words of statement text to answer (default "
                                 f"{DEFAULT_MAX_WORDS}, at most {MAX_WORDS}), so the answer fits "
                                 "what the host accepts: a statement that does not fit is left "
                                 "out whole, never cut, and counted in omitted; the first is "
                                 "always answered whole."},
    f"must be an integer from 1 to {MAX_WORDS}")
BUDGETED = (f" Answers hold at most max_words words of statement text (default {DEFAULT_MAX_WORDS}"
            "): a statement is never cut; one that does not fit is left out and counted in "
            "omitted, with a note saying how to read it; the first is always answered whole, and "
            "words over max_words then says it alone is longer.")
_BUDGET = {
    "omitted": {"type": "integer", "minimum": 0,
                "description": "Only when max_words (or history's limit) left something out, or "
                               "the first statement alone is longer: how many statements "
                               "(versions, for history) were left out whole."},
    "words": {"type": "integer", "minimum": 0,
              "description": "With omitted: the words of statement text answered, counted as "
                             "max_words counts them."},
    "note": {"type": "string", "description": "With omitted: what was left out and how to read "
                                              "it (a narrower query, the cursor, max_words)."},
}
BOTH_SCOPES = ("Which memory: 'local' (this project) or 'global' (the user's, across projects). "
               "Leave it out to use both.")


def _object(properties: dict[str, Any], optional: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties,
            "required": [name for name in properties if name not in optional]}


def _flag(name: str, description: str) -> Argument:
    return Argument(name, {"type": "boolean", "description": description}, "must be true or false")


def _time(name: str, description: str) -> Argument:
    return Argument(name, {"type": "string", "minLength": 4, "maxLength": 40,
                           "pattern": r"^\d{4}-\d{2}-\d{2}([T ][0-9:.]+(Z|[+-]\d{2}:?\d{2})?)?$",
                           "description": description},
                    "must be an ISO 8601 date or time, such as 2025-03-01 or 2025-03-01T12:00:00Z")


STATEMENT_ID_ARGUMENT = Argument(
    "id", {"type": "string", "pattern": "^(local|global):[1-9][0-9]{0,17}$",
           "description": "The statement's id as recall or recent return it."},
    "must be a statement id as recall or recent return it, such as local:42")
KIND = Argument("kind", {"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9_-]{0,31}$",
                         "description": "Optional label, e.g. fact, preference, decision, identity "
                                        f"(default {DEFAULT_KIND}). A query naming it favours "
                                        f"statements of that kind; '{HANDOFF_KIND}' is reserved."},
                "must be a short label: a letter, then at most 31 letters, digits, - or _ "
                "(e.g. preference)")
CONTENT = _text("content", MAX_CONTENT_CHARS, "The statement to remember, self-contained.",
                "the statement to remember", "; split a longer text into several statements")

_STATEMENT = {
    "id": {"type": "string", "description": "The statement's id, e.g. local:42; forget takes it."},
    "scope": {"type": "string", "enum": list(SCOPES)},
    "content": {"type": "string", "description": "The statement as it was remembered."},
    "kind": {"type": "string"},
    "time": {"type": "string", "description": "When it was remembered, ISO 8601 UTC."},
    "valid_from": {"type": "string", "description": "When it became true: a date the statement "
                                                    "names, else when it was remembered."},
    "origin": {"type": "string", "enum": list(ORIGINS),
               "description": "user: a person said it; agent: an agent inferred it."},
    "trust": {"type": "string", "enum": ["confirmed", "proposed"],
              "description": "proposed: inferred and not yet confirmed by a person."},
    "superseded_by": {"type": "string", "description": "The statement that replaced this one "
                                                       "(only on replaced versions)."},
}
STATEMENT = _object(_STATEMENT, ("superseded_by",))
RECALLED = _object({**_STATEMENT,
                    "score": {"type": "number", "description": "The share of the query's "
                              "weight it holds, 0 to 1: each query word weighed by how rare it "
                              "is in the memories, so a word every statement holds counts for "
                              "almost nothing. Comparable across memories; higher is better."},
                    "why": {"type": "array", "items": {"type": "string"},
                            "description": "The signals that matched it."},
                    "matched": {"type": "array", "items": {"type": "string"},
                                "description": "The query's words it holds."}},
                   ("superseded_by",))
CHANGED = _object({"statement": STATEMENT, "replayed": {"type": "boolean"},
                   "note": {"type": "string"}, "replaced": STATEMENT}, ("note", "replaced"))
EVENT = {"type": "object", "properties": {
    "seq": {"type": "integer"}, "at": {"type": "string"}, "action": {"type": "string"},
    "actor": {"type": "string"}, "message_ids": {"type": "array", "items": {"type": "string"}},
    "content_hash": {"type": "string"}}}
WRITES = {"readOnlyHint": False, "openWorldHint": False}
READS = {"readOnlyHint": True, "openWorldHint": False}


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    arguments: tuple[Argument, ...]
    required: tuple[str, ...]
    output: dict[str, Any]
    annotations: dict[str, bool]
    run: Callable[[ScopedMemory, dict[str, Any]], dict[str, Any]]

    def describe(self, structured: bool) -> dict[str, Any]:
        """The tools/list entry; revisions before structured output get no title or outputSchema."""
        described: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": {"type": "object",
                            "properties": {a.name: a.schema for a in self.arguments},
                            "required": list(self.required), "additionalProperties": False},
            "annotations": {"title": self.title, **self.annotations},
        }
        if structured:
            described.update(title=self.title, outputSchema=self.output)
        return described

    def parse(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments given, checked by name; null stands for an optional argument left out."""
        known = {a.name: a for a in self.arguments}
        unknown = sorted(set(arguments) - set(known))
        if unknown:
            raise InvalidField(f"{self.name} has no argument {_shown(unknown[0])}; it takes "
                               f"{', '.join(known)}", unknown[0])
        given = {name: value for name, value in arguments.items() if value is not None}
        for name in self.required:
            if name not in given:
                raise InvalidField(f"{name} is required and {known[name].rule}", name)
        for name, value in given.items():
            known[name].check(value)
        return given


def _shown(name: str) -> str:
    """An argument name as quoted in an error: cut short, so a long name is not echoed whole."""
    return repr(name if len(name) <= 40 else name[:40] + "...")


def _read(a: dict[str, Any], default: ReadFilter) -> ReadFilter:
    """The timeline arguments of recall (already checked against their schemas)."""
    return ReadFilter(as_of_ms=parse_timestamp(a.get("as_of"), "as_of"),
                      since_ms=parse_timestamp(a.get("since"), "since"),
                      until_ms=parse_timestamp(a.get("until"), "until"),
                      include_history=a.get("include_history", False),
                      include_proposed=a.get("include_proposed", default.include_proposed),
                      kind=a.get("kind"))


TOOLS: dict[str, Tool] = {tool.name: tool for tool in (
    Tool("remember", "Remember a statement",
         "Keep one statement in long-term memory so that later sessions can recall it. Write it "
         "self-contained, as it should read later (e.g. 'The user prefers pytest over "
         "unittest.'). scope 'local' (default) keeps it with this project only; 'global' keeps "
         "it for the user across every project (who they are, standing preferences). "
         "Remembering the same statement again (case and spacing aside) returns the stored one "
         "(replayed: true) instead of a copy. When a fact changed, call update on the old "
         "statement instead. origin 'agent' marks something you inferred rather than were told: "
         "it stays proposed until a person confirms it. A statement that was forgotten or "
         "rejected is refused unless force is true.",
         (CONTENT,
          _scope("Where to keep it: 'local' (this project, the default) or 'global' (the "
                 "user, across projects)."),
          KIND,
          Argument("origin", {"type": "string", "enum": list(ORIGINS),
                              "description": "user (default): a person said it; agent: you "
                                             "inferred it (kept as proposed)."},
                   'must be "user" or "agent"'),
          _flag("force", "Remember it even though it was forgotten or rejected before.")),
         ("content",), CHANGED, {**WRITES, "destructiveHint": False, "idempotentHint": True},
         lambda memory, a: memory.remember(a["content"], a.get("scope", "local"),
                                           a.get("kind", DEFAULT_KIND), a.get("origin", "user"),
                                           a.get("force", False))),
    Tool("update", "Update a statement",
         "Replace a statement whose fact changed with its new version (e.g. local:12 'The "
         "project targets Python 3.10.' -> 'The project targets Python 3.12.'). The old version "
         "leaves recall but stays in its history (history, or recall with include_history).",
         (STATEMENT_ID_ARGUMENT, CONTENT, KIND),
         ("id", "content"), CHANGED, {**WRITES, "destructiveHint": False, "idempotentHint": True},
         lambda memory, a: memory.update(a["id"], a["content"], a.get("kind"))),
    Tool("recall", "Recall statements",
         "Search memory for the statements most relevant to a query, best first. Searches this "
         "project's (local) and the user's (global) memory together unless scope is given. When "
         "a fact was restated over time, the newest statement comes first unless the query asks "
         "about the past ('before', 'originally', 'in 2023'). Each result has its id, scope, "
         "kind, times, trust, and why: the signals that matched it (lexical: shares words with "
         "the query; coverage: holds most of its words; entity, number, date: shares a name, "
         "number or date; speaker: its kind is named; segment: remembered together with other "
         "matches; versions: the newest of statements about the same thing). as_of reads the "
         "memory as it was at a past time; since and until keep statements true in that range."
         + BUDGETED,
         (_text("query", MAX_QUERY_CHARS, "What to look for, in words likely to appear in the "
                "statements.", "what to look for"),
          LIMIT, _scope(BOTH_SCOPES),
          Argument("kind", {"type": "string", "pattern": KIND.schema["pattern"],
                            "description": "Only statements of this kind."}, KIND.rule),
          _time("as_of", "Read the memory as it was at this time (ISO 8601)."),
          _time("since", "Only statements true from this time on (ISO 8601)."),
          _time("until", "Only statements true by this time (ISO 8601)."),
          _flag("include_history", "Also return replaced versions (marked superseded_by)."),
          _flag("include_proposed", "Return statements not yet confirmed by a person (marked "
                                    "trust: proposed); the server's setting decides by default."),
          MAX_WORDS_ARGUMENT),
         ("query",), _object({"results": {"type": "array", "items": RECALLED}, **_BUDGET},
                             tuple(_BUDGET)), READS,
         lambda memory, a: memory.recall(a["query"], a.get("limit", TOP_K_DEFAULT), a.get("scope"),
                                         _read(a, memory.default_read()),
                                         a.get("max_words", DEFAULT_MAX_WORDS))),
    Tool("forget", "Forget a statement",
         "Remove exactly one statement from memory, named by its id (from recall or recent, e.g. "
         "local:42) or by its whole text as stored (case, Unicode form and spacing aside; not a "
         "search: to forget by what a statement is about, recall it and forget its id). Give id "
         "or text, not both. If the text is that of several statements, none is removed and "
         "their ids are listed: call again with one id. The "
         "removal is recorded (id, time and a keyed hash, never the text), and remembering the "
         "same text later needs force: true.",
         (STATEMENT_ID_ARGUMENT,
          _text("text", MAX_CONTENT_CHARS, "The statement's whole text as stored (instead of id).",
                "the statement's exact text"),
          _scope("With text: which memory to look in (default both). With id: not needed.")),
         (), _object({"forgotten": STATEMENT}),
         {**WRITES, "destructiveHint": True, "idempotentHint": True},
         lambda memory, a: memory.forget(a.get("id"), a.get("text"), a.get("scope"))),
    Tool("recent", "Recent statements",
         "The newest current statements, newest first: call it when a session starts to pick "
         "up where the last one left off (the last session's handoff comes first). Both "
         "memories unless scope is given. Pass next_cursor back as cursor for the next page: it "
         "continues right after the last statement answered, so a page max_words cut short "
         "loses nothing." + BUDGETED,
         (LIMIT, _scope(BOTH_SCOPES),
          Argument("kind", {"type": "string", "pattern": KIND.schema["pattern"],
                            "description": "Only statements of this kind."}, KIND.rule),
          Argument("cursor", {"type": "string", "minLength": 1, "maxLength": 200,
                              "pattern": "^[A-Za-z0-9_-]+$",
                              "description": "next_cursor from the previous page."},
                   "must be a next_cursor exactly as recent returned it"),
          MAX_WORDS_ARGUMENT),
         (), _object({"results": {"type": "array", "items": STATEMENT},
                      "next_cursor": {"type": ["string", "null"]}, **_BUDGET}, tuple(_BUDGET)),
         READS,
         lambda memory, a: memory.recent(a.get("limit", TOP_K_DEFAULT), a.get("scope"),
                                         a.get("kind"), a.get("cursor"),
                                         a.get("max_words", DEFAULT_MAX_WORDS))),
    Tool("history", "History of a statement",
         "Every version of a statement (what it replaced and what replaced it), oldest first, "
         "and every recorded change to them (remember, update, forget, confirm, reject). At "
         "most limit versions and max_words words of them: the one asked for, then the newest, "
         "and the changes to those; omitted and omitted_events count the rest, never cut.",
         (STATEMENT_ID_ARGUMENT,
          Argument("limit", {**LIMIT.schema, "description": "How many versions at most (the "
                                                              "one asked for, then the newest)."},
                   LIMIT.rule),
          MAX_WORDS_ARGUMENT), ("id",),
         _object({"versions": {"type": "array", "items": STATEMENT},
                  "events": {"type": "array", "items": EVENT}, **_BUDGET,
                  "omitted_events": {"type": "integer", "minimum": 0,
                                     "description": "With omitted: the changes left out, those "
                                                    "about only the versions left out."}},
                 (*_BUDGET, "omitted_events")), READS,
         lambda memory, a: memory.history(a["id"], a.get("limit", TOP_K_DEFAULT),
                                          a.get("max_words", DEFAULT_MAX_WORDS))),
    Tool("handoff", "Hand off to the next session",
         "With content: record what the next session should know first (where the work stands, "
         "what is next), replacing the previous handoff, which stays in history. Without "
         "content: read the current handoff (recent also lists it first).",
         (_text("content", MAX_CONTENT_CHARS, "The handoff note for the next session.",
                "the handoff note"),),
         (), _object({"handoff": {"type": ["object", "null"]}, "replaced": STATEMENT},
                     ("replaced",)),
         {**WRITES, "destructiveHint": False, "idempotentHint": True},
         lambda memory, a: memory.handoff(a.get("content"))),
)}


# ---- JSON-RPC ------------------------------------------------------------------------------

class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def error_response(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _text_result(payload: dict[str, Any], is_error: bool = False) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": json.dumps(payload, ensure_ascii=False)}],
            "isError": is_error}


class McpServer:
    """Answers JSON-RPC messages with the memory tools; knows nothing of the transport."""

    def __init__(self, memory: ScopedMemory) -> None:
        self.memory = memory
        self.version = PROTOCOL_VERSIONS[0]
        self._methods: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "initialize": self._initialize, "ping": lambda _: {},
            "tools/list": self._list_tools, "tools/call": self._call_tool}

    def handle_line(self, line: bytes) -> Any:
        """The answer to one line of input (a message or a batch), or None when none is due."""
        if not line.strip():
            return None
        try:
            message = json.loads(line.decode("utf-8"), parse_constant=_refuse_constant)
        except (UnicodeDecodeError, ValueError, RecursionError):
            return error_response(None, PARSE_ERROR, "not JSON: send one UTF-8 JSON-RPC message "
                                                     "per line")
        if isinstance(message, list):
            if not message:
                return error_response(None, INVALID_REQUEST, "an empty batch")
            answers = [answer for answer in map(self.handle, message) if answer is not None]
            return answers or None
        return self.handle(message)

    def handle(self, message: Any) -> dict[str, Any] | None:
        """The answer to one message; None for a notification or a response."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return error_response(None, INVALID_REQUEST,
                                  'a message must be a JSON object with "jsonrpc": "2.0"')
        if "method" not in message:
            if "id" in message and ("result" in message or "error" in message):
                return None  # a client's answer: this server sends no requests, so none is awaited
            return error_response(None, INVALID_REQUEST, "a request needs a method")
        if "id" not in message:
            return None  # a notification (initialized, cancelled, ...): never answered
        request_id = message["id"]
        if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
            return error_response(None, INVALID_REQUEST, "id must be a string or an integer")
        try:
            return {"jsonrpc": "2.0", "id": request_id, "result": self._dispatch(message)}
        except RpcError as exc:
            return error_response(request_id, exc.code, exc.message)

    def _dispatch(self, message: dict[str, Any]) -> dict[str, Any]:
        method = message["method"]
        if not isinstance(method, str):
            raise RpcError(INVALID_REQUEST, "method must be a string")
        handler = self._methods.get(method)
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, "method not found; this server answers "
                                             f"{', '.join(self._methods)}")
        params = message.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise RpcError(INVALID_PARAMS, "params must be an object")
        return handler(params)

    def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise RpcError(INVALID_PARAMS, "initialize needs params.protocolVersion, a string")
        self.version = requested if requested in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        log.info("initialized at protocol revision %s", self.version)
        return {"protocolVersion": self.version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "aml_retriever", "title": "aml_retriever memory",
                               "version": __version__},
                "instructions": INSTRUCTIONS}

    @property
    def structured(self) -> bool:
        return self.version in STRUCTURED_VERSIONS

    def _list_tools(self, _: dict[str, Any]) -> dict[str, Any]:
        return {"tools": [tool.describe(self.structured) for tool in TOOLS.values()]}

    def _call_tool(self, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        if not isinstance(name, str):
            raise RpcError(INVALID_PARAMS, "tools/call needs params.name, a string")
        tool = TOOLS.get(name)
        if tool is None:
            raise RpcError(INVALID_PARAMS, f"unknown tool; the tools are {', '.join(TOOLS)}")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "params.arguments must be an object")
        started = time.monotonic()
        result = self._run(tool, arguments)
        log.info("tools/call %s %s %.1f ms", name, "error" if result["isError"] else "ok",
                 (time.monotonic() - started) * 1000)
        return result

    def _run(self, tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tool's result; its failures become tool errors the agent can act on."""
        try:
            payload = tool.run(self.memory, tool.parse(arguments))
        except AmbiguousText as exc:
            result = _text_result({"error": exc.message, "matches": exc.matches}, is_error=True)
            if self.structured:
                result["structuredContent"] = {"error": exc.message, "matches": exc.matches}
            return result
        except AmlError as exc:
            return {"content": [{"type": "text", "text": exc.message}], "isError": True}
        except Exception:
            log.exception("tools/call %s failed", tool.name)
            return {"content": [{"type": "text", "text": "the memory tool failed unexpectedly "
                                 "(the server's log has the details); the server is still "
                                 "running, so the call can be retried"}], "isError": True}
        result = _text_result(payload)
        if self.structured:
            result["structuredContent"] = payload
        return result


# ---- stdio ---------------------------------------------------------------------------------

class _Stop(Exception):
    """Raised by the signal handler to leave a blocking read of stdin."""


class StdioTransport:
    """Reads messages line by line from `instream`, writes answers to `outstream`."""

    def __init__(self, server: McpServer, instream: BinaryIO, outstream: BinaryIO) -> None:
        self.server = server
        self.instream = instream
        self.outstream = outstream
        self._reading = False
        self._stopping = False

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        """Stop: at once while waiting for input, else once the message in hand is answered."""
        self._stopping = True
        if self._reading:
            raise _Stop

    def run(self) -> None:
        """Serve until end of input or a stop signal."""
        try:
            while True:
                self._reading = True
                if self._stopping:
                    return
                line = self.instream.readline(MAX_MESSAGE_BYTES + 1)
                self._reading = False
                if not line:
                    return
                answer = self._answer(line)
                if answer is not None:
                    self._write(answer)
        except _Stop:
            return
        except BrokenPipeError:
            log.info("the client closed its end of the pipe; stopping")

    def _answer(self, line: bytes) -> Any:
        if len(line) > MAX_MESSAGE_BYTES and not line.endswith(b"\n"):
            self._skip_rest_of_line()
            request_id = leading_id(line)
            if request_id is None:
                # No id to answer: a client waiting on this request would wait forever, so the
                # server says why and ends, and the client sees its pipe close instead.
                log.warning("a message over %d bytes without a readable id; stopping",
                            MAX_MESSAGE_BYTES)
                self._stopping = True
            return error_response(request_id, INVALID_REQUEST,
                                  f"a message must be at most {MAX_MESSAGE_BYTES} bytes; split "
                                  "a long text into several statements")
        return self.server.handle_line(line)

    def _skip_rest_of_line(self) -> None:
        while True:
            chunk = self.instream.readline(65536)
            if not chunk or chunk.endswith(b"\n"):
                return

    def _write(self, answer: Any) -> None:
        text = json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (an echoed id) is written escaped instead
            data = json.dumps(answer, separators=(",", ":")).encode("ascii")
        self.outstream.write(data + b"\n")
        self.outstream.flush()


def leading_id(prefix: bytes) -> str | int | None:
    """The id of a JSON-RPC request read only in part (too long to read whole): found when the
    id comes before the long value, as clients write it ({"jsonrpc", "id", "method", "params"})."""
    text = prefix.decode("utf-8", "ignore")
    decoder = json.JSONDecoder()
    depth, at = 0, 0
    while at < len(text):
        char = text[at]
        if char == '"':
            try:
                key, end = decoder.raw_decode(text, at)
            except ValueError:
                return None  # the string runs past what was read
            colon = re.match(r"\s*:\s*", text[end:])
            if depth == 1 and key == "id" and colon:
                try:
                    value, _ = decoder.raw_decode(text, end + colon.end())
                except ValueError:
                    return None
                ok = isinstance(value, (str, int)) and not isinstance(value, bool)
                return value if ok else None
            at = end
            continue
        depth += {"{": 1, "[": 1, "}": -1, "]": -1}.get(char, 0)
        at += 1
    return None


def serve_stdio(memory: ScopedMemory) -> None:
    """Serve MCP on this process's stdin and stdout until end of input, SIGTERM or SIGINT."""
    protocol_out = sys.stdout.buffer
    stray_out, sys.stdout = sys.stdout, sys.stderr
    transport = StdioTransport(McpServer(memory), sys.stdin.buffer, protocol_out)
    previous = {sig: signal.signal(sig, transport.on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        transport.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sys.stdout = stray_out
        memory.close()
