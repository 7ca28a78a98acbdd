"""Changing one message over HTTP: DELETE forgets it through the removal path of MCP `forget`
(audited forget/http), POST .../confirm and .../reject review a proposed statement through the path
of `review` (409 when it is not awaiting review). Each change touches the named message of the named
user only."""

from __future__ import annotations

import pytest

from aml_retriever.memory.lifecycle import Statements, Tombstoned


def contents(client, user: str, status: str = "current") -> list[str]:
    body = client.request("GET", f"/users/{user}/messages?status={status}").body
    return [m["content"] for m in body["messages"]]


def test_delete_forgets_the_message_from_every_read_and_audits_it(client):
    client.add("alice", "r1", ["the ferry leaves at noon", "the ferry is blue"])
    client.add("bob", "r1", ["the ferry leaves at noon"])
    assert client.search("alice", "ferry noon").body["data"][0]["id"] == "m1"
    response = client.request("DELETE", "/users/alice/messages/m1")
    assert response.status == 200
    assert response.body == {"success": True, "user_id": "alice", "id": "m1", "forgotten": 1}
    assert contents(client, "alice", "all") == ["the ferry is blue"]
    assert all(r["id"] != "m1" for r in client.search("alice", "ferry noon").body["data"])
    assert client.request("GET", "/users/alice/messages/m1").status == 404
    assert client.request("DELETE", "/users/alice/messages/m1").status == 404  # gone already
    events = client.request("GET", "/users/alice/audit").body["events"]
    assert [(e["action"], e["actor"], e["message_ids"]) for e in events][-1] == ("forget", "http", ["m1"])
    assert contents(client, "bob") == ["the ferry leaves at noon"]  # bob's m1 is his own, untouched


def test_a_forgotten_message_leaves_its_session_whole(client):
    client.add("alice", "r1", ["one", "two", "three"], session="s1")
    assert client.request("DELETE", "/users/alice/messages/m2").status == 200
    sessions = client.request("GET", "/users/alice/sessions").body["sessions"]
    assert sessions == [{"session_id": "s1", "messages": 2, "first_at": "2023-11-14T22:13:20Z",
                         "last_at": "2023-11-14T22:13:22Z"}]


def _proposals(app, user: str = "alice") -> tuple[int, int]:
    statements = Statements(app.service, user, "mcp")
    first = statements.remember("s1", "The user prefers tea", "preference", origin="agent")
    second = statements.remember("s1", "The user lives in Lyon", "fact", origin="agent")
    return int(first.statement["id"][1:]), int(second.statement["id"][1:])


def test_proposed_statements_are_listed_apart_and_confirmed_over_http(app, client):
    client.add("alice", "r1", ["a person said this"])
    tea, lyon = _proposals(app)
    assert contents(client, "alice") == ["a person said this"]
    proposed = client.request("GET", "/users/alice/messages?status=proposed").body["messages"]
    assert [(m["id"], m["trust"], m["status"]) for m in proposed] == [
        (f"m{lyon}", "proposed", "proposed"), (f"m{tea}", "proposed", "proposed")]
    assert proposed[0]["request_id"].startswith("statement-")
    response = client.request("POST", f"/users/alice/messages/m{tea}/confirm")
    assert response.status == 200
    assert response.body == {"success": True, "id": f"m{tea}", "trust": "confirmed"}
    assert "The user prefers tea" in contents(client, "alice")
    again = client.request("POST", f"/users/alice/messages/m{tea}/confirm")
    assert again.status == 409 and again.body["error"]["code"] == "not_proposed"
    events = client.request("GET", "/users/alice/audit").body["events"]
    assert (events[-1]["action"], events[-1]["actor"]) == ("confirm", "http")


def test_reject_forgets_a_proposal_and_leaves_a_tombstone(app, client):
    _, lyon = _proposals(app)
    response = client.request("POST", f"/users/alice/messages/m{lyon}/reject")
    assert response.status == 200
    assert response.body == {"success": True, "id": f"m{lyon}", "rejected": True}
    assert contents(client, "alice", "all") == ["The user prefers tea"]
    events = client.request("GET", "/users/alice/audit").body["events"]
    assert (events[-1]["action"], events[-1]["actor"]) == ("reject", "http")
    with pytest.raises(Tombstoned):  # its text hash stayed
        Statements(app.service, "alice", "mcp").remember("s1", "The user lives in Lyon", "fact",
                                                         origin="agent")


def test_a_confirmed_message_cannot_be_rejected_or_confirmed(client):
    client.add("alice", "r1", ["a person said this"])
    for action in ("confirm", "reject"):
        response = client.request("POST", f"/users/alice/messages/m1/{action}")
        assert response.status == 409 and response.body["error"]["code"] == "not_proposed"
    assert contents(client, "alice") == ["a person said this"]


def test_a_review_under_another_users_id_changes_nothing(app, client):
    client.add("alice", "r0", ["alice said one", "alice said two"])
    tea, _ = _proposals(app, "alice")  # m3 and m4 for alice; bob has m1 only
    client.add("bob", "r1", ["bob words"])
    assert client.request("POST", f"/users/bob/messages/m{tea}/confirm").status == 404
    assert client.request("POST", f"/users/bob/messages/m{tea}/reject").status == 404
    assert client.request("DELETE", f"/users/bob/messages/m{tea}").status == 404
    assert len(contents(client, "alice", "proposed")) == 2  # alice's proposals are untouched
    assert client.request("POST", f"/users/alice/messages/m{tea}/confirm").status == 200  # control


def test_a_review_takes_no_body_and_ignores_one_sent(client, app):
    tea, lyon = _proposals(app)
    with_body = client.request("POST", f"/users/alice/messages/m{tea}/confirm", body={"x": 1})
    assert with_body.status == 200
    assert client.request("GET", "/health").status == 200  # the body was not taken for a request
    plain = client.request("POST", f"/users/alice/messages/m{lyon}/reject", raw=b"not json",
                           headers={"Content-Type": "text/plain"})
    assert plain.status == 200
