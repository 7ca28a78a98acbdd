"""Add: stored byte for byte, acknowledged only when searchable, idempotent, atomic."""

from __future__ import annotations

import threading

import pytest
from conftest import Client
from reliability_support import open_user

ODD_IDS = {"request_id": "  Req/1 ", "user_id": " Ünïcode Üser 用户 🙂 ", "session_id": "Sess\tion"}


def add_body(**overrides):
    body = {"request_id": "r1", "user_id": "alice", "session_id": "s1",
            "messages": [{"role": "user", "content": "I adopted a beagle named Biscuit",
                          "timestamp": 1_700_000_000_000}]}
    body.update(overrides)
    return body


def test_success_echoes_the_three_ids_byte_for_byte(client):
    response = client.post("/add", add_body(**ODD_IDS))
    assert response.status == 200
    assert response.body == {"success": True, **ODD_IDS, "stored": 1, "replayed": False,
                             "timestamps_assigned": 0}


def test_added_message_is_searchable_in_the_next_request(client):
    assert client.post("/add", add_body()).status == 200
    assert client.contents("alice", "beagle") == ["I adopted a beagle named Biscuit"]


def test_content_is_stored_byte_for_byte(client):
    content = "  Tabs\tand\nnewlines, NUL \x00, e\u0301 vs \u00e9, ﬁ ligature, 🧑‍🚀  "
    body = add_body(messages=[{"role": "user", "content": content}])
    assert client.post("/add", body).status == 200
    assert client.contents("alice", "ligature newlines") == [content]


def test_replay_with_same_payload_writes_nothing_and_says_replayed(client):
    first = client.post("/add", add_body())
    second = client.post("/add", add_body())
    assert first.body["replayed"] is False
    assert second.status == 200
    assert second.body["replayed"] is True and second.body["stored"] == 1
    assert client.request("GET", "/stats").body["messages"] == 1


def test_replay_with_other_payload_is_409_and_changes_nothing(client):
    assert client.post("/add", add_body()).status == 200
    other = add_body(messages=[{"role": "user", "content": "A different message about parrots"}])
    response = client.post("/add", other)
    assert response.status == 409
    assert response.body["error"]["code"] == "idempotency_conflict"
    assert response.body["error"]["field"] == "request_id"
    assert client.contents("alice", "parrots") == []
    assert client.contents("alice", "beagle") == ["I adopted a beagle named Biscuit"]


def test_other_session_under_same_request_id_is_a_conflict(client):
    assert client.post("/add", add_body()).status == 200
    assert client.post("/add", add_body(session_id="s2")).status == 409


def test_same_request_id_for_another_user_is_a_different_key(client):
    assert client.post("/add", add_body()).status == 200
    other = add_body(user_id="bob", messages=[{"role": "user", "content": "Bob likes parrots"}])
    response = client.post("/add", other)
    assert response.status == 200 and response.body["replayed"] is False
    assert client.contents("bob", "parrots") == ["Bob likes parrots"]
    assert client.contents("alice", "parrots") == []


def test_concurrent_identical_retries_write_once_and_all_succeed(app):
    body = add_body(messages=[{"role": "user", "content": f"retry marker line {i}"} for i in range(5)])
    statuses, replays = [], []
    barrier = threading.Barrier(32)

    def retry() -> None:
        c = Client(app.port)
        barrier.wait()
        response = c.post("/add", body)
        statuses.append(response.status)
        replays.append(response.body.get("replayed"))
        c.close()

    threads = [threading.Thread(target=retry) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * 32
    assert sorted(replays) == [False] + [True] * 31
    c = Client(app.port)
    assert c.request("GET", "/stats").body["messages"] == 5
    returned = "\n".join(c.contents("alice", "retry marker", top_k=100)).split("\n")
    assert sorted(returned) == [f"retry marker line {i}" for i in range(5)]


def test_invalid_message_in_the_middle_stores_none_of_the_add(client):
    messages = [{"role": "user", "content": "first valid walrus"},
                {"role": "user", "content": ""},
                {"role": "user", "content": "third valid walrus"}]
    response = client.post("/add", add_body(messages=messages))
    assert response.status == 400
    assert response.body["error"]["field"] == "messages[1].content"
    assert client.contents("alice", "walrus") == []
    good = client.post("/add", add_body(messages=[messages[0], messages[2]]))
    assert good.status == 200
    assert len(client.contents("alice", "walrus")) == 2


def test_missing_timestamp_uses_receive_time_and_says_so(client):
    body = add_body(messages=[{"role": "user", "content": "no time given for the otter"},
                              {"role": "user", "content": "a time given for the otter",
                               "timestamp": "2023-05-25T10:00:00Z"}])
    response = client.post("/add", body)
    assert response.body["timestamps_assigned"] == 1
    data = client.search("alice", "otter").body["data"]
    times = {item["content"]: item["created_at"] for item in data}
    assert times["a time given for the otter"] == "2023-05-25T10:00:00Z"
    assert times["no time given for the otter"].startswith("20")
    assert times["no time given for the otter"].endswith("Z")


def test_float_timestamp_is_truncated(client):
    body = add_body(messages=[{"role": "user", "content": "float time heron",
                               "timestamp": 1_700_000_000_000.9}])
    assert client.post("/add", body).status == 200
    assert client.search("alice", "heron").body["data"][0]["created_at"] == "2023-11-14T22:13:20Z"


def test_session_cursor_spans_adds_in_timestamp_then_arrival_order(app, client):
    client.add("alice", "r1", ["later message one"], start_ms=1_700_002_000_000)
    client.add("alice", "r2", ["earlier message two"], start_ms=1_700_001_000_000)
    client.add("alice", "r3", ["tie message three"], start_ms=1_700_002_000_000)
    conn = open_user(app.store.path, "alice")
    ordered = [row[0] for row in conn.execute(
        "SELECT content FROM messages WHERE session_id = 's1' ORDER BY timestamp_ms, id")]
    assert ordered == ["earlier message two", "later message one", "tie message three"]
    cursor = conn.execute("SELECT message_count, first_ms, last_ms FROM sessions").fetchone()
    assert cursor == (3, 1_700_001_000_000, 1_700_002_000_000)


def test_year_one_and_year_9999_render_with_four_digits(client):
    body = add_body(messages=[
        {"role": "user", "content": "ancient tortoise", "timestamp": "0001-01-01T00:00:00Z"},
        {"role": "user", "content": "future tortoise", "timestamp": 253_402_300_799_999}])
    assert client.post("/add", body).status == 200
    times = {i["content"]: i["created_at"] for i in client.search("alice", "tortoise").body["data"]}
    assert times == {"ancient tortoise": "0001-01-01T00:00:00Z",
                     "future tortoise": "9999-12-31T23:59:59.999Z"}


def test_equal_instants_in_other_notations_are_a_replay(client):
    assert client.post("/add", add_body()).status == 200
    same = add_body(messages=[{"role": "user", "content": "I adopted a beagle named Biscuit",
                               "timestamp": "2023-11-14T22:13:20Z"}])
    response = client.post("/add", same)
    assert response.status == 200 and response.body["replayed"] is True


@pytest.mark.parametrize("timestamp", [1_785_945_600, 1_785_945_600.5, 0, -5, 94_694_399_999])
def test_a_timestamp_in_seconds_is_refused_naming_the_field(client, timestamp):
    body = add_body(messages=[
        {"role": "user", "content": "seconds heron", "timestamp": 1_700_000_000_000},
        {"role": "user", "content": "seconds egret", "timestamp": timestamp}])
    response = client.post("/add", body)
    assert response.status == 400
    assert response.body["error"]["field"] == "messages[1].timestamp"
    assert "looks like seconds" in response.body["error"]["message"]
    assert client.search("alice", "heron").body["data"] == []  # nothing of the Add is stored


def test_a_date_before_1973_is_taken_as_iso_text_and_from_1973_as_a_number(client):
    body = add_body(messages=[
        {"role": "user", "content": "moon heron", "timestamp": "1969-07-20T20:17:00Z"},
        {"role": "user", "content": "moon egret", "timestamp": 94_694_400_000}])
    assert client.post("/add", body).status == 200
    times = {i["content"]: i["created_at"] for i in client.search("alice", "moon").body["data"]}
    assert times == {"moon heron": "1969-07-20T20:17:00Z", "moon egret": "1973-01-01T00:00:00Z"}
