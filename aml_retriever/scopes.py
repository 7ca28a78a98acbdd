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

import hashlib
import os
import re
import secrets
import sys
import time
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aml_retriever.errors import AmlError, IdempotencyConflict, InvalidField, NotFound, StoreError
from aml_retriever.service import MemoryService, iso_utc
from aml_retriever.signals import RetrievalConfig
from aml_retriever.validation import AddRequest, Message, SearchRequest

SCOPES = ("local", "global")
APP_NAME = "aml_retriever"
STORE_NAME = "memory.db"
MEMORY_USER = "memory"
DEFAULT_KIND = "note"
FORGET_REASON = "forget"
# A recall result must be one statement an agent can forget by its id, and the window signal
# returns consecutive statements as one result: it is off. Segments still lend each statement the
# context of those remembered with it. Weights are not part of the index identity, so these stores
# stay usable by every command run with the default settings.
MEMORY_RETRIEVAL = RetrievalConfig().without("window")
STATEMENT_ID = re.compile(r"(local|global):([1-9][0-9]{0,17})")


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


def local_store(project_root: Path) -> Path:
    return project_root / ".aml" / STORE_NAME


def global_store(global_root: Path) -> Path:
    return global_root / STORE_NAME


def normalized(content: str) -> str:
    """What makes two statements the same one: Unicode NFC, whitespace runs as one space, no
    surrounding whitespace. Case and punctuation are kept: they can change what is said."""
    return " ".join(unicodedata.normalize("NFC", content).split())


def statement_request_id(scope: str, content: str) -> str:
    """The Add request id of a statement: a hash of its scope and normalised content, so
    remembering the same statement again replays the first Add instead of storing a copy."""
    digest = hashlib.sha256(f"{scope}\0{normalized(content)}".encode()).hexdigest()
    return f"remember-{digest[:32]}"


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


def _statement(scope: str, item: dict[str, Any]) -> dict[str, Any]:
    return {"id": statement_id(scope, item["id"]), "scope": scope, "content": item["content"],
            "kind": item["role"], "time": item["created_at"]}


class ScopedMemory:
    """The local and the global memory, each a store opened on first use."""

    def __init__(self, stores: Mapping[str, Path], session_id: str | None = None) -> None:
        self.stores = dict(stores)
        self.session_id = session_id or new_session_id()
        self._services: dict[str, MemoryService] = {}

    @classmethod
    def at(cls, project_root: Path, global_root: Path | None = None) -> ScopedMemory:
        return cls({"local": local_store(project_root),
                    "global": global_store(global_root or default_global_root())})

    def close(self) -> None:
        for service in self._services.values():
            service.close()
        self._services.clear()

    # ---- the four operations -------------------------------------------------------------

    def remember(self, content: str, scope: str = "local", kind: str = DEFAULT_KIND) -> dict[str, Any]:
        """Store one statement through the Add path: durable and searchable on return."""
        service = self._service(scope, create=True)
        assert service is not None
        request = AddRequest(statement_request_id(scope, content), MEMORY_USER, self.session_id,
                             (Message(kind, content, None),))
        try:
            replayed = service.add(request)["replayed"]
        except IdempotencyConflict:
            # The same statement, remembered in another run, or up to spacing, or under another
            # kind, is already there; it stays as first written.
            replayed = True
        # A planned checkpoint after every write keeps memory.db complete on its own, so it can
        # be copied or committed while the server runs.
        service.store.checkpoint_dirty()
        stored = service.messages_of_request(MEMORY_USER, request.request_id)
        if not stored:
            raise StoreError("the statement was forgotten while it was being remembered; "
                             "remember it again")
        return {"statement": _statement(scope, stored[0]), "replayed": replayed}

    def recall(self, query: str, limit: int = 10, scope: str | None = None) -> dict[str, Any]:
        """The statements that best match the query, from one memory or both ranked together.

        Each memory is searched on its own (its own BM25 statistics), then the lists are merged
        by the fused score. That score is a reciprocal-rank sum over the same ranked lists with
        the same weights in both memories, so it depends on a statement's ranks and not on the
        size or word statistics of its memory: comparable across the two, where raw BM25 would
        not be. Equal scores keep local first (the project's own memory is the more specific),
        then each memory's own order."""
        found = []
        for order, name in enumerate(self._scopes(scope)):
            service = self._service(name, create=False)
            if service is None:
                continue
            data = service.search(SearchRequest(query, MEMORY_USER, limit, (), None))["data"]
            found += [((-item["score"], order, rank), name, item) for rank, item in enumerate(data)]
        found.sort(key=lambda entry: entry[0])
        return {"results": [{**_statement(name, item), "score": item["score"],
                             "why": item["evidence_flags"]} for _, name, item in found[:limit]]}

    def recent(self, limit: int = 10, scope: str | None = None) -> dict[str, Any]:
        """The newest statements, newest first; equal times keep local first, then newest id."""
        found = []
        for order, name in enumerate(self._scopes(scope)):
            service = self._service(name, create=False)
            if service is None:
                continue
            found += [((-row["timestamp_ms"], order, -int(row["id"][1:])), name, row)
                      for row in service.recent(MEMORY_USER, limit)]
        found.sort(key=lambda entry: entry[0])
        return {"results": [_statement(name, row) for _, name, row in found[:limit]]}

    def forget(self, statement: str | None = None, text: str | None = None,
               scope: str | None = None) -> dict[str, Any]:
        """Remove exactly one statement, named by its id or by its exact text. Text that matches
        several statements removes none (AmbiguousText lists them)."""
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
        if not service.forget(MEMORY_USER, [message_id], FORGET_REASON)["forgotten"]:
            raise NotFound(f"{match['id']} was forgotten meanwhile; nothing more to do", "id")
        return {"forgotten": match}

    # ---- helpers -------------------------------------------------------------------------

    def _by_id(self, statement: str, scope: str | None) -> dict[str, Any]:
        name, message_id = parse_statement_id(statement)
        if scope is not None and scope != name:
            raise InvalidField(f"id {statement} is in {name} memory but scope says {scope}; "
                               "leave scope out when forgetting by id", "scope")
        service = self._service(name, create=False)
        rows = service.messages(MEMORY_USER, [message_id]) if service else []
        if not rows:
            raise NotFound(f"there is no statement {statement} (it was forgotten, or never "
                           "stored); use recall or recent to find current ids", "id")
        return _statement(name, rows[0])

    def _by_text(self, text: str, scope: str | None) -> dict[str, Any]:
        """Statements whose content is the text exactly, or the same statement as remember sees
        it (whitespace aside), in every memory asked."""
        matches: dict[str, dict[str, Any]] = {}
        for name in self._scopes(scope):
            service = self._service(name, create=False)
            if service is None:
                continue
            rows = (service.messages_with_content(MEMORY_USER, text)
                    + service.messages_of_request(MEMORY_USER, statement_request_id(name, text)))
            for row in sorted(rows, key=lambda r: int(r["id"][1:])):
                matches.setdefault(statement_id(name, row["id"]), _statement(name, row))
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
        service = self._services[scope] = MemoryService.open(str(path), retrieval=MEMORY_RETRIEVAL)
        service.store.hold_shared()  # so `purge` refuses to remove the files under this server
        return service
