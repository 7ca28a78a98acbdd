"""Two memories over one engine: the project's (local) and the account's (global).

Local memory belongs to a project and lives inside it (`DIR/.aml/memory.db`), so it travels with
the repository and no other project reads it. Global memory belongs to the account (the platform's
user data directory) and holds who the user is and standing preferences. Each is a store of its
own, so the boundary between owners is a file, as it is between users of the HTTP service.

Inside each store every statement belongs to one fixed user (`memory`): the store already is the
owner, so a user id would separate nothing, and the fixed id keeps the stores usable by the
whole-store commands (`stats`, `reindex`, `delete-user --user memory`). Each server run is one
session, the engine's conversation: what an agent remembers while working is one run of
statements in time order, whose segments lend a statement the context of those remembered with
it, and forgetting a statement derives only its own run's links and segments again (a single
session for a whole memory would make that grow with the memory).

Callers pass values already checked (scope names, limits, lengths): the MCP tools check them
against their schemas before calling here.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from aml_retriever.analysis import related
from aml_retriever.analysis.dates import iso_utc
from aml_retriever.analysis.related import neighbours
from aml_retriever.analysis.tokenizer import index_text, light_stem, reading_words
from aml_retriever.common.errors import AmlError, InvalidField, NotFound
from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.engine.candidates import Term, idf
from aml_retriever.engine.fusion import WordBudget
from aml_retriever.engine.query import content_terms
from aml_retriever.memory import cursors
from aml_retriever.memory.lifecycle import Outcome, Statements
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import TOP_K_MAX, SearchRequest
from aml_retriever.storage.timeline import ReadFilter

SCOPES = ("local", "global")
APP_NAME = "aml_retriever"
STORE_NAME = "memory.db"
MEMORY_USER = "memory"
DEFAULT_KIND = "note"
FORGET_REASON = "forget"
# The kind of the note one session leaves the next (`handoff`); no other call may use it.
HANDOFF_KIND = "handoff"
ACTOR = "mcp"  # the transport the audit log names for changes made here
# A cursor before every statement: (a time beyond any, a memory order before the first, no id).
FROM_THE_TOP = (253_402_300_799_999, -1, 0)
# A recall result must be one statement an agent can forget by its id, and the window signal
# returns consecutive statements as one result: it is off. Segments still lend each statement the
# context of those remembered with it. Restated facts come newest first (versions.py; agent-memory
# suite, restated, seeds 1-3: present questions answered by the newest version .158 -> .758,
# past ones by the version asked for .276 -> .803).
# Weights are not part of the index identity, so these stores stay usable by every command run
# with the default settings.
MEMORY_WEIGHTS = {"window": 0.0, "versions": 1.0}
MEMORY_RETRIEVAL = RetrievalConfig().with_values(
    **{f"weight_{name}": weight for name, weight in MEMORY_WEIGHTS.items()})


def memory_retrieval(configured: RetrievalConfig, chosen: Mapping[str, float]) -> RetrievalConfig:
    """The ranking of an agent memory: the configured one with the memory's own defaults
    (MEMORY_WEIGHTS), under the weights the settings name explicitly (`chosen`)."""
    weights = {**configured.weights, **MEMORY_WEIGHTS, **chosen}
    return configured.with_values(**{f"weight_{name}": w for name, w in weights.items()})
STATEMENT_ID = re.compile(r"(local|global):([1-9][0-9]{0,17})")

# What recall, recent and history answer an agent is bounded by a reader's word budget
# (`max_words`, counted as the HTTP Search's max_words counts: tokenizer.reading_words), because
# agent hosts cap a tool result: Claude Code warns past 10,000 tokens of MCP output, refuses past
# 25,000 (MAX_MCP_OUTPUT_TOKENS) and moves a result past 50,000 characters to a file; a ChatGPT
# custom connector refused a memory search answering ~66,000 characters (nowledge-co/community
# #493). Unbounded, recall with limit 100 of 10,000-character statements answers a megabyte.
# Measured: a statement is short (the agent-memory suite's 1,244 statements, seeds 1-3, both
# styles: median 7 words, p90 10, max 17; 24 bullets of four public CLAUDE.md files: median 10,
# p90 13; the 1,081 sentences of this project's docs: median 24, p90 54), ~6 characters a word;
# besides its content a recall result carries ~280 characters of fields, a recent one ~190, a
# history version ~250 and an event ~180 (bounded by `limit`, not by words).
# The default, 2,000 words, is ~12,000 characters of prose (at most 16,000: CHARS_PER_WORD), plus
# ~2,800 of fields at the default limit of 10: ~15,000 characters, ~4,000 tokens, well under
# 25,000 characters and the 10,000-token warning. It holds 100 statements of 20 words, so a
# typical memory's answer is never cut, even at limit 100, while 100 statements of 10,000
# characters (~1,700 words of prose each) stop after the first. The most an agent can ask, 4,000
# words, is ~24,000 characters of prose (at most 32,000): with the default limit's fields under the
# 50,000-character threshold, and even with limit 100's ~28,000 under the 25,000-token cap.
DEFAULT_MAX_WORDS = 2_000
MAX_WORDS = 4_000
# A statement costs at least one word per CHARS_PER_WORD characters: text without spaces (a
# minified JSON or base64 blob of 10,000 characters is one reader's word) must not carry a
# megabyte through a word budget. Prose stays below it (~6 characters a word): over the 1,081 doc
# sentences above, dense with paths and code, it counts 0.6% more words; no suite statement or
# bullet above reaches it.
CHARS_PER_WORD = 8


class AmbiguousText(AmlError):
    """Text given to `forget` matches more than one statement: none is removed."""

    status = 409
    code = "ambiguous"

    def __init__(self, matches: list[dict[str, Any]]) -> None:
        ids = ", ".join(match["id"] for match in matches)
        super().__init__(f"{len(matches)} statements have exactly this text, so none was removed; "
                         f"forget one of them by its id: {ids}", "text")
        self.matches = matches


def default_global_root(environ: Mapping[str, str] | None = None, platform: str | None = None,
                        home: Path | None = None) -> Path:
    """Where the account's memory lives by default: the platform's user data directory."""
    environ = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    home = Path.home() if home is None else home
    if platform == "darwin":
        return home / "Library" / "Application Support" / APP_NAME
    if platform == "win32":
        appdata = environ.get("APPDATA")
        return (Path(appdata) if appdata else home / "AppData" / "Roaming") / APP_NAME
    data_home = environ.get("XDG_DATA_HOME", "")
    # The XDG base directory rules ignore a relative XDG_DATA_HOME.
    if os.path.isabs(data_home):
        return Path(data_home) / APP_NAME
    return home / ".local" / "share" / APP_NAME


# Whose each memory is, as a rendering says.
_SCOPE_OWNERS = {"local": "this project's", "global": "the account's, shared by every project"}
# What DIR/.aml/.gitignore holds: everything in the folder, itself included, is ignored.
LOCAL_GITIGNORE = "# Written by aml_retriever: the project memory is not source.\n*\n"


def local_store(project_root: Path) -> Path:
    return project_root / ".aml" / STORE_NAME


def global_store(global_root: Path) -> Path:
    return global_root / STORE_NAME


def statement_id(scope: str, message_id: str) -> str:
    """The id an agent sees ("local:42") for a stored message ("m42") of a scope."""
    return f"{scope}:{message_id.removeprefix('m')}"


def parse_statement_id(text: str) -> tuple[str, int]:
    match = STATEMENT_ID.fullmatch(text)
    if match is None:
        raise InvalidField("id must be a statement id as recall or recent return it, such as "
                           "local:42 or global:7", "id")
    return match.group(1), int(match.group(2))


def new_session_id() -> str:
    """The session of one server run: its start time, and a random part that tells apart runs
    started in the same millisecond."""
    return f"run-{iso_utc(int(time.time() * 1000))}-{secrets.token_hex(4)}"


def statement_of(scope: str, item: dict[str, Any]) -> dict[str, Any]:
    """A stored message as an agent sees a statement."""
    statement = {"id": statement_id(scope, item["id"]), "scope": scope, "content": item["content"],
                 "kind": item["role"], "time": item["created_at"], "valid_from": item["valid_from"],
                 "origin": item["origin"], "trust": item["trust"]}
    if item.get("superseded_by"):
        statement["superseded_by"] = statement_id(scope, item["superseded_by"])
    return statement


def event_of(scope: str, event: dict[str, Any]) -> dict[str, Any]:
    """An audit event with statement ids instead of message ids."""
    return {**event, "message_ids": [statement_id(scope, m) for m in event["message_ids"]]}


_BAD_CURSOR = "cursor must be a next_cursor exactly as recent returned it"
_INT64 = (-(2**63), 2**63 - 1)


def encode_cursor(key: bytes, position: tuple[int, int, int]) -> str:
    """Where a page of `recent` ended: (time, scope order, message id), sealed (opaque to the
    agent, and refused when changed)."""
    return cursors.seal(key, json.dumps(list(position)).encode())


def decode_cursor(key: bytes, cursor: str) -> tuple[int, int, int]:
    data = cursors.unseal(key, cursor)
    try:
        position = json.loads(data) if data is not None else None
    except ValueError:
        position = None
    if (isinstance(position, list) and len(position) == 3
            and all(type(v) is int and _INT64[0] <= v <= _INT64[1] for v in position)):
        return position[0], position[1], position[2]
    raise InvalidField(_BAD_CURSOR, "cursor")


class ScopedMemory:
    """The local and the global memory, each a store opened on first use."""

    def __init__(self, stores: Mapping[str, Path], session_id: str | None = None,
                 retrieval: RetrievalConfig = MEMORY_RETRIEVAL, proposed: str = "FLAG",
                 synchronous: str = "FULL") -> None:
        self.stores = dict(stores)
        self.session_id = session_id or new_session_id()
        self.retrieval = retrieval
        # Whether a default read shows statements no person confirmed (flagged) or withholds them.
        self.show_proposed = proposed == "FLAG"
        self.synchronous = synchronous
        self._services: dict[str, MemoryService] = {}
        # Cursors of `recent` span both memories, so neither store's key signs them: a key of
        # this server's own, and a cursor holds for as long as the server runs.
        self._cursor_key = secrets.token_bytes(32)

    @classmethod
    def at(cls, project_root: Path, global_root: Path | None = None, **options: Any) -> ScopedMemory:
        return cls({"local": local_store(project_root),
                    "global": global_store(global_root or default_global_root())}, **options)

    def close(self) -> None:
        for service in self._services.values():
            service.close()
        self._services.clear()

    def move_project(self, project_root: Path) -> bool:
        """Make `project_root` the project whose local memory this is, unless that memory is
        open already (a memory never changes under a session that used it). Whether it moved."""
        if "local" in self._services:
            return False
        self.stores["local"] = local_store(project_root)
        return True

    # ---- changes -------------------------------------------------------------------------

    def remember(self, content: str, scope: str = "local", kind: str = DEFAULT_KIND,
                 origin: str = "user", force: bool = False) -> dict[str, Any]:
        """Store one statement: durable and searchable on return. A statement equal to a current
        one (case, Unicode form and spacing aside) returns it instead (replayed); a forgotten or
        rejected one is refused unless `force`."""
        _not_reserved(kind)
        outcome = self._statements(scope).remember(self.session_id, content, kind, origin, force)
        return self._answer(scope, outcome)

    def update(self, statement: str, content: str, kind: str | None = None) -> dict[str, Any]:
        """Replace a statement with a new version; the old one leaves default recall and stays
        in its history."""
        if kind is not None:
            _not_reserved(kind)
        scope, message_id = parse_statement_id(statement)
        if self._service(scope, create=False) is None:
            raise _no_statement(statement)
        outcome = self._statements(scope).update(self.session_id, message_id, content, kind)
        return self._answer(scope, outcome)

    def handoff(self, content: str | None = None) -> dict[str, Any]:
        """With content: record this session's handoff for the next (this project's memory),
        replacing the previous one, which stays in its history. Without: the current handoff."""
        current = self._current_handoff()
        if content is None:
            return {"handoff": current}
        if current is None:
            outcome = self._statements("local").remember(self.session_id, content, HANDOFF_KIND)
        else:
            outcome = self._statements("local").update(
                self.session_id, parse_statement_id(current["id"])[1], content)
        return {"handoff": statement_of("local", outcome.statement),
                **({"replaced": statement_of("local", outcome.replaced)} if outcome.replaced else {})}

    def confirm(self, statement: str) -> dict[str, Any]:
        scope, message_id = parse_statement_id(statement)
        if self._service(scope, create=False) is None:
            raise _no_statement(statement)
        return self._answer(scope, self._statements(scope).confirm(message_id))

    def reject(self, statement: str) -> dict[str, Any]:
        scope, message_id = parse_statement_id(statement)
        if self._service(scope, create=False) is None:
            raise _no_statement(statement)
        return {"rejected": statement_of(scope, self._statements(scope).reject(message_id).statement)}

    def forget(self, statement: str | None = None, text: str | None = None,
               scope: str | None = None) -> dict[str, Any]:
        """Remove exactly one statement, named by its id or by its text. Text that matches
        several statements removes none (AmbiguousText lists them). The text's hash stays as a
        tombstone, so remembering it again needs `force`."""
        if statement is not None and text is None:
            match = self._by_id(statement, scope)
        elif text is not None and statement is None:
            match = self._by_text(text, scope)
        else:
            raise InvalidField("forget needs exactly one of id (as recall or recent return it) or "
                               "text (the statement's exact text)", "id")
        name, message_id = parse_statement_id(match["id"])
        service = self._service(name, create=False)
        assert service is not None
        if not service.forget(MEMORY_USER, [message_id], FORGET_REASON, ACTOR)["forgotten"]:
            raise NotFound(f"{match['id']} was forgotten meanwhile; nothing more to do", "id")
        return {"forgotten": match}

    # ---- reads ---------------------------------------------------------------------------

    def recall(self, query: str, limit: int = 10, scope: str | None = None,
               read: ReadFilter | None = None, max_words: int | None = None) -> dict[str, Any]:
        """The statements that best match the query, from one memory or both.

        Each memory is searched on its own (its own BM25 statistics) and the two rankings are
        merged head by head, each keeping its own order: of the two next statements the one
        holding more of the query's weight goes first (`match`: the share of the query's
        content words it holds, each word weighed by its IDF over the memories searched, so a
        word every statement holds, such as "user", counts for almost nothing), then the higher
        fused score (a reciprocal-rank sum, which ties the two memories' best and so cannot
        choose between them alone), then local (the project's own memory is the more specific).
        A result's `match` is that share, comparable across memories, and `matched` names the
        query words it holds; its `score` is its match at most the score before it
        (`ranked_scores`), so the list reads best first.

        With `max_words`, the best statements that fit it, best first (within_words): one that
        does not fit is left out whole and counted (`omitted`), and a later, shorter one may take
        its place, as the HTTP Search packs its results."""
        read = read or self.default_read()
        ranked, services = [], []
        for name in self._scopes(scope):
            service = self._service(name, create=False)
            if service is None:
                continue
            services.append(service)
            data = service.search(SearchRequest(query, MEMORY_USER, limit, (), None, read=read),
                                  statements=True)["data"]
            ranked.append([(name, item) for item in data])
        weights = QueryWeights.of(query, services)
        scored = [[(name, item, weights.match(item["content"])) for name, item in ranking]
                  for ranking in ranked]
        merged = merge_heads(scored, lambda entry: (-entry[2][0], -entry[1]["score"]))[:limit]
        bound: dict[str, Any] = {}
        if max_words is not None:
            kept, words = within_words([item["content"] for _, item, _ in merged], max_words,
                                       prefix=False)
            bound = budget_note(len(merged) - len(kept), words, max_words,
                                "raise max_words or ask a narrower query to read them")
            merged = [merged[i] for i in kept]
        scores = ranked_scores([match for _, _, (match, _) in merged])
        return {"results": [{**statement_of(name, item), "score": score, "match": round(match, 4),
                             "why": item["evidence_flags"], "matched": matched}
                            for (name, item, (match, matched)), score in zip(merged, scores,
                                                                             strict=True)],
                **bound}

    def recent(self, limit: int = 10, scope: str | None = None, kind: str | None = None,
               cursor: str | None = None, max_words: int | None = None) -> dict[str, Any]:
        """The newest current statements, newest first, a page at a time: equal times keep local
        first, then the newest id; `next_cursor` reads on. The first page of a listing of every
        kind starts with this project's handoff, when there is one. With `max_words` a page ends
        before the first statement that does not fit it (within_words, never cut; the first is
        always listed) and `next_cursor` continues right after the last one listed."""
        after = decode_cursor(self._cursor_key, cursor) if cursor is not None else None
        handoff = self._current_handoff() if after is None and kind is None and scope != "global" \
            else None
        listed = limit - (handoff is not None)
        read = replace(self.default_read(), kind=kind)
        found = []
        for order, name in enumerate(self._scopes(scope)):
            service = self._service(name, create=False)
            if service is None:
                continue
            before = None if after is None else _bound(after, order)
            found += [((-row["timestamp_ms"], order, -int(row["id"][1:])), name, row)
                      # one more to know a next page exists, one more for the handoff left out
                      for row in service.recent(MEMORY_USER, listed + 2, read, before)
                      if kind is not None or row["role"] != HANDOFF_KIND]
        found.sort(key=lambda entry: entry[0])
        page = found[:listed]
        results = ([handoff] if handoff else []) + [statement_of(name, row) for _, name, row in page]
        bound: dict[str, Any] = {}
        if max_words is not None:
            kept, words = within_words([r["content"] for r in results], max_words, prefix=True)
            bound = budget_note(len(results) - len(kept), words, max_words,
                                "pass next_cursor as cursor to read them next, or raise max_words")
            results = results[:len(kept)]
            page = page[:len(kept) - (handoff is not None)]
        if len(found) <= listed and not bound.get("omitted"):
            return {"results": results, "next_cursor": None, **bound}
        # A page the handoff filled alone continues from the top.
        position = (-page[-1][0][0], page[-1][0][1], -page[-1][0][2]) if page else FROM_THE_TOP
        return {"results": results, "next_cursor": encode_cursor(self._cursor_key, position),
                **bound}

    def history(self, statement: str, limit: int | None = None,
                max_words: int | None = None) -> dict[str, Any]:
        """Every version of the statement, oldest first, and every audit event about them.

        With `limit` or `max_words`: the version asked for, then the newest versions, as many as
        both allow (within_words: never cut, the first always), listed oldest first, and the
        events about the versions listed; `omitted` and `omitted_events` count what was left."""
        scope, message_id = parse_statement_id(statement)
        if self._service(scope, create=False) is None:
            raise _no_statement(statement)
        found = self._statements(scope).history(message_id)
        versions, events, bound = _bounded_history(found["versions"], found["events"],
                                                   f"m{message_id}", limit, max_words)
        return {"versions": [statement_of(scope, row) for row in versions],
                "events": [event_of(scope, event) for event in events], **bound}

    def proposed(self, limit: int = 100) -> dict[str, Any]:
        """Statements awaiting a person's review, oldest first, local then global."""
        results = []
        for name in SCOPES:
            if self._service(name, create=False) is not None:
                results += [statement_of(name, row) for row in self._statements(name).proposed(limit)]
        return {"results": results[:limit]}

    def markdown(self, scope: str) -> str:
        """One memory as a readable document (MEMORY.md): its current statements newest first,
        one a line with id, kind and time, this project's handoff first. Never read back."""
        other = "global" if scope == "local" else "local"
        lines = [f"# Memory ({scope}: {_SCOPE_OWNERS[scope]})", "",
                 f"Rendered by `aml_retriever export`: the {scope} memory only (`--scope {other}` "
                 f"renders the {other} one, {_SCOPE_OWNERS[other]}); the memory itself lives in "
                 "the store. Newest first.", ""]
        cursor = None
        while True:
            page = self.recent(TOP_K_MAX, scope, None, cursor)
            lines += [_markdown_line(statement) for statement in page["results"]]
            cursor = page["next_cursor"]
            if cursor is None:
                return "\n".join(lines) + "\n"

    def default_read(self) -> ReadFilter:
        return ReadFilter(include_proposed=self.show_proposed)

    # ---- helpers -------------------------------------------------------------------------

    def _answer(self, scope: str, outcome: Outcome) -> dict[str, Any]:
        # A planned checkpoint after every write keeps memory.db complete on its own, so it can
        # be copied or committed while the server runs.
        self._services[scope].store.checkpoint_dirty()
        answer: dict[str, Any] = {"statement": statement_of(scope, outcome.statement),
                                  "replayed": outcome.replayed}
        if outcome.note:
            answer["note"] = outcome.note
        if outcome.replaced:
            answer["replaced"] = statement_of(scope, outcome.replaced)
        return answer

    def _statements(self, scope: str) -> Statements:
        service = self._service(scope, create=True)
        assert service is not None
        return Statements(service, MEMORY_USER, ACTOR, lambda m: statement_id(scope, m))

    def _current_handoff(self) -> dict[str, Any] | None:
        service = self._service("local", create=False)
        rows = service.recent(MEMORY_USER, 1, ReadFilter(kind=HANDOFF_KIND,
                                                         include_proposed=True)) if service else []
        return statement_of("local", rows[0]) if rows else None

    def _by_id(self, statement: str, scope: str | None) -> dict[str, Any]:
        name, message_id = parse_statement_id(statement)
        if scope is not None and scope != name:
            raise InvalidField(f"id {statement} is in {name} memory but scope says {scope}; "
                               "leave scope out when forgetting by id", "id")
        service = self._service(name, create=False)
        rows = service.messages(MEMORY_USER, [message_id]) if service else []
        if not rows:
            raise _no_statement(statement)
        return statement_of(name, rows[0])

    def _by_text(self, text: str, scope: str | None) -> dict[str, Any]:
        """Statements whose content is the text, exactly or as remember compares statements
        (case, Unicode form and spacing aside), in every memory asked."""
        matches: dict[str, dict[str, Any]] = {}
        for name in self._scopes(scope):
            service = self._service(name, create=False)
            if service is None:
                continue
            rows = (service.messages_with_content(MEMORY_USER, text)
                    + self._statements(name).with_text(text))
            for row in sorted(rows, key=lambda r: int(r["id"][1:])):
                matches.setdefault(statement_id(name, row["id"]), statement_of(name, row))
        if not matches:
            where = f"{scope} memory" if scope else "local or global memory"
            raise NotFound(f"no statement in {where} has exactly this text; find it with recall "
                           "and forget it by its id", "text")
        if len(matches) > 1:
            raise AmbiguousText(list(matches.values()))
        return next(iter(matches.values()))

    @staticmethod
    def _scopes(scope: str | None) -> tuple[str, ...]:
        return SCOPES if scope is None else (scope,)

    def _service(self, scope: str, create: bool) -> MemoryService | None:
        """The scope's service, opened on first use; None when reading a memory that has never
        been written (reads create no files)."""
        service = self._services.get(scope)
        if service is not None:
            return service
        path = self.stores[scope]
        if not create and not path.exists():
            return None
        if scope == "global" and not path.parent.exists():
            path.parent.mkdir(mode=0o700, parents=True)  # the account's memory is private to it
        if scope == "local":
            path.parent.mkdir(parents=True, exist_ok=True)
            _ignored_by_git(path.parent)
        service = self._services[scope] = MemoryService.open(
            str(path), retrieval=self.retrieval, synchronous=self.synchronous)
        service.store.hold_shared()  # so `purge` refuses to remove the files under this server
        return service


def _ignored_by_git(folder: Path) -> None:
    """The project's memory is not its source: its folder holds a .gitignore of its own, so git
    leaves it out without an edit to the project's .gitignore (the folder showed up untracked,
    and `git add -A` committed the memory, its secret included). Written whenever it is missing:
    a folder an earlier release made has none. A folder that cannot be written is left as it is
    (its memory opens or fails on its own account)."""
    ignore = folder / ".gitignore"
    if not ignore.exists():
        try:
            ignore.write_text(LOCAL_GITIGNORE, encoding="utf-8")
        except OSError:
            pass


def _bounded_history(versions: list[dict[str, Any]], events: list[dict[str, Any]], asked_id: str,
                     limit: int | None, max_words: int | None
                     ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """A statement's history within `limit` versions and `max_words` words: the version asked
    for, then the newest, as many as both allow (within_words: never cut, the first always),
    still oldest first, with the events about them; and the note of what was left out."""
    if not versions or (limit is None and max_words is None):
        return versions, events, {}
    asked = [i for i, row in enumerate(versions) if row["id"] == asked_id]
    wanted = (asked + [i for i in reversed(range(len(versions))) if i not in asked])[:limit]
    kept, words = within_words([versions[i]["content"] for i in wanted], max_words, prefix=True)
    held = {versions[wanted[k]]["id"] for k in kept}
    about = [event for event in events if held & set(event["message_ids"])]
    bound = budget_note(len(versions) - len(held), words, max_words,
                        "raise limit or max_words, or recall with include_history and as_of to "
                        "read older versions", "version")
    if not bound.get("omitted"):
        return versions, events, bound
    bound["omitted_events"] = len(events) - len(about)
    return [row for row in versions if row["id"] in held], about, bound


def _markdown_line(statement: dict[str, Any]) -> str:
    """One statement as a Markdown list item on one line (its line breaks become spaces)."""
    text = " ".join(statement["content"].split())
    flag = " (proposed)" if statement["trust"] == "proposed" else ""
    return f"- `{statement['id']}` {statement['kind']}, {statement['time']}{flag}: {text}"


def _bound(after: tuple[int, int, int], order: int) -> tuple[int, int]:
    """The (time, id) every listed statement of the memory at `order` must sort below, for the
    page after `after` in (time descending, memory order, id descending)."""
    time_ms, after_order, message_id = after
    if order < after_order:
        return time_ms, 0  # this memory's statements at that very time came before it
    if order == after_order:
        return time_ms, message_id
    return time_ms + 1, 0  # this memory's statements at that time come after it


def statement_words(content: str) -> int:
    """The words a statement costs against a word budget: a reader's words, at least one for
    every CHARS_PER_WORD characters."""
    return max(reading_words(content), len(content) // CHARS_PER_WORD)


def within_words(contents: Sequence[str], max_words: int | None,
                 prefix: bool) -> tuple[list[int], int]:
    """Which statements (their contents, in the order they are wanted) a word budget keeps, and
    their words. Each is kept whole or left out, never cut: an answer is never a rewritten
    statement. The first is kept even when it alone is over the budget, and then alone: an answer
    of nothing would help no one, and a page must move on. One that does not fit is left out and
    a later, shorter one may take its place, as the HTTP Search packs results (fusion.WordBudget);
    with `prefix` the first that does not fit ends the list instead, so that a page ends where
    its cursor continues. `max_words` None keeps every one."""
    if max_words is None:
        return list(range(len(contents))), sum(map(statement_words, contents))
    budget = WordBudget(max_words, lambda i: statement_words(contents[i]))
    kept: list[int] = []
    for i in range(len(contents)):
        if budget.take((i,)):
            kept.append(i)
        elif not kept:
            budget.used = budget.words_of(i)
            kept.append(i)
        elif prefix:
            break
    return kept, budget.used


def budget_note(omitted: int, words: int, max_words: int | None, more: str,
                noun: str = "statement") -> dict[str, Any]:
    """What an answer says of its word budget when the budget left something out or its first
    statement alone is over it: `omitted`, `words` (the words listed) and a note on what to do.
    Nothing when the budget changed nothing, so such an answer is as it was without one."""
    over = max_words is not None and words > max_words
    if not omitted and not over:
        return {}
    said = []
    if over:
        said.append(f"the first {noun} alone has {words} words, more than max_words {max_words}: "
                    f"it is listed whole, as a {noun} is never cut")
    if omitted:
        what = "limit and max_words" if noun == "version" else f"max_words {max_words}"
        said.append(f"{omitted} {noun}{'s' if omitted > 1 else ''} left out whole to stay within "
                    f"{what}: {more}")
    return {"omitted": omitted, "words": words, "note": "; ".join(said)}


def _not_reserved(kind: str) -> None:
    if kind == HANDOFF_KIND:
        raise InvalidField(f"kind {HANDOFF_KIND} is reserved for the handoff tool; call handoff "
                           "to record one", "kind")


def _no_statement(statement: str) -> NotFound:
    return NotFound(f"there is no statement {statement} (it was forgotten, or never stored); use "
                    "recall or recent to find current ids", "id")


T = TypeVar("T")


@dataclass(frozen=True)
class QueryWeights:
    """A query's content words (light stems) and CJK n-grams, each with its IDF over the
    memories searched, as `match` weighs a statement by them; and for each word neither memory
    holds, the words nearest it in meaning that they hold (the `related` signal's, at its share
    of the word's weight)."""

    terms: tuple[tuple[str, str, float], ...]  # (as the query wrote it, as compared, weight)
    # (as the query wrote it, the light stems of its neighbours the memories hold, their weight)
    related: tuple[tuple[str, frozenset[str], float], ...] = ()

    @classmethod
    def of(cls, query: str, services: Sequence[MemoryService]) -> QueryWeights:
        written = content_terms(query)
        keys = ([("words", w, light_stem(w)) for w in dict.fromkeys(written.words)]
                + [("grams", g, g) for g in dict.fromkeys(written.grams)])
        size, counts = cls._counts(services, [Term(c, w) for c, w, _ in keys])
        terms = tuple((w, key, idf(size, df)) for (_, w, key), df in zip(keys, counts, strict=True))
        share = services[0].retrieval.weight("related") if services else 0.0
        related = tuple((word, near, share * weight) for (word, _, weight), df, (column, _, _)
                        in zip(terms, counts, keys, strict=True)
                        if share > 0 and df == 0 and column == "words"
                        for near in [cls._held_neighbours(word, services)] if near)
        return cls(terms, related)

    @staticmethod
    def _counts(services: Sequence[MemoryService], terms: list[Term]) -> tuple[int, list[int]]:
        size, counts = 0, [0] * len(terms)
        for service in services:
            n, held = service.document_counts(MEMORY_USER, terms)
            size, counts = size + n, [a + b for a, b in zip(counts, held, strict=True)]
        return size, counts

    @classmethod
    def _held_neighbours(cls, word: str, services: Sequence[MemoryService]) -> frozenset[str]:
        """The light stems of the word's nearest words that the memories hold, at most
        MOST_NEIGHBOURS, as a Search searches for them (engine/hits.py)."""
        near = neighbours(word)
        _, counts = cls._counts(services, [Term("words", n) for n in near])
        count = dict(zip(near, counts, strict=True))
        return frozenset(map(light_stem, related.held(near, lambda n: count[n] > 0)))

    def match(self, content: str) -> tuple[float, list[str]]:
        """The share of the query's weight a statement holds, and the query words it holds (a
        word counts when its light stem does: "lives" holds "live"; a word no memory holds
        counts at the `related` share when one of its neighbours is held)."""
        total = sum(weight for _, _, weight in self.terms)
        if not total:
            return 0.0, []
        terms = index_text(content)
        held = frozenset(_stems(terms.words.split())) | frozenset(terms.grams.split())
        found = [(written, weight) for written, key, weight in self.terms if key in held]
        found += [(written, weight) for written, near, weight in self.related if near & held]
        return sum(weight for _, weight in found) / total, [written for written, _ in found]


def ranked_scores(matches: Sequence[float]) -> list[float]:
    """The scores of a merged recall, in its order: each statement's match, at most the score
    of the one before it. A memory's own ranking weighs more than the words a statement holds
    (dates, names, the newest version of a fact first), so it may place a statement holding more
    of the query's weight after one holding less; a score that rose down the list read as the
    list out of order."""
    scores: list[float] = []
    for match in matches:
        scores.append(round(min(match, scores[-1]) if scores else match, 4))
    return scores


def merge_heads(rankings: Sequence[Sequence[T]], key: Callable[[T], Any]) -> list[T]:
    """Merge rankings, each keeping its own order: the next item is the head that sorts first by
    `key`, and equal heads go in the order the rankings are given."""
    keys = [[key(item) for item in ranking] for ranking in rankings]
    heads = [0] * len(rankings)
    merged: list[T] = []
    while True:
        waiting = [(keys[i][heads[i]], i) for i, r in enumerate(rankings) if heads[i] < len(r)]
        if not waiting:
            return merged
        _, chosen = min(waiting, key=lambda entry: entry[0])
        merged.append(rankings[chosen][heads[chosen]])
        heads[chosen] += 1


def _stems(words: Sequence[str]) -> list[str]:
    return [light_stem(word) for word in words]
