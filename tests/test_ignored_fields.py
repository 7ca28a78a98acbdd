"""A body key its route does not read (`topk` for `top_k`, a `filters` object) was silently
ignored; the answer is still the one without it, and the caller is now told which keys were not
read, in a header (`X-Aml-Ignored-Fields`). Only plain names are echoed; anything else is counted."""

from __future__ import annotations

from conftest import Client


def search(client: Client, **extra: object):
    return client.post("/search", {"query": "launch date", "user_id": "u", "top_k": 3, **extra})


def test_unknown_keys_are_named_and_change_nothing(client: Client) -> None:
    assert client.add("u", "r1", ["The launch date moved to August 14."]).status == 200
    plain, misspelt = search(client), search(client, topk=1, filters={"x": 1})
    assert misspelt.status == 200 and misspelt.body == plain.body
    assert misspelt.headers["x-aml-ignored-fields"] == "filters, topk"
    # The control: a body with only the keys the route reads has no such header.
    assert "x-aml-ignored-fields" not in plain.headers


def test_an_adds_messages_are_read_for_unknown_keys_too(client: Client) -> None:
    sent = client.post("/add", {"user_id": "u", "request_id": "r2", "session_id": "s", "messages": [
        {"role": "user", "content": "hello", "ts": 5, "speaker": "Ana"}]})
    assert sent.status == 200
    assert sent.headers["x-aml-ignored-fields"] == "messages[].speaker, messages[].ts"


def test_a_key_that_is_no_plain_name_is_counted_not_echoed(client: Client) -> None:
    sent = search(client, **{"secret text\nX-Evil: 1": 1, "Zürich": 2, "ok_key": 3})
    assert sent.status == 200
    assert sent.headers["x-aml-ignored-fields"] == "ok_key, 2 more"
    assert "x-evil" not in sent.headers
