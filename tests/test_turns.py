"""Turns at the service (http/turns.py): whole requests wait by user, at most `slots` run at
once, the next turn goes to the waiting user with the fewest running (then the one served
longest ago), probes never wait, and past the queue's bounds a request is refused with a
Retry-After; whose a request is, read from its bytes."""

from __future__ import annotations

import json
import threading

from aml_retriever.http.turns import RETRY_AFTER_MAX_S, Ticket, TurnQueue, whose


def ticket(user: str, size: int = 100, quick: bool = False) -> Ticket:
    return Ticket(user, size, user, quick)


def order_after(queue: TurnQueue, running: Ticket, users: list[str]) -> list[str]:
    """`running` holds the only turn while `users`' requests arrive in this order; then each
    one taken runs to its end before the next. The order they ran in."""
    for user in users:
        assert queue.offer(ticket(user)) is None
    queue.done(running)
    ran = []
    for _ in users:
        taken = queue.take()
        assert taken is not None
        ran.append(taken.user)
        queue.done(taken)
    return ran


def test_a_user_waiting_behind_anothers_many_requests_goes_next():
    queue = TurnQueue(slots=1, most_waiting=100)
    queue.offer(ticket("a"))
    running = queue.take()
    assert running is not None
    assert order_after(queue, running, ["a", "a", "a", "b", "a"]) == ["b", "a", "a", "a", "a"]


def test_one_users_requests_keep_their_order_and_users_alternate():
    queue = TurnQueue(slots=1, most_waiting=100)
    queue.offer(ticket("a"))
    running = queue.take()
    assert running is not None
    assert order_after(queue, running, ["a", "a", "a"]) == ["a", "a", "a"]  # control
    queue.offer(ticket("a"))
    running = queue.take()
    assert running is not None
    assert order_after(queue, running, ["a", "a", "b", "b", "c"]) == ["b", "c", "a", "b", "a"]


def test_no_more_than_the_slots_run_at_once_and_a_freed_slot_is_taken():
    queue = TurnQueue(slots=2, most_waiting=100)
    for user in "abc":
        queue.offer(ticket(user))
    first, second = queue.take(), queue.take()
    assert first is not None and second is not None
    third: list[Ticket | None] = []
    taker = threading.Thread(target=lambda: third.append(queue.take()))
    taker.start()
    taker.join(0.2)
    assert taker.is_alive() and not third  # both slots are held: the third waits
    queue.done(first)
    taker.join(5)
    assert third and third[0] is not None and third[0].user == "c"


def test_probes_are_taken_while_every_slot_is_held_and_never_refused():
    queue = TurnQueue(slots=1, most_waiting=1)
    queue.offer(ticket("a"))
    assert queue.take() is not None  # the one slot is held
    assert queue.offer(ticket("b")) is None  # the queue's one place is taken
    assert queue.offer(ticket("c")) is not None  # control: full for a request of a user
    assert queue.offer(ticket("", quick=True)) is None
    probe = queue.take()
    assert probe is not None and probe.quick


def test_past_its_count_or_its_bytes_the_queue_refuses_with_a_retry_after():
    by_count = TurnQueue(slots=1, most_waiting=3)
    for user in "abc":
        assert by_count.offer(ticket(user)) is None
    refused = by_count.offer(ticket("d"))
    assert refused is not None and 1 <= refused <= RETRY_AFTER_MAX_S
    by_count.take()
    assert by_count.offer(ticket("d")) is None  # room again once one is taken

    by_bytes = TurnQueue(slots=1, most_waiting=100, most_bytes=1000)
    assert by_bytes.offer(ticket("a", size=5000)) is None  # alone, any size waits
    assert by_bytes.offer(ticket("b", size=10)) is not None
    by_bytes.take()
    assert by_bytes.offer(ticket("b", size=10)) is None
    assert by_bytes.waiting == 1


def test_once_closed_the_workers_take_what_waits_then_stop():
    queue = TurnQueue(slots=1, most_waiting=100)
    queue.offer(ticket("a"))
    queue.offer(ticket("b", quick=True))
    queue.close()
    taken = [queue.take(), queue.take()]
    assert {t.user for t in taken if t is not None} == {"a", "b"}
    assert queue.take() is None


def request(method: str, path: str, body: object | None = None) -> bytes:
    data = json.dumps(body).encode() if body is not None else b""
    return (f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(data)}\r\n\r\n").encode() + data


def test_whose_reads_the_user_from_the_path_or_the_body_and_knows_probes():
    assert whose(request("GET", "/health")) == ("", True)
    assert whose(request("GET", "/metrics")) == ("", True)
    assert whose(request("GET", "/ui/")) == ("", True)
    assert whose(request("GET", "/users/caf%C3%A9/messages?limit=5")) == ("café", False)
    assert whose(request("DELETE", "/users/bob")) == ("bob", False)
    assert whose(request("POST", "/search", {"query": "q", "user_id": "ann \"x\" 北京"})) \
        == ('ann "x" 北京', False)
    escaped = request("POST", "/add", {"user_id": "café"}).replace("café".encode(), b"caf\\u00e9")
    assert whose(escaped) == ("café", False)
    # A quote inside a string is escaped, so a message that writes the key is never read as one.
    tricky = {"messages": [{"content": '"user_id": "mallory"'}], "user_id": "alice"}
    assert whose(request("POST", "/add", tricky)) == ("alice", False)
    assert whose(request("POST", "/search", {"query": "no user"})) == ("", False)
    assert whose(b"garbage") == ("", False)
    assert whose(b"POST /search HTTP/1.1\r\n\r\n{\"user_id\": \"\\ud800") == ("", False)
