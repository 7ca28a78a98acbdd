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
import os
import re
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, BinaryIO
from urllib.parse import unquote, urlsplit

from aml_retriever import __version__
from aml_retriever.agents.scopes import (
    DEFAULT_KIND,
    DEFAULT_MAX_WORDS,
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

# The id of this server's one request to the client: its roots (`McpServer._roots_request`).
ROOTS_REQUEST_ID = "aml-roots"
INSTRUCTIONS = (
    "Long-term memory that outlives the conversation. Call recent when a session starts; call "
    "recall before answering from what was said in earlier sessions; remember durable facts, "
    "decisions and preferences as short self-contained statements; forget what is wrong or "
    "outdated. scope 'local' is this project's memory, 'global' the user's across projects; "
    "without scope, recall and recent read both.")


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


def _described(schema: dict[str, Any], description: str) -> dict[str, Any]:
    """A schema with its description, or without one when name and schema say it all."""
    return {**schema, "description": description} if description else schema


def _text(name: str, max_chars: int, what: str, hint: str = "", description: str = "") -> Argument:
    return Argument(name, _described({"type": "string", "minLength": 1, "maxLength": max_chars,
                                      "pattern": r"\S"}, description),
                    f"must be {what}: a string of 1 to {max_chars} characters, not only "
                    f"whitespace{hint}")


# What tools/list says is paid for by an agent in every session, so each description says only
# what the schema beside it cannot, once across the tools (an agent reads them together): what
# local and global are is said by remember's scope and INSTRUCTIONS, what a kind is by remember's
# kind. docs/MCP.md holds the rest (the fields of a statement, the word budget).
def _scope(description: str = "") -> Argument:
    return Argument("scope", _described({"type": "string", "enum": list(SCOPES)}, description),
                    'must be "local" or "global"')


SCOPE = _scope()  # recall's and recent's: both memories when left out (INSTRUCTIONS)


LIMIT = Argument("limit", {"type": "integer", "minimum": 1, "maximum": TOP_K_MAX,
                           "default": TOP_K_DEFAULT},
                 f"must be an integer from 1 to {TOP_K_MAX}")
# The word budget of recall, recent and history (scopes.DEFAULT_MAX_WORDS says why this default).
MAX_WORDS_ARGUMENT = Argument(
    "max_words", {"type": "integer", "minimum": 1, "maximum": MAX_WORDS,
                  "default": DEFAULT_MAX_WORDS},
    f"must be an integer from 1 to {MAX_WORDS}")
BUDGETED = " Whole statements within max_words; omitted counts the rest."
_BUDGET = {"omitted": {"type": "integer", "minimum": 0}, "words": {"type": "integer", "minimum": 0},
           "note": {"type": "string"}}


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
    "id", {"type": "string", "pattern": "^(local|global):[1-9][0-9]{0,17}$"},
    "must be a statement id as recall or recent return it, such as local:42")
KIND_PATTERN = "^[A-Za-z][A-Za-z0-9_-]{0,31}$"
KIND_RULE = ("must be a short label: a letter, then at most 31 letters, digits, - or _ "
             "(e.g. preference)")
KIND = Argument("kind", {"type": "string", "pattern": KIND_PATTERN}, KIND_RULE)
CONTENT = _text("content", MAX_CONTENT_CHARS, "the statement to remember",
                "; split a longer text into several statements")

# The answers' schemas: types, enums and required fields (docs/MCP.md says what each field means).
_STATEMENT = {
    "id": {"type": "string"},
    "scope": {"type": "string", "enum": list(SCOPES)},
    "content": {"type": "string"},
    "kind": {"type": "string"},
    "time": {"type": "string"},
    "valid_from": {"type": "string"},
    "origin": {"type": "string", "enum": list(ORIGINS)},
    "trust": {"type": "string", "enum": ["confirmed", "proposed"]},
    "superseded_by": {"type": "string"},
}
STATEMENT = _object(_STATEMENT, ("superseded_by",))
RECALLED = _object({**_STATEMENT, "score": {"type": "number"}, "match": {"type": "number"},
                    "why": {"type": "array", "items": {"type": "string"}},
                    "matched": {"type": "array", "items": {"type": "string"}}},
                   ("superseded_by",))
# remember and update answer up to two statements: both refer to one definition.
CHANGED = {**_object({"statement": {"$ref": "#/$defs/statement"}, "replayed": {"type": "boolean"},
                      "note": {"type": "string"}, "replaced": {"$ref": "#/$defs/statement"}},
                     ("note", "replaced")), "$defs": {"statement": STATEMENT}}
EVENT = {"type": "object", "properties": {
    "seq": {"type": "integer"}, "at": {"type": "string"}, "action": {"type": "string"},
    "actor": {"type": "string"}, "message_ids": {"type": "array", "items": {"type": "string"}},
    "content_hash": {"type": "string"}}}
# Tool hints; those equal to the MCP defaults (readOnlyHint false, destructiveHint true,
# idempotentHint false, openWorldHint true) are left unsaid, as ANNOTATION_DEFAULTS.
ANNOTATION_DEFAULTS = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False,
                       "openWorldHint": True}
WRITES = {"openWorldHint": False}
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
        """The tools/list entry; revisions before structured output get no outputSchema, and their
        title among the annotations."""
        described: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": {"type": "object",
                            "properties": {a.name: a.schema for a in self.arguments},
                            "required": list(self.required), "additionalProperties": False},
            "annotations": {"title": self.title, **self.annotations},
        }
        if structured:  # the title once, where these revisions put it
            described.update(title=described["annotations"].pop("title"), outputSchema=self.output)
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
         "Store one self-contained statement for later sessions; a repeat returns the stored "
         "one (replayed). For a changed fact, use update.",
         (CONTENT,
          _scope("local (default): this project; global: the user's, in all projects."),
          Argument("kind", {**KIND.schema, "description": f"e.g. fact, preference; default "
                                                          f"{DEFAULT_KIND}."}, KIND.rule),
          Argument("origin", {"type": "string", "enum": list(ORIGINS),
                              "description": "agent if you inferred it: kept proposed until "
                                             "a person confirms it."},
                   'must be "user" or "agent"'),
          _flag("force", "Even if forgotten or rejected before.")),
         ("content",), CHANGED, {**WRITES, "destructiveHint": False, "idempotentHint": True},
         lambda memory, a: memory.remember(a["content"], a.get("scope", "local"),
                                           a.get("kind", DEFAULT_KIND), a.get("origin", "user"),
                                           a.get("force", False))),
    Tool("update", "Update a statement",
         "Replace a statement whose fact changed with its new version; the old one stays in "
         "history.",
         (STATEMENT_ID_ARGUMENT, CONTENT, KIND),
         ("id", "content"), CHANGED, {**WRITES, "destructiveHint": False, "idempotentHint": True},
         lambda memory, a: memory.update(a["id"], a["content"], a.get("kind"))),
    Tool("recall", "Recall statements",
         "Find the statements most relevant to a query, best first (the newest version unless "
         "the query asks about the past); use before answering from earlier sessions."
         + BUDGETED,
         (_text("query", MAX_QUERY_CHARS, "what to look for"),
          LIMIT, SCOPE, KIND,
          _time("as_of", "Read memory as it was then."),
          _time("since", "Only true from then on."),
          _time("until", "Only true by then."),
          _flag("include_history", "Also replaced versions."),
          _flag("include_proposed", "Also unconfirmed ones; default: server setting."),
          MAX_WORDS_ARGUMENT),
         ("query",), _object({"results": {"type": "array", "items": RECALLED}, **_BUDGET},
                             tuple(_BUDGET)), READS,
         lambda memory, a: memory.recall(a["query"], a.get("limit", TOP_K_DEFAULT), a.get("scope"),
                                         _read(a, memory.default_read()),
                                         a.get("max_words", DEFAULT_MAX_WORDS))),
    Tool("forget", "Forget a statement",
         "Remove one statement, by id or by its exact text (not a search). Text several "
         "statements share removes none and lists their ids.",
         (STATEMENT_ID_ARGUMENT,
          _text("text", MAX_CONTENT_CHARS, "the statement's exact text"),
          _scope("With text; omit for both.")),
         (), _object({"forgotten": STATEMENT}),
         {**WRITES, "idempotentHint": True},
         lambda memory, a: memory.forget(a.get("id"), a.get("text"), a.get("scope"))),
    Tool("recent", "Recent statements",
         "The newest statements, the handoff first; call it when a session starts."
         + BUDGETED,
         (LIMIT, SCOPE, KIND,
          Argument("cursor", {"type": "string", "minLength": 1, "maxLength": 200,
                              "pattern": "^[A-Za-z0-9_-]+$",
                              "description": "next_cursor of the last page."},
                   "must be a next_cursor exactly as recent returned it"),
          MAX_WORDS_ARGUMENT),
         (), _object({"results": {"type": "array", "items": STATEMENT},
                      "next_cursor": {"type": ["string", "null"]}, **_BUDGET}, tuple(_BUDGET)),
         READS,
         lambda memory, a: memory.recent(a.get("limit", TOP_K_DEFAULT), a.get("scope"),
                                         a.get("kind"), a.get("cursor"),
                                         a.get("max_words", DEFAULT_MAX_WORDS))),
    Tool("history", "History of a statement",
         "Every version of a statement, oldest first, and their changes. Whole versions within "
         "limit and max_words; omitted counts the rest.",
         (STATEMENT_ID_ARGUMENT, LIMIT, MAX_WORDS_ARGUMENT), ("id",),
         _object({"versions": {"type": "array", "items": STATEMENT},
                  "events": {"type": "array", "items": EVENT}, **_BUDGET,
                  "omitted_events": {"type": "integer", "minimum": 0}},
                 (*_BUDGET, "omitted_events")), READS,
         lambda memory, a: memory.history(a["id"], a.get("limit", TOP_K_DEFAULT),
                                          a.get("max_words", DEFAULT_MAX_WORDS))),
    Tool("handoff", "Hand off to the next session",
         "With content: set the note the next session reads first (the old one stays in "
         "history). Without: read it.",
         (_text("content", MAX_CONTENT_CHARS, "the handoff note"),),
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

    def __init__(self, memory: ScopedMemory, roots_from_client: bool = False) -> None:
        self.memory = memory
        self.version = PROTOCOL_VERSIONS[0]
        # Whether the project may be taken from the client's roots (no --project-root given),
        # and whether the client offers them (its `initialize` said so).
        self.roots_from_client = roots_from_client
        self.client_roots = False
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
        """The answer to one message; None for a notification or a response, but for the
        request of the client's roots that a notification may call for (`_roots_request`)."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return error_response(None, INVALID_REQUEST,
                                  'a message must be a JSON object with "jsonrpc": "2.0"')
        if "method" not in message:
            if "id" in message and ("result" in message or "error" in message):
                if message["id"] == ROOTS_REQUEST_ID and isinstance(message.get("result"), dict):
                    self._take_roots(message["result"])
                return None  # a client's answer: none is answered
            return error_response(None, INVALID_REQUEST, "a request needs a method")
        if "id" not in message:  # a notification (initialized, cancelled, ...): never answered
            return self._roots_request(message["method"])
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
        capabilities = params.get("capabilities")
        self.client_roots = isinstance(capabilities, dict) and "roots" in capabilities
        log.info("initialized at protocol revision %s", self.version)
        return {"protocolVersion": self.version,
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "aml_retriever", "title": "aml_retriever memory",
                               "version": __version__},
                "instructions": INSTRUCTIONS}

    def _roots_request(self, notification: Any) -> dict[str, Any] | None:
        """Once the client is initialized (and when its roots change), ask it for its roots
        when the project is to be taken from them: a coding client's roots are the project it
        works on, wherever it starts the server."""
        if self.roots_from_client and self.client_roots and notification in (
                "notifications/initialized", "notifications/roots/list_changed"):
            return {"jsonrpc": "2.0", "id": ROOTS_REQUEST_ID, "method": "roots/list"}
        return None

    def _take_roots(self, result: dict[str, Any]) -> None:
        """The project is the client's first root that is a directory here (a file: URI). A
        root that cannot be read as one (a URI that does not parse, a path too long, a folder
        this user cannot enter) is skipped: the agent keeps its memory tools whatever the
        client sends."""
        roots = result.get("roots")
        for root in roots if isinstance(roots, list) else []:
            path = _directory_of(root)
            if path is not None:
                if self.memory.move_project(path):
                    log.info("the project is the client's root %s", path)
                return

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


def _directory_of(root: Any) -> Path | None:
    """The directory a client's root names (a file: URI), resolved, or None when it names none
    this process can use (a bad URI, a path too long, one it may not enter or read)."""
    uri = root.get("uri") if isinstance(root, dict) else None
    if not isinstance(uri, str) or not uri.startswith("file://"):
        return None
    try:
        path = Path(unquote(urlsplit(uri).path, errors="strict"))
        if not path.is_dir():
            return None
        path = path.resolve()
        os.listdir(path)  # a folder this user cannot enter is no project of theirs
        return path
    except (ValueError, OSError):
        return None


def serve_stdio(memory: ScopedMemory, roots_from_client: bool = False) -> None:
    """Serve MCP on this process's stdin and stdout until end of input, SIGTERM or SIGINT;
    `roots_from_client`: the project is the client's first root when it offers roots."""
    protocol_out = sys.stdout.buffer
    stray_out, sys.stdout = sys.stdout, sys.stderr
    transport = StdioTransport(McpServer(memory, roots_from_client), sys.stdin.buffer,
                               protocol_out)
    previous = {sig: signal.signal(sig, transport.on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        transport.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sys.stdout = stray_out
        memory.close()
