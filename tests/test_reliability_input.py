"""Hostile input never reaches a 500. Whatever a caller sends (any JSON value in any field, huge and
negative numbers, deep nesting, long strings, control characters and NUL, lone surrogates, invalid
UTF-8, wrong content types, repeated keys, FTS5 operators and quotes in queries), the answer is a
2xx or a JSON 4xx naming the field; an error never quotes the caller's text back; a query is only
ever searched as words, and only the named user's rows come back.

Property-based (hypothesis) in two layers: the validator and the query builder in-process, then
the same inputs against a real server. Whatever the validator accepts, the published schema
(aml_retriever/http/openapi.json) accepts too. AML_PROPERTY_SCALE=20 runs twenty times the examples."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from pathlib import Path

import pytest
from conftest import Client, start_app
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aml_retriever.analysis.dates import extract_dates
from aml_retriever.analysis.tokenizer import FTS_TOKENIZE, match_expression, query_terms
from aml_retriever.common.errors import AmlError, InvalidBody
from aml_retriever.engine.query import plan
from aml_retriever.memory.validation import parse_add, parse_json, parse_search

# Planted in generated text: an error that quotes the caller's text would show it.
CANARY = "cnry7Q"
FTS5_HAZARDS = ('"', '""', "'", "*", "^", "-", "+", ":", "(", ")", "{", "}", "NEAR", "NEAR(a b, 2)",
                "AND", "OR", "NOT", "words:", "grams :", "user_id:", "message_index:", "rowid",
                "{words grams}:", "a*", "^start", "-excluded", '"unterminated', "\\", "%", "_", ";",
                "--", "/*", "*/", "'); DROP TABLE messages; --", "MATCH", "\x00", "\u202e",
                "\ufeff", "\u0301", "\u200d", "\U0001f600", "北京", "a" * 300)
FIELD = re.compile(r"(request_id|user_id|session_id|messages|query|top_k|options|filter_session|body"
                   r"|Content-Type|Content-Length)|messages\[\d+\](\.(role|content|timestamp))?"
                   r"|options\[\d+\]")
ADD = {"request_id": "r1", "user_id": "owner", "session_id": "s1",
       "messages": [{"role": "user", "content": "hello", "timestamp": 1_700_000_000_000}]}
SEARCH = {"query": "hello", "user_id": "owner", "top_k": 5}

texts = st.one_of(st.text(max_size=30), st.text(max_size=10).map(lambda s: s + CANARY + s),
                  st.sampled_from(FTS5_HAZARDS), st.text(min_size=300, max_size=2000))
numbers = st.one_of(st.integers(), st.integers(min_value=-10**40, max_value=10**40),
                    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([
                        0, -1, 1, 100, 101, 2**63, -2**63, 2**64, 1e308, -1e308, 5.0, -0.0, 0.5,
                        253_402_300_799_999, 253_402_300_800_000, -62_135_596_800_001]))
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(texts, inner, max_size=4), max_leaves=16)
SCALE = max(1, int(os.environ.get("AML_PROPERTY_SCALE", "1")))
QUICK = settings(max_examples=150 * SCALE, deadline=None)
OVER_HTTP = settings(max_examples=60 * SCALE, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def assert_refusal_names_the_field(error: AmlError) -> None:
    assert 400 <= error.status < 500
    assert error.field is not None and FIELD.fullmatch(error.field), error.field
    assert CANARY not in error.message and CANARY not in error.field


def with_field(base: dict, draw_field: str, value: object, drop: bool) -> dict:
    body = {k: v for k, v in base.items() if not (drop and k == draw_field)}
    if not drop:
        body[draw_field] = value
    return body


# ---- the validator, in-process ------------------------------------------------------------


@QUICK
@given(st.binary(max_size=300))
@example(b"\xed\xa0\x80")  # a surrogate encoded as UTF-8: not UTF-8
@example(b'{"a": "\xc0\xaf"}')  # an overlong encoding
@example(b"\xef\xbb\xbf{}")  # a byte-order mark, tolerated
@example('{"q": 1}'.encode("utf-16"))
def test_any_bytes_parse_to_an_object_or_are_a_400_naming_the_body(raw):
    try:
        assert isinstance(parse_json(raw), dict)
    except InvalidBody as error:
        assert_refusal_names_the_field(error)


@QUICK
@given(json_values, st.sampled_from(["", "user_id", CANARY + "key"]), st.integers(0, 3))
def test_any_json_document_parses_or_is_refused_without_quoting_it(document, repeated, depth):
    text = json.dumps(document)
    if repeated:  # the same key twice, at some depth
        inner = json.dumps(repeated)
        text = "[" * depth + "{" + f"{inner}: 1, {inner}: 2" + "}" + "]" * depth
    try:
        parse_json(text.encode("utf-8", "surrogatepass"))
    except InvalidBody as error:
        assert_refusal_names_the_field(error)


@QUICK
@given(st.sampled_from(["request_id", "user_id", "session_id", "messages"]), json_values, st.booleans())
def test_add_with_any_value_in_any_field_is_accepted_or_refused_by_name(field, value, drop):
    try:
        request = parse_add(with_field(ADD, field, value, drop), max_messages=200)
    except AmlError as error:
        assert_refusal_names_the_field(error)
        return
    assert (request.request_id, request.user_id, request.session_id) == (
        ADD["request_id"] if field != "request_id" else value,
        ADD["user_id"] if field != "user_id" else value,
        ADD["session_id"] if field != "session_id" else value)  # kept byte for byte


@QUICK
@given(st.sampled_from(["role", "content", "timestamp", "extra"]), json_values, st.booleans())
@example("timestamp", "9999-12-31T23:59:59-23:59", False)
@example("timestamp", "0001-01-01T00:00:00+23:59", False)
@example("timestamp", float("1e300"), False)
def test_message_with_any_value_in_any_field_is_accepted_or_refused_by_name(field, value, drop):
    message = with_field(ADD["messages"][0], field, value, drop)
    try:
        parse_add({**ADD, "messages": [message, message]}, max_messages=200)
    except AmlError as error:
        assert_refusal_names_the_field(error)


@QUICK
@given(st.sampled_from(["query", "user_id", "top_k", "options", "session_id", "filter_session"]),
       json_values, st.booleans())
def test_search_with_any_value_in_any_field_is_accepted_or_refused_by_name(field, value, drop):
    try:
        request = parse_search(with_field({**SEARCH, "session_id": "s1", "filter_session": True},
                                          field, value, drop))
    except AmlError as error:
        assert_refusal_names_the_field(error)
        return
    assert 1 <= request.top_k <= 100 and request.query.strip()


# ---- the query builder, in-process --------------------------------------------------------

QUOTED = r'"(?:[^"\x00]|"")*"'
SAFE_EXPRESSION = re.compile(rf"(?:words : \({QUOTED}(?: OR {QUOTED})*\))?(?: OR )?"
                             rf"(?:grams : \({QUOTED}(?: OR {QUOTED})*\))?", re.DOTALL)
SAFE_TERM = re.compile(rf"(?:words|grams) : {QUOTED}", re.DOTALL)
hazardous_queries = st.lists(st.one_of(st.sampled_from(FTS5_HAZARDS), st.text(max_size=12)),
                             min_size=1, max_size=12).map(" ".join)


@pytest.fixture(scope="module")
def fts():
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(words, grams, tokenize=\"{FTS_TOKENIZE}\")")
    conn.execute("INSERT INTO t (rowid, words, grams) VALUES (1, 'near and or not words grams', '')")
    yield conn
    conn.close()


@settings(max_examples=300 * SCALE, deadline=None)
@given(st.one_of(hazardous_queries, st.text(max_size=200)))
def test_every_query_becomes_quoted_terms_that_fts5_accepts(fts, query):
    terms = query_terms(query)
    expression = match_expression(terms)
    for term in plan(query).lexical:  # what a Search asks of FTS5, one term at a time
        assert SAFE_TERM.fullmatch(term.expression), term.expression
        fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (term.expression,)).fetchall()
    if expression is None:
        assert not terms
        return
    assert SAFE_EXPRESSION.fullmatch(expression), expression  # user text only inside quotes
    fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()


def test_fts5_operators_in_a_query_are_searched_as_plain_words(fts):
    expression = match_expression(query_terms('NEAR(words grams) AND "or" NOT words:*'))
    assert fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall() == [(1,)]
    assert match_expression(query_terms('" * ^ : ( ) -')) is None  # punctuation alone: nothing


# ---- the same against a real server -------------------------------------------------------

OWNER_WORDS = "harbor lantern orchard violin"
STRANGER = "strangermark55"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    app = start_app(tmp_path_factory.mktemp("input"))
    c = Client(app.port)
    for i, words in enumerate([OWNER_WORDS, "near and or not", 'quotes " and * stars']):
        assert c.add("owner", f"seed-{i}", [f"{words} {i}"]).status == 200
        assert c.add("stranger", f"seed-{i}", [f"{STRANGER} {words} {i}"]).status == 200
    c.close()
    yield app
    app.stop()


def assert_answer(response, status_ok=200) -> None:
    assert response.status < 500, response.raw
    if response.status >= 400:
        assert set(response.body) == {"error"} and set(response.body["error"]) == {"code", "message",
                                                                                   "field"}
        field = response.body["error"]["field"]
        assert field is not None and FIELD.fullmatch(field), response.body
        assert CANARY.encode() not in response.raw
    else:
        assert response.status == status_ok


@OVER_HTTP
@given(st.sampled_from(["request_id", "user_id", "session_id", "messages"]), json_values, st.booleans())
def test_hostile_add_over_http_is_2xx_or_a_json_4xx_naming_the_field(http, field, value, drop):
    body = with_field({**ADD, "user_id": "hostile-adds"}, field, value, drop)
    if field != "request_id":
        body["request_id"] = f"r-{http.port}-{json.dumps(value)[:50]}"
    assert_answer(http.post("/add", body))


@OVER_HTTP
@given(st.sampled_from(["query", "user_id", "top_k", "options", "session_id", "filter_session"]),
       json_values, st.booleans())
def test_hostile_search_over_http_is_2xx_or_a_json_4xx_naming_the_field(http, field, value, drop):
    response = http.post("/search", with_field(SEARCH, field, value, drop))
    assert_answer(response)
    if response.status == 200:
        assert all(STRANGER not in item["content"] for item in response.body["data"])


@OVER_HTTP
@given(hazardous_queries, st.one_of(st.none(), st.lists(hazardous_queries, min_size=1, max_size=3)),
       st.booleans())
@example(f"{OWNER_WORDS} {STRANGER}", None, False)
def test_hostile_queries_return_only_the_owners_rows(http, query, options, filter_session):
    body = {"user_id": "owner", "query": query, "top_k": 100, "options": options}
    if filter_session:
        body.update(session_id="s1", filter_session=True)
    response = http.post("/search", body)
    assert_answer(response)
    if response.status == 200:
        assert all(STRANGER not in item["content"] and item["session_id"] == "s1"
                   for item in response.body["data"])
    control = http.search("owner", "orchard")  # the owner's own rows are there to be found
    assert [item["content"] for item in control.body["data"]] == [f"{OWNER_WORDS} 0"]


@OVER_HTTP
@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=200))
@example("\x00\x01\x1f\x7f tab\there")
@example("\u202e\ufeff\u200d")
def test_content_with_any_characters_is_stored_and_returned_byte_for_byte(http, text):
    user = f"bytes-{abs(hash(text))}"
    content = f"roundtripmark {text}"
    http.request("DELETE", f"/users/{user}")
    assert http.add(user, "r1", [content]).status == 200
    data = http.search(user, "roundtripmark").body["data"]
    assert [item["content"] for item in data] == [content]


@pytest.mark.parametrize("raw,field", [
    (b'{"query": "x", "user_id": "owner", "top_k": ' + b"9" * 5000 + b"}", "body"),
    (b'{"query": "x", "user_id": "owner", "top_k": 1e999}', "top_k"),
    (b'{"query": "x", "user_id": "owner", "top_k": -0}', "top_k"),
    (b'{"query": "x", "user_id": "owner", "top_k": Infinity}', "body"),
    (b'{"query": "x", "user_id": "owner", "top_k": NaN}', "body"),
    (b'{"query": "a\x00b", "user_id": "owner"}', "body"),  # a raw control character in a string
    (b'{"query": "\xed\xa0\x80", "user_id": "owner"}', "body"),  # a surrogate encoded as bytes
    (b'{"query": "\xc0\xaf", "user_id": "owner"}', "body"),  # an overlong encoding
    (b'{"query": "\xe2\x82", "user_id": "owner"}', "body"),  # a truncated sequence
    (b'{"query": "\\udc80", "user_id": "owner"}', "query"),  # a lone low surrogate, escaped
    (b'{"query": "x", "user_id": "owner", "options": ["\\ud83d"]}', "options[0]"),
    (b'{"query": "x", "user_id": "owner", "x": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", "body"),
    (b'{"query": "x", "user_id": "owner", "x": ' + b'{"a":' * 20_000 + b"1" + b"}" * 20_000 + b"}",
     "body"),
    ('{"query": "x", "user_id": "owner"}'.encode("utf-16"), "body"),
    (b'{"query": "x", "user_id": "owner", "meta": {"' + CANARY.encode() + b'": 1, "'
     + CANARY.encode() + b'": 2}}', "body"),  # a repeated key of the caller's own is not quoted
])
def test_raw_body_hazards_are_a_400_naming_the_field(http, raw, field):
    response = http.request("POST", "/search", raw=raw, headers={"Content-Type": "application/json"})
    assert response.status == 400, response.body
    assert response.body["error"]["field"] == field
    assert CANARY.encode() not in response.raw


@OVER_HTTP
@given(st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40))
@example("application/json")
@example("APPLICATION/JSON; charset=latin-1")
@example("application/vnd.api+json")
@example("application/jsonx")
@example("text/json")
def test_any_content_type_is_accepted_only_when_it_is_json(http, content_type):
    response = http.request("POST", "/search", raw=json.dumps(SEARCH).encode(),
                            headers={"Content-Type": content_type})
    media = content_type.split(";")[0].strip().lower()
    if media == "application/json" or media.endswith("+json"):
        assert response.status == 200
    else:
        assert response.status == 415 and response.body["error"]["field"] == "Content-Type"


# ---- work per request ---------------------------------------------------------------------


def seconds(function, *args) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        function(*args)
        best = min(best, time.perf_counter() - started)
    return best


def test_date_extraction_work_grows_linearly_with_the_text():
    small = "May 5, 2023 " * 400
    assert seconds(extract_dates, small * 4, None) < 8 * seconds(extract_dates, small, None)


# ---- the validator against the published schema (aml_retriever/http/openapi.json) ----------------------


@pytest.fixture(scope="module")
def published():
    jsonschema = pytest.importorskip("jsonschema")
    root = Path(__file__).resolve().parent.parent
    spec = json.loads((root / "aml_retriever" / "http" / "openapi.json").read_text())

    def validator(name: str):
        return jsonschema.Draft202012Validator({"$ref": f"#/components/schemas/{name}",
                                                "components": spec["components"]})

    return {"add": validator("AddRequest"), "search": validator("SearchRequest")}


@QUICK
@given(st.sampled_from(["request_id", "user_id", "session_id", "messages"]), json_values, st.booleans(),
       st.sampled_from(["role", "content", "timestamp"]), json_values)
def test_every_add_the_validator_accepts_the_published_schema_accepts(published, field, value, drop,
                                                                      message_field, message_value):
    body = with_field(ADD, field, value, drop)
    if field != "messages":
        body["messages"] = [{**ADD["messages"][0], message_field: message_value}]
    try:
        parse_add(body, max_messages=200)
    except AmlError:
        return
    published["add"].validate(body)


@QUICK
@given(st.sampled_from(["query", "user_id", "top_k", "options", "session_id", "filter_session"]),
       json_values, st.booleans())
def test_every_search_the_validator_accepts_the_published_schema_accepts(published, field, value, drop):
    body = with_field(SEARCH, field, value, drop)
    try:
        parse_search(body)
    except AmlError:
        return
    published["search"].validate(body)
