"""Request bodies in, typed requests out, or a 4xx that names the field and the rule.

Nothing here echoes a caller's content: messages name the field and what it must be.
Unknown top-level fields are ignored, so a platform that sends extra metadata still works.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

from aml_retriever.common.errors import InvalidBody, InvalidField, PayloadTooLarge
from aml_retriever.storage.audit import MAX_PAGE
from aml_retriever.storage.timeline import CURRENT, ReadFilter

ID_MAX_CHARS = 256
TOP_K_DEFAULT, TOP_K_MAX = 10, 100
# The largest word budget a Search may ask for: a million words is beyond any reader's context.
MAX_WORDS_MAX = 1_000_000
OPTIONS_MAX = 32
AUDIT_PAGE = 100  # audit events a page holds when the caller names no limit
# The range a timestamp can take and still be rendered as an ISO 8601 date (years 1 to 9999).
TIMESTAMP_MIN_MS = -62_135_596_800_000
TIMESTAMP_MAX_MS = 253_402_300_799_999
# A number below this (1 January 1973 in milliseconds) is refused as a timestamp: it is almost
# always seconds (time.time() today is ~1.8e9, which as milliseconds is 21 January 1970, and
# every line of the reader's view would say so). An earlier date is sent as ISO 8601 text.
SECONDS_BELOW_MS = 94_694_400_000


@dataclass(frozen=True)
class Message:
    role: str
    content: str
    timestamp_ms: int | None  # None: the Add gave none; the receive time is used


@dataclass(frozen=True)
class AddRequest:
    request_id: str
    user_id: str
    session_id: str
    messages: tuple[Message, ...]

    def payload_hash(self) -> str:
        """What makes two Adds with one request_id "the same": session and messages as sent."""
        canonical = json.dumps([self.session_id, [[m.role, m.content, m.timestamp_ms]
                                                  for m in self.messages]],
                               ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class SearchRequest:
    query: str
    user_id: str
    top_k: int
    options: tuple[str, ...]
    session_id: str | None
    max_words: int | None = None  # a reader's word budget for the results (an extension)
    read: ReadFilter = CURRENT  # as_of, since, until, include_history (extensions)
    explain: bool = False  # each result carries its ranking signals (an extension)


def parse_json(body: bytes) -> dict[str, Any]:
    """Decode a request body: strict UTF-8, plain JSON (no NaN), no duplicate keys, an object."""
    try:
        text = body.decode("utf-8-sig")  # a leading byte-order mark is tolerated
    except UnicodeDecodeError:
        raise InvalidBody("body must be UTF-8 encoded JSON", "body") from None
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except _DuplicateKey as exc:
        if exc.key == "body":
            raise InvalidBody("body repeats a key", "body") from None
        raise InvalidBody(f"body has the key {exc.key!r} more than once", exc.key) from None
    except (ValueError, RecursionError):
        raise InvalidBody("body must be valid JSON", "body") from None
    if not isinstance(data, dict):
        raise InvalidBody("body must be a JSON object", "body")
    return data


# The keys each body is read for: an Add's, each of its messages', a Search's, a deletion's.
ADD_FIELDS = frozenset({"request_id", "user_id", "session_id", "messages"})
MESSAGE_FIELDS = frozenset({"role", "content", "timestamp"})
SEARCH_FIELDS = frozenset({"query", "user_id", "top_k", "options", "filter_session", "session_id",
                           "max_words", "as_of", "since", "until", "include_history", "explain"})
DELETE_USER_FIELDS = frozenset({"user_id"})
# The keys this service reads. A repeated one is named in the error; any other key is the
# caller's own text (it may be content), so the error names only the body.
FIELD_NAMES = ADD_FIELDS | MESSAGE_FIELDS | SEARCH_FIELDS
# What an ignored key may be named as to its caller (`ignored_fields`): a plain name, short; any
# other is counted, never echoed (it may be content, and it would go into a header).
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MOST_IGNORED_NAMED = 10


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key if key in FIELD_NAMES else "body"


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(key)
        seen[key] = value
    return seen


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def is_text(value: str) -> bool:
    """True when the string is valid Unicode (JSON allows lone surrogates; SQLite cannot)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _string(data: dict[str, Any], field: str, *, max_chars: int | None = None,
            path: str | None = None, blank_ok: bool = True) -> str:
    name = path or field
    value = data.get(field)
    if not isinstance(value, str) or value == "":
        raise InvalidField(f"{name} must be a non-empty string", name)
    if not blank_ok and not value.strip():
        raise InvalidField(f"{name} must not be only whitespace", name)
    if max_chars is not None and len(value) > max_chars:
        raise InvalidField(f"{name} must be at most {max_chars} characters", name)
    if not is_text(value):
        raise InvalidField(f"{name} must be valid Unicode text (no lone surrogates)", name)
    return value


def identifier(data: dict[str, Any], field: str) -> str:
    """An opaque id: 1..256 characters, not only whitespace, kept byte for byte."""
    return _string(data, field, max_chars=ID_MAX_CHARS, blank_ok=False)


def parse_timestamp(value: Any, name: str, numbers_from_1973: bool = True) -> int | None:
    """Milliseconds since the epoch from an integer, a float (truncated) or an ISO 8601 string.
    A number that reads as a date before 1973 looks like seconds and is refused, unless
    `numbers_from_1973` is False (an export of this service, whose numbers are milliseconds)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise InvalidField(f"{name} must be milliseconds since the epoch or an ISO 8601 string", name)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidField(f"{name} must be a finite number", name)
        ms = int(value)
        if numbers_from_1973 and ms < SECONDS_BELOW_MS:
            raise InvalidField(f"{name} must be milliseconds since the epoch: {ms} reads as a date "
                               "before 1973, which looks like seconds (multiply by 1000); send "
                               "an earlier date as an ISO 8601 string", name)
    elif isinstance(value, str):
        ms = _iso_to_ms(value, name)
    else:
        raise InvalidField(f"{name} must be milliseconds since the epoch or an ISO 8601 string", name)
    if not TIMESTAMP_MIN_MS <= ms <= TIMESTAMP_MAX_MS:
        raise InvalidField(f"{name} must fall between the years 1 and 9999", name)
    return ms


def _iso_to_ms(value: str, name: str) -> int:
    try:
        parsed = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidField(f"{name} must be milliseconds since the epoch or an ISO 8601 string",
                           name) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)  # a time without a zone is taken as UTC
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (parsed - epoch) // dt.timedelta(milliseconds=1)


def ignored_fields(data: dict[str, Any], fields: frozenset[str]) -> str:
    """The keys of a body its route does not read (and, for an Add, of its messages), as its
    caller is told them ("topk, filters"; "" for none): a body with a misspelt key is answered as
    without it, and the caller learns why. At most MOST_IGNORED_NAMED named, each a plain name;
    the rest counted."""
    keys = sorted(set(data) - fields)
    if fields is ADD_FIELDS and isinstance(data.get("messages"), list):
        keys += sorted({f"messages[].{k}" for m in data["messages"] if isinstance(m, dict)
                        for k in set(m) - MESSAGE_FIELDS})
    named = [k for k in keys if _PLAIN_KEY.fullmatch(k.removeprefix("messages[]."))]
    shown = named[:MOST_IGNORED_NAMED]
    rest = len(keys) - len(shown)
    return ", ".join(shown + ([f"{rest} more"] if rest else []))


def parse_add(data: dict[str, Any], max_messages: int, exported: bool = False) -> AddRequest:
    """An Add body as a request, or a 4xx naming the field. `exported`: a line of this service's
    own export, whose numeric timestamps are milliseconds whatever their date."""
    request_id = identifier(data, "request_id")
    user_id = identifier(data, "user_id")
    session_id = identifier(data, "session_id")
    raw = data.get("messages")
    if not isinstance(raw, list) or not raw:
        raise InvalidField("messages must be a non-empty list of messages", "messages")
    if len(raw) > max_messages:
        raise PayloadTooLarge(f"messages must hold at most {max_messages} messages", "messages")
    messages = tuple(_message(item, f"messages[{i}]", exported) for i, item in enumerate(raw))
    return AddRequest(request_id, user_id, session_id, messages)


def _message(item: Any, path: str, exported: bool = False) -> Message:
    if not isinstance(item, dict):
        raise InvalidField(f"{path} must be an object with role and content", path)
    role = _string(item, "role", max_chars=ID_MAX_CHARS, path=f"{path}.role")
    content = _string(item, "content", path=f"{path}.content")
    timestamp = parse_timestamp(item.get("timestamp"), f"{path}.timestamp",
                                numbers_from_1973=not exported)
    return Message(role, content, timestamp)


def parse_search(data: dict[str, Any]) -> SearchRequest:
    query = _string(data, "query", blank_ok=False)
    user_id = identifier(data, "user_id")
    top_k = TOP_K_DEFAULT if data.get("top_k") is None else data["top_k"]
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= TOP_K_MAX:
        raise InvalidField(f"top_k must be an integer from 1 to {TOP_K_MAX}", "top_k")
    options = _options(data.get("options"))
    filter_session = False if data.get("filter_session") is None else data["filter_session"]
    if not isinstance(filter_session, bool):
        raise InvalidField("filter_session must be true or false", "filter_session")
    session_id = identifier(data, "session_id") if data.get("session_id") is not None else None
    if filter_session and session_id is None:
        raise InvalidField("session_id is required when filter_session is true", "session_id")
    max_words = data.get("max_words")
    if max_words is not None and (isinstance(max_words, bool) or not isinstance(max_words, int)
                                  or not 1 <= max_words <= MAX_WORDS_MAX):
        raise InvalidField(f"max_words must be an integer from 1 to {MAX_WORDS_MAX}", "max_words")
    explain = False if data.get("explain") is None else data["explain"]
    if not isinstance(explain, bool):
        raise InvalidField("explain must be true or false", "explain")
    return SearchRequest(query, user_id, top_k, options, session_id if filter_session else None,
                         max_words, parse_read(data), explain)


def parse_read(data: dict[str, Any]) -> ReadFilter:
    """The timeline fields of a read: as_of (a record time), since and until (event times, both
    included) and include_history; absent, the read sees the current memory."""
    include_history = False if data.get("include_history") is None else data["include_history"]
    if not isinstance(include_history, bool):
        raise InvalidField("include_history must be true or false", "include_history")
    return ReadFilter(as_of_ms=parse_timestamp(data.get("as_of"), "as_of"),
                      since_ms=parse_timestamp(data.get("since"), "since"),
                      until_ms=parse_timestamp(data.get("until"), "until"),
                      include_history=include_history)


def _options(raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or len(raw) > OPTIONS_MAX:
        raise InvalidField(f"options must be a list of at most {OPTIONS_MAX} strings", "options")
    return tuple(_string({"o": item}, "o", path=f"options[{i}]") for i, item in enumerate(raw))


def parse_user(data: dict[str, Any]) -> str:
    return identifier(data, "user_id")


def query_fields(query: str) -> dict[str, list[str]]:
    """A URL query string's values by name, decoded as forms encode them ('+' a space, %XX
    UTF-8). A part that is not UTF-8 answers 400 naming its parameter (or `query`, when the name
    itself cannot be read), never an internal error."""
    fields: dict[str, list[str]] = {}
    for part in query.split("&"):
        if not part:
            continue
        raw_name, _, raw_value = part.partition("=")
        try:
            name = unquote_plus(raw_name, errors="strict")
        except UnicodeDecodeError:
            raise InvalidField("the query string must be percent-encoded UTF-8", "query") from None
        try:
            value = unquote_plus(raw_value, errors="strict")
        except UnicodeDecodeError:
            raise InvalidField(f"{_shown(name)} must be percent-encoded UTF-8", _shown(name)) from None
        fields.setdefault(name, []).append(value)
    return fields


def _shown(name: str) -> str:
    """A parameter's name as an error names it: only the names this service reads."""
    return name if name in QUERY_NAMES else "query"


def parse_page(query: str) -> tuple[int, int]:
    """`cursor` and `limit` of a paged read from a URL query string: where the last page ended
    (0: from the start) and how many at most (1 to audit.MAX_PAGE, default AUDIT_PAGE)."""
    fields = query_fields(query)
    values = {}
    for name, default, low, high in (("cursor", 0, 0, 2**63 - 1), ("limit", AUDIT_PAGE, 1, MAX_PAGE)):
        given = fields.get(name, [str(default)])
        if len(given) != 1:
            raise InvalidField(f"{name} must be a whole number from {low} to {high}", name)
        values[name] = whole_number(given[0], low, high, name)
    return values["cursor"], values["limit"]


def parse_audit_order(query: str) -> bool:
    """Whether an audit page is asked newest first (`order=newest`); the log reads in the order
    it was written unless asked otherwise (`order=oldest`, the default)."""
    given = query_fields(query).get("order", ["oldest"])
    if len(given) != 1 or given[0] not in ORDERS:
        raise InvalidField(f"order must be one of {', '.join(ORDERS)}", "order")
    return given[0] == "newest"


def whole_number(text: str, low: int, high: int, name: str) -> int:
    """A whole number from a URL, within [low, high], or a 400 naming it. Its digits are counted
    before it is converted: Python refuses more than 4,300 (a 500 before this check)."""
    if not text.isascii() or not text.isdigit() or len(text.lstrip("0")) > len(str(high)) \
            or not low <= int(text) <= high:
        raise InvalidField(f"{name} must be a whole number from {low} to {high}", name)
    return int(text)


# The query parameters the listings read; any other is ignored (and never named in an error).
QUERY_NAMES = frozenset({"cursor", "limit", "order", "session_id", "status"})
ORDERS = ("newest", "oldest")
STATUSES = ("current", "proposed", "all")
LIST_PAGE = 50  # items a page of a listing holds when the caller names no limit
CURSOR_MAX_CHARS = 2048  # the longest cursor a listing gives (a 256-character user id in it)


@dataclass(frozen=True)
class ListQuery:
    """A page of a listing asked for in a URL query string."""

    cursor: str | None = None
    limit: int = LIST_PAGE
    order: str = "newest"
    session_id: str | None = None
    status: str = "current"


def parse_list(query: str) -> ListQuery:
    """`cursor`, `limit`, `order`, `session_id` and `status` of a listing; an empty value is the
    same as none (a form leaves unused fields empty), a repeated one is refused."""
    fields = query_fields(query)
    given: dict[str, str] = {}
    for name in QUERY_NAMES:
        values = fields.get(name, [])
        if len(values) > 1:
            raise InvalidField(f"{name} must be given at most once", name)
        if values and values[0] != "":
            given[name] = values[0]
    limit = whole_number(given.get("limit", str(LIST_PAGE)), 1, MAX_PAGE, "limit")
    cursor = given.get("cursor")
    if cursor is not None and len(cursor) > CURSOR_MAX_CHARS:
        raise InvalidField("cursor must be a next_cursor this listing gave, passed back unchanged",
                           "cursor")
    order = given.get("order", ORDERS[0])
    if order not in ORDERS:
        raise InvalidField("order must be newest or oldest", "order")
    status = given.get("status", STATUSES[0])
    if status not in STATUSES:
        raise InvalidField("status must be current, proposed or all", "status")
    session_id = identifier(given, "session_id") if "session_id" in given else None
    return ListQuery(cursor, limit, order, session_id, status)


def parse_message_id(text: str) -> int:
    """A message id in a path, as Search and the listings give it ("m12")."""
    digits = text[1:]
    if not text.startswith("m") or not digits.isascii() or not digits.isdigit() \
            or digits.startswith("0") or len(digits) > 18:
        raise InvalidField("id must be a message id as Search returns it, such as m12", "id")
    return int(digits)
