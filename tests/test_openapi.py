"""aml_retriever/http/openapi.json (served at /openapi.json) describes the server as it is: every
route it serves is documented, and real responses of a running server, errors included, validate
against the documented schemas."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aml_retriever.http.routes import ROUTES

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parent.parent
SPEC = json.loads((ROOT / "aml_retriever" / "http" / "openapi.json").read_text())


def schema_of(path: str, method: str, status: int) -> dict:
    response = SPEC["paths"][path][method]["responses"][str(status)]
    return response["content"]["application/json"]["schema"]


def assert_documented(path: str, method: str, response) -> None:
    schema = {**schema_of(path, method, response.status), "components": SPEC["components"]}
    jsonschema.Draft202012Validator(schema).validate(response.body)


def test_every_served_route_is_documented_and_nothing_else():
    page = {("/ui", "get"), ("/ui/", "get"), ("/ui/{file}", "get")}  # inspector.py, outside the routes
    served = {(route.label, route.method.lower()) for route in ROUTES} | page
    documented = {(path, method) for path, item in SPEC["paths"].items() for method in item}
    assert served == documented


def test_the_examples_of_requests_are_valid_requests():
    for name in ("AddRequest", "SearchRequest"):
        jsonschema.Draft202012Validator.check_schema(SPEC["components"]["schemas"][name])
    add = json.loads((ROOT / "fixtures" / "add_multilingual.json").read_text())
    jsonschema.Draft202012Validator({"$ref": "#/components/schemas/AddRequest",
                                     "components": SPEC["components"]}).validate(add)


def test_real_responses_match_the_document(make_app):
    from conftest import Client

    app = make_app(api_key="k")
    c = Client(app.port, api_key="k")
    add = json.loads((ROOT / "fixtures" / "add_multilingual.json").read_text())
    cases = [
        ("/add", "post", c.post("/add", add)),
        ("/add", "post", c.post("/add", add)),  # replay
        ("/add", "post", c.post("/add", {**add, "messages": add["messages"][:1]})),  # 409
        ("/add", "post", c.post("/add", {**add, "user_id": ""})),  # 400
        ("/search", "post", c.search("example-user", "When is the launch?", top_k=5)),
        ("/search", "post", c.search("example-user", "北京 Zürich 서울", top_k=5)),
        ("/search", "post", c.search("nobody", "anything")),
        ("/search", "post", c.search("example-user", "When is the launch?", explain=True)),
        ("/search", "post", c.search("example-user", "When is the launch?", explain="yes")),  # 400
        ("/search", "post", c.search("example-user", "x", top_k=0)),  # 400
        ("/search", "post", c.request("POST", "/search", raw=b"{}", headers={"Content-Type": "text/plain"})),
        ("/stats", "get", c.request("GET", "/stats")),
        ("/stats", "get", Client(app.port).request("GET", "/stats")),  # 401
        ("/health", "get", c.request("GET", "/health")),
        ("/health", "get", c.request("POST", "/health")),  # 405
        ("/users/{user_id}", "delete", c.request("DELETE", "/users/example-user")),
        ("/delete_user", "post", c.post("/delete_user", {"user_id": "example-user"})),
    ]
    statuses = set()
    for path, method, response in cases:
        statuses.add(response.status)
        assert_documented(path, method, response)
    assert statuses == {200, 400, 401, 405, 409, 415}
    windows = [r for r in cases[4][2].body["data"] if r["view"] == "window"]
    assert cases[4][2].body["data"] and all(r["id"].startswith("w") for r in windows)


def test_real_responses_of_the_read_endpoints_match_the_document(make_app):
    from conftest import Client

    from aml_retriever.memory.lifecycle import Statements

    app = make_app(api_key="k")
    c = Client(app.port, api_key="k")
    c.add("alice", "r1", ["first", "second", "third"], session="s1")
    proposed = Statements(app.service, "alice", "mcp").remember("s1", "The user likes tea", "fact",
                                                                origin="agent").statement["id"]
    page = c.request("GET", "/users/alice/messages?limit=1")
    c.post("/add", {"request_id": "r1", "user_id": "caro", "session_id": "s1", "messages": [
        {"role": role, "content": content} for role, content in (
            ("user", "Hey Mel! Thanks, Jon."), ("assistant", "Hi Caroline!"), ("user", "Thanks, Mel."),
            ("assistant", "Bye Caroline!"))]})
    c.post("/add", {"request_id": "r2", "user_id": "caro", "session_id": "s2", "messages": [
        {"role": role, "content": content} for role, content in (
            ("user", "Hi Mel!"), ("assistant", "Thanks, Caroline!"))]})  # names recur: attached
    named = c.request("GET", "/users/caro/speakers")
    assert named.body["speakers"] and named.body["candidates"]  # every part of the answer shown
    cases = [
        ("/users", "get", c.request("GET", "/users?limit=1")),
        ("/users", "get", c.request("GET", "/users?order=sideways")),  # 400
        ("/users/{user_id}/sessions", "get", c.request("GET", "/users/alice/sessions")),
        ("/users/{user_id}/sessions", "get", c.request("GET", "/users/nobody/sessions")),
        ("/users/{user_id}/messages", "get", page),
        ("/users/{user_id}/messages", "get",
         c.request("GET", f"/users/alice/messages?limit=1&cursor={page.body['next_cursor']}")),
        ("/users/{user_id}/messages", "get", c.request("GET", "/users/alice/messages?status=proposed")),
        ("/users/{user_id}/messages", "get", c.request("GET", "/users/alice/messages?cursor=x")),  # 400
        ("/users/{user_id}/messages", "get", Client(app.port).request("GET", "/users/alice/messages")),
        ("/users/{user_id}/messages", "get", c.request("POST", "/users/alice/messages")),  # 405
        ("/users/{user_id}/speakers", "get", named),
        ("/users/{user_id}/speakers", "get", c.request("GET", "/users/nobody/speakers")),
        ("/users/{user_id}/speakers", "get", c.request("GET", "/users/%20/speakers")),  # 400
        ("/users/{user_id}/speakers", "get", Client(app.port).request("GET", "/users/caro/speakers")),
        ("/users/{user_id}/speakers", "get", c.request("DELETE", "/users/caro/speakers")),  # 405
        ("/users/{user_id}/messages/{id}", "get", c.request("GET", "/users/alice/messages/m2")),
        ("/users/{user_id}/messages/{id}", "get", c.request("GET", "/users/alice/messages/m99")),
        ("/users/{user_id}/messages/{id}", "get", c.request("GET", "/users/alice/messages/x")),
        ("/users/{user_id}/messages/{id}", "delete", c.request("DELETE", "/users/alice/messages/m2")),
        ("/users/{user_id}/messages/{id}", "delete", c.request("DELETE", "/users/alice/messages/m2")),
        ("/users/{user_id}/messages/{id}/confirm", "post",
         c.request("POST", f"/users/alice/messages/{proposed}/confirm")),
        ("/users/{user_id}/messages/{id}/confirm", "post",
         c.request("POST", f"/users/alice/messages/{proposed}/confirm")),  # 409
        ("/users/{user_id}/messages/{id}/reject", "post",
         c.request("POST", "/users/alice/messages/m1/reject")),  # 409
        ("/users/{user_id}/messages/{id}/reject", "post",
         c.request("POST", "/users/alice/messages/m77/reject")),  # 404
    ]
    statuses = set()
    for path, method, response in cases:
        statuses.add(response.status)
        assert_documented(path, method, response)
    assert statuses == {200, 400, 401, 404, 405, 409}
    Statements(app.service, "alice", "mcp").remember("s1", "The user likes green", "fact", origin="agent")
    rejected = c.request("GET", "/users/alice/messages?status=proposed").body["messages"][0]["id"]
    assert_documented("/users/{user_id}/messages/{id}/reject", "post",
                      c.request("POST", f"/users/alice/messages/{rejected}/reject"))


def test_every_line_of_a_real_export_matches_the_document(make_app):
    import http.client

    from conftest import Client

    from aml_retriever.memory.lifecycle import Statements

    app = make_app(api_key="k")
    c = Client(app.port, api_key="k")
    add = json.loads((ROOT / "fixtures" / "add_multilingual.json").read_text())
    c.post("/add", add)
    statements = Statements(app.service, "example-user", "mcp")
    old = statements.remember("s2", "The user lives in Paris", "fact")
    statements.update("s2", int(old.statement["id"][1:]), "The user lives in Lyon")
    statements.remember("s2", "The user likes tea", "fact", origin="agent")
    conn = http.client.HTTPConnection("127.0.0.1", app.port, timeout=30)
    conn.request("GET", "/users/example-user/export", headers={"X-Api-Key": "k"})
    response = conn.getresponse()
    assert response.status == 200
    assert set(SPEC["paths"]["/users/{user_id}/export"]["get"]["responses"]["200"]["content"]) \
        == {response.getheader("Content-Type")}
    lines = [json.loads(line) for line in response.read().decode().splitlines()]
    conn.close()
    validator = jsonschema.Draft202012Validator({"$ref": "#/components/schemas/ExportLine",
                                                 "components": SPEC["components"]})
    assert len(lines) == 4
    for line in lines:
        validator.validate(line)
    assert_documented("/users/{user_id}/export", "get", c.request("GET", "/users/%20/export"))  # 400
