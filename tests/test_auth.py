"""With a key, every endpoint but /health needs it; without one, only loopback is served."""

from __future__ import annotations

import pytest
from conftest import Client

from aml_retriever.app import App
from aml_retriever.common.errors import StoreError
from aml_retriever.http.routes import OPEN_PATH, ROUTES
from aml_retriever.settings import load

KEY = "k3y-with-ünïcode-✓"
ADD = {"request_id": "r1", "user_id": "alice", "session_id": "s1",
       "messages": [{"role": "user", "content": "authenticated aardvark"}]}


@pytest.fixture
def keyed(make_app):
    return Client(make_app(api_key="sekret").port)


@pytest.mark.parametrize("headers", [
    {"Authorization": "Bearer sekret"}, {"Authorization": "Token sekret"},
    {"Authorization": "bearer sekret"}, {"X-Api-Key": "sekret"},
])
def test_each_accepted_form_of_the_key_is_accepted(keyed, headers):
    assert keyed.post("/add", ADD, headers=headers).status == 200
    response = keyed.post("/search", {"user_id": "alice", "query": "aardvark"}, headers=headers)
    assert response.status == 200 and len(response.body["data"]) == 1
    assert keyed.request("GET", "/stats", headers=headers).status == 200


@pytest.mark.parametrize("headers", [
    {}, {"Authorization": "Bearer wrong"}, {"Authorization": "Bearer"}, {"Authorization": "sekret"},
    {"Authorization": "Basic sekret"}, {"X-Api-Key": "sekret2"}, {"X-Api-Key": ""},
    {"Authorization": "Bearer sekret", "X-Api-Key": "wrong"},
])
def test_missing_or_wrong_key_is_401_without_a_hint(keyed, headers):
    bodies = {"/add": ADD, "/search": {"user_id": "a", "query": "x"}, "/delete_user": {"user_id": "alice"}}
    for route in ROUTES:  # every route the server has, but the open one
        if route.label == OPEN_PATH:
            continue
        method, path = route.method, route.label.format(user_id="alice", id="m1")
        response = keyed.request(method, path, bodies.get(route.label), headers=headers)
        assert response.status == 401, (method, path)
        assert response.body == {"error": {"code": "unauthorized", "message": "missing or invalid API key",
                                           "field": None}}
    # control: the right key on the same server works
    assert keyed.post("/add", ADD, headers={"X-Api-Key": "sekret"}).status == 200


def test_health_needs_no_key_and_tells_no_counts(keyed):
    keyed.post("/add", ADD, headers={"X-Api-Key": "sekret"})
    response = keyed.request("GET", "/health", headers={})
    assert response.status == 200
    assert set(response.body) == {"status", "version"} and response.body["status"] == "ok"


def test_non_ascii_key_sent_as_utf8_works(make_app):
    c = Client(make_app(api_key=KEY).port)
    assert c.request("GET", "/stats", headers={"X-Api-Key": KEY.encode("utf-8")}).status == 200
    assert c.request("GET", "/stats", headers={"X-Api-Key": b"k3y"}).status == 401


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10"])
def test_non_loopback_without_key_is_refused(tmp_path, host):
    config = load({"db_path": str(tmp_path / "aml.db"), "host": host, "port": 0}, environ={})
    with pytest.raises(StoreError, match="without an API key"):
        App(config)


def test_non_loopback_without_key_is_allowed_when_told_and_warned_of(tmp_path, caplog):
    config = load({"db_path": str(tmp_path / "aml.db"), "host": "0.0.0.0", "port": 0,
                   "allow_unauthenticated": True}, environ={})
    app = App(config).start()
    try:
        assert Client(app.port).request("GET", "/health").status == 200
    finally:
        app.stop()
    warned = [r for r in caplog.records if r.levelname == "WARNING" and "without an API key" in r.message]
    assert len(warned) == 1 and "0.0.0.0" in warned[0].getMessage()
    caplog.clear()
    App(load({"db_path": str(tmp_path / "b.db"), "port": 0}, environ={})).stop()  # control
    assert not [r for r in caplog.records if "without an API key" in r.getMessage()]


def test_non_loopback_with_key_is_allowed(tmp_path):
    config = load({"db_path": str(tmp_path / "aml.db"), "host": "0.0.0.0", "port": 0,
                   "api_key": "sekret"}, environ={})
    app = App(config).start()
    try:
        assert Client(app.port).request("GET", "/stats").status == 401
        assert Client(app.port, api_key="sekret").request("GET", "/stats").status == 200
    finally:
        app.stop()


def test_without_the_key_even_unknown_paths_answer_401(keyed):
    assert keyed.request("GET", "/nowhere").status == 401
    assert keyed.request("GET", "/add").status == 401
    assert keyed.request("GET", "/nowhere", headers={"X-Api-Key": "sekret"}).status == 404
