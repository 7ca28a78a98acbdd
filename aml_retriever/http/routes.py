"""The HTTP routes: path templates, each method's call into the service, and how a request
path finds its route. Handlers parse what the path and query carry and call the service; the
framing around them (authentication, bodies, answers, logs) is server.py's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any
from urllib.parse import unquote, urlsplit

from aml_retriever.common.errors import InvalidField, NotFound, UnknownUser
from aml_retriever.http.metrics import CONTENT_TYPE, Metrics
from aml_retriever.memory import exchange
from aml_retriever.memory.lifecycle import NotProposed, Statements
from aml_retriever.memory.listing import Listing, absent
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import (
    ADD_FIELDS,
    DELETE_USER_FIELDS,
    SEARCH_FIELDS,
    parse_add,
    parse_audit_order,
    parse_list,
    parse_message_id,
    parse_page,
    parse_search,
    parse_user,
)


@dataclass(frozen=True)
class Raw:
    """An answer that is not a JSON object (the NDJSON of an export, the metrics' text, a file
    of the inspector page; no content type for a 304, which has no body)."""

    data: bytes
    content_type: str | None


Answer = dict[str, Any] | Raw
Params = dict[str, str]


@dataclass(frozen=True)
class Call:
    """What a route's handler has of its request besides the body and the path's params: the
    query string, and what it may call."""

    query: str
    service: MemoryService
    metrics: Metrics
    max_messages: int  # the most messages one Add may carry (the `max_messages` setting)


@dataclass(frozen=True)
class Route:
    """One method of one path template; `{name}` segments are percent-decoded into params."""

    label: str  # the template, which the access log shows: never a user id
    method: str
    handler: Callable[[Call, dict[str, Any] | None, Params], Answer]
    body: bool = False  # reads a JSON body (a POST without one takes no body, and ignores any)
    fields: frozenset[str] = frozenset()  # the keys of the body it reads (others are named back)

    @cached_property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.label.split("/"))

    def match(self, parts: list[str]) -> Params | None:
        """The params of a path split at "/", or None when it is not this template's."""
        if len(parts) != len(self.parts) or any(
                part != template for part, template in zip(parts, self.parts, strict=True)
                if not template.startswith("{")):
            return None
        params = {}
        for part, template in zip(parts, self.parts, strict=True):
            if template.startswith("{"):
                name = template[1:-1]
                try:
                    params[name] = unquote(part, errors="strict")
                except UnicodeDecodeError:
                    raise InvalidField(f"{name} in the path must be percent-encoded UTF-8",
                                       name) from None
        return params


def _user(params: Params) -> str:
    return parse_user({"user_id": params["user_id"]})


def _held_user(c: Call, params: Params) -> str:
    """The path's user, for a read of its memory: one the store does not hold (never added, or
    deleted) is a 404 `unknown_user` naming `user_id`, not an empty page that reads as an
    empty memory. Search answers such a user 200 with no data, as the contract asks, and a
    DELETE what it removed: nothing."""
    user_id = _user(params)
    if not c.service.holds(user_id):
        raise UnknownUser("user_id names no user this store holds: never added, or deleted "
                          "(GET /users lists those it holds)", "user_id")
    return user_id


def _add(c: Call, body: dict[str, Any] | None, _: Params) -> Answer:
    return c.service.add(parse_add(body or {}, c.max_messages))


def _search(c: Call, body: dict[str, Any] | None, _: Params) -> Answer:
    return c.service.search(parse_search(body or {}))


def _delete_user_post(c: Call, body: dict[str, Any] | None, _: Params) -> Answer:
    return c.service.delete_user(parse_user(body or {}))


def _delete_user_path(c: Call, _: dict[str, Any] | None, params: Params) -> Answer:
    return c.service.delete_user(_user(params))


def _audit(c: Call, _: dict[str, Any] | None, params: Params) -> Answer:
    after, limit = parse_page(c.query)
    return c.service.audit(_held_user(c, params), after, limit, parse_audit_order(c.query))


def _users(c: Call, _: dict[str, Any] | None, __: Params) -> Answer:
    return Listing(c.service.store).users(parse_list(c.query))


def _sessions(c: Call, _: dict[str, Any] | None, params: Params) -> Answer:
    user_id = _held_user(c, params)
    return Listing(c.service.store).sessions(user_id, parse_list(c.query))


def _messages(c: Call, _: dict[str, Any] | None, params: Params) -> Answer:
    user_id = _held_user(c, params)
    return Listing(c.service.store).messages(user_id, parse_list(c.query))


def _speakers(c: Call, _: dict[str, Any] | None, params: Params) -> Answer:
    return c.service.speakers(_held_user(c, params))


def _message(c: Call, _: dict[str, Any] | None, params: Params) -> Answer:
    return Listing(c.service.store).message(_held_user(c, params), parse_message_id(params["id"]))


def _forget(c: Call, _: dict[str, Any] | None, params: Params) -> Answer:
    """The removal path of MCP `forget` (service.forget), audited with actor http."""
    user_id, message_id = _held_user(c, params), parse_message_id(params["id"])
    if not c.service.forget(user_id, [message_id], "forget", "http")["forgotten"]:
        raise absent(message_id)
    return {"success": True, "user_id": user_id, "id": f"m{message_id}", "forgotten": 1}


def _reviewed(c: Call, params: Params) -> tuple[Statements, int]:
    """The statements of the path's user and the message under review, which must exist (so a
    review of an unknown user makes no file)."""
    user_id, message_id = _held_user(c, params), parse_message_id(params["id"])
    Listing(c.service.store).message(user_id, message_id)
    return Statements(c.service, user_id, "http"), message_id


def _confirm(c: Call, _: dict[str, Any] | None, params: Params) -> Answer:
    """The path of `review --confirm`; a message confirmed already is not awaiting review."""
    statements, message_id = _reviewed(c, params)
    if statements.confirm(message_id).replayed:
        raise NotProposed(f"m{message_id} is confirmed, not proposed", "id")
    return {"success": True, "id": f"m{message_id}", "trust": "confirmed"}


def _reject(c: Call, _: dict[str, Any] | None, params: Params) -> Answer:
    """The path of `review --reject`: the statement is forgotten and leaves a tombstone."""
    statements, message_id = _reviewed(c, params)
    statements.reject(message_id)
    return {"success": True, "id": f"m{message_id}", "rejected": True}


def _export(c: Call, _: dict[str, Any] | None, params: Params) -> Answer:
    """NDJSON of the Add bodies that rebuild the user (exchange.py): empty for a user whose
    every message was forgotten."""
    return Raw(exchange.export_bytes(c.service.store, _held_user(c, params)), "application/x-ndjson")


# Every route, one row per method of a path template. A path that matches a template but not
# its method is a 405 naming the template's methods; one that matches none is a 404.
ROUTES: tuple[Route, ...] = (
    Route("/health", "GET", lambda c, b, p: c.service.health()),
    Route("/stats", "GET", lambda c, b, p: c.service.stats()),
    Route("/metrics", "GET", lambda c, b, p: Raw(c.metrics.exposition(), CONTENT_TYPE)),
    Route("/add", "POST", _add, body=True, fields=ADD_FIELDS),
    Route("/search", "POST", _search, body=True, fields=SEARCH_FIELDS),
    Route("/delete_user", "POST", _delete_user_post, body=True, fields=DELETE_USER_FIELDS),
    Route("/users", "GET", _users),
    Route("/users/{user_id}", "DELETE", _delete_user_path),
    Route("/users/{user_id}/audit", "GET", _audit),
    Route("/users/{user_id}/sessions", "GET", _sessions),
    Route("/users/{user_id}/messages", "GET", _messages),
    Route("/users/{user_id}/speakers", "GET", _speakers),
    Route("/users/{user_id}/messages/{id}", "GET", _message),
    Route("/users/{user_id}/messages/{id}", "DELETE", _forget),
    Route("/users/{user_id}/messages/{id}/confirm", "POST", _confirm),
    Route("/users/{user_id}/messages/{id}/reject", "POST", _reject),
    Route("/users/{user_id}/export", "GET", _export),
)
# The one path served without a key: load balancers and platforms probe it.
OPEN_PATH = "/health"
# Routes answered without waiting for a turn at the service: probes and scrapes must see a busy
# server as it is (neither reads a user file: /metrics shows the store scan's cached values).
UNQUEUED = frozenset({OPEN_PATH, "/metrics"})


def resolve(raw_path: str) -> tuple[list[Route], Params]:
    """The routes (one per method) of the template a request path matches, and its params."""
    parts = urlsplit(raw_path).path.split("/")
    for route in ROUTES:
        params = route.match(parts)
        if params is not None:
            return [r for r in ROUTES if r.label == route.label], params
    if _unencoded_slash(parts):
        raise NotFound("no such endpoint; a user id holding \"/\" is sent with it encoded as "
                       "%2F (see docs/API_CONTRACT.md)")
    raise NotFound("no such endpoint; see docs/API_CONTRACT.md")


def _unencoded_slash(parts: list[str]) -> bool:
    """Whether the path names a route once some of its segments after /users/ are read as one
    user id holding "/" (/users/team/ana/messages): the id was sent unencoded."""
    if len(parts) < 4 or parts[1] != "users":
        return False
    return any(route.match(["", "users", "%2F".join(parts[2:end]), *parts[end:]]) is not None
               for end in range(4, len(parts)) for route in ROUTES)
