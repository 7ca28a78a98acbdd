"""docs/openapi.json describes the server as it is: every route it serves is documented, and real
responses of a running server, errors included, validate against the documented schemas."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aml_retriever.server import AUDIT_ROUTE, ROUTES, USER_ROUTE

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parent.parent
SPEC = json.loads((ROOT / "docs" / "openapi.json").read_text())


def schema_of(path: str, method: str, status: int) -> dict:
    response = SPEC["paths"][path][method]["responses"][str(status)]
    return response["content"]["application/json"]["schema"]


def assert_documented(path: str, method: str, response) -> None:
    schema = {**schema_of(path, method, response.status), "components": SPEC["components"]}
    jsonschema.Draft202012Validator(schema).validate(response.body)


def test_every_served_route_is_documented_and_nothing_else():
    served = {(route.label, m.lower()) for route in [*ROUTES.values(), USER_ROUTE, AUDIT_ROUTE]
              for m in route.methods}
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
