"""The read endpoints: users, sessions and messages page by page with opaque cursors.

What must hold: paging visits every message that existed at the first page exactly once while Adds
arrive (newest first leaves out what arrived later; oldest first shows what lands past the cursor);
another user's id in the path returns nothing of this user's, while this user has data; a read of an
unknown user is a 404 (unknown_user) and makes no file; a bad cursor, limit, order, session_id or status is a
400 naming it; no malformed path is ever a 500."""

from __future__ import annotations

import base64
import json
import random
import threading
from pathlib import Path
from urllib.parse import quote

import pytest
from conftest import Client

from aml_retriever.memory import cursors

BASE_MS = 1_700_000_000_000


def user_files(app) -> list[Path]:
    return sorted(Path(f"{app.config.db_path}.users").rglob("*.db"))


def page_through(client: Client, path: str, key: str, limit: int, between=None,
                 **params: str) -> list[dict]:
    """Every item of a listing, page by page, following next_cursor; `between(n)` runs after
    the n-th page."""
    items, cursor, cursors = [], "", set()
    while True:
        assert cursor not in cursors and len(cursors) < 2000, "the paging does not advance"
        cursors.add(cursor)
        query = "&".join([f"limit={limit}", f"cursor={cursor}",
                          *(f"{k}={quote(v, safe='')}" for k, v in params.items())])
        response = client.request("GET", f"{path}?{query}")
        assert response.status == 200, response.body
        items += response.body[key]
        cursor = response.body["next_cursor"]
        if between is not None:
            between(len(cursors))
        if cursor is None:
            return items


def test_messages_come_newest_first_by_time_with_every_field(client):
    client.add("alice", "r1", ["first words", "second words"], session="s1")
    client.add("alice", "r2", ["third words"], session="s2", start_ms=BASE_MS + 60_000)
    response = client.request("GET", "/users/alice/messages")
    assert response.status == 200
    assert response.body == {"user_id": "alice", "next_cursor": None, "messages": [
        {"id": "m3", "content": "third words", "role": "user", "session_id": "s2",
         "created_at": "2023-11-14T22:14:20Z", "request_id": "r2", "trust": "confirmed",
         "status": "current"},
        {"id": "m2", "content": "second words", "role": "user", "session_id": "s1",
         "created_at": "2023-11-14T22:13:21Z", "request_id": "r1", "trust": "confirmed",
         "status": "current"},
        {"id": "m1", "content": "first words", "role": "user", "session_id": "s1",
         "created_at": "2023-11-14T22:13:20Z", "request_id": "r1", "trust": "confirmed",
         "status": "current"}]}
    oldest = client.request("GET", "/users/alice/messages?order=oldest").body["messages"]
    assert [m["id"] for m in oldest] == ["m1", "m2", "m3"]
    one = client.request("GET", "/users/alice/messages/m2")
    assert one.status == 200 and one.body == response.body["messages"][1]


def test_time_not_arrival_orders_messages_and_the_id_breaks_ties(client):
    client.add("alice", "late", ["said last"], start_ms=BASE_MS + 10_000)
    client.add("alice", "early", ["said first"], start_ms=BASE_MS)
    client.post("/add", {"request_id": "same", "user_id": "alice", "session_id": "s1", "messages": [
        {"role": "user", "content": f"tie {i}", "timestamp": BASE_MS + 5_000} for i in range(3)]})
    listed = page_through(client, "/users/alice/messages", "messages", 2, order="oldest")
    assert [m["content"] for m in listed] == ["said first", "tie 0", "tie 1", "tie 2", "said last"]


def test_a_session_filter_keeps_that_session_alone(client):
    client.add("alice", "r1", ["in one a", "in one b"], session="one")
    client.add("alice", "r2", ["in two"], session="two")
    listed = page_through(client, "/users/alice/messages", "messages", 1, session_id="one")
    assert [m["content"] for m in listed] == ["in one b", "in one a"]
    everything = page_through(client, "/users/alice/messages", "messages", 1)
    assert len(everything) == 3  # control: the other session is there without the filter


def _adding(client_port: int, user: str, stop: threading.Event, seed: int,
            begin: threading.Event | None = None) -> threading.Thread:
    """Adds to `user` until `stop`, once `begin` is set when given: most at the current end of
    time, some in the middle."""
    def run() -> None:
        rng = random.Random(seed)
        adder = Client(client_port)
        n = 0
        if begin is not None:
            begin.wait(timeout=30)
        while not stop.is_set():
            start = BASE_MS + (10_000_000 + n * 1000 if rng.random() < 0.7 else rng.randrange(0, 200_000))
            assert adder.add(user, f"late-{n}", [f"late {n}"], session=f"s{n % 3}",
                             start_ms=start).status == 200
            n += 1
        adder.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _seed_messages(client: Client, user: str, count: int) -> None:
    for r in range(count // 10):
        assert client.add(user, f"seed-{r}", [f"seed {r} {i}" for i in range(10)],
                          session=f"s{r % 3}", start_ms=BASE_MS + r * 10_000).status == 200


@pytest.mark.parametrize("order", ["newest", "oldest"])
def test_paging_visits_each_message_once_while_adds_arrive(app, client, order):
    _seed_messages(client, "alice", 200)
    before = {m["id"] for m in page_through(client, "/users/alice/messages", "messages", 1000)}
    stop, first_page_read = threading.Event(), threading.Event()
    # The Adds start once the first page is read: one stored before it would rightly be listed
    # (the first page fixes where the paging starts), and the race made this test fail now and
    # then (m201 seen newest first).
    thread = _adding(app.port, "alice", stop, seed=7, begin=first_page_read)
    try:
        seen = [m["id"] for m in page_through(client, "/users/alice/messages", "messages", 7,
                                              between=lambda n: first_page_read.set(),
                                              order=order)]
    finally:
        stop.set()
        thread.join()
    assert len(seen) == len(set(seen))  # never twice
    assert before <= set(seen)  # everything there at the first page, at least once
    late = set(seen) - before
    after = {m["id"] for m in page_through(client, "/users/alice/messages", "messages", 1000)}
    assert len(after) > len(before)  # control: Adds did arrive while paging
    if order == "newest":
        assert not late  # the first page fixed the newest message: later ones are left out
    assert late <= after


def test_what_arrives_after_the_first_page_is_left_out_newest_first(client):
    _seed_messages(client, "alice", 30)

    def arrive(page: int) -> None:
        if page == 1:  # one Add after every message, one before every message
            client.add("alice", "after", ["arrived after, newest"], start_ms=BASE_MS + 10**9)
            client.add("alice", "before", ["arrived after, oldest"], start_ms=BASE_MS - 10**9)

    seen = [m["content"] for m in page_through(client, "/users/alice/messages", "messages", 4,
                                               between=arrive)]
    assert len(seen) == 30 and not any(c.startswith("arrived") for c in seen)
    fresh = [m["content"] for m in page_through(client, "/users/alice/messages", "messages", 4)]
    assert fresh[0] == "arrived after, newest" and fresh[-1] == "arrived after, oldest"  # control


def test_what_lands_past_the_cursor_is_shown_oldest_first(client):
    _seed_messages(client, "alice", 30)

    def arrive(page: int) -> None:
        if page == 1:
            client.add("alice", "after", ["arrived after, newest"], start_ms=BASE_MS + 10**9)
            client.add("alice", "before", ["arrived after, oldest"], start_ms=BASE_MS - 10**9)

    seen = [m["content"] for m in page_through(client, "/users/alice/messages", "messages", 4,
                                               between=arrive, order="oldest")]
    assert len(seen) == 31 and seen[-1] == "arrived after, newest"
    assert "arrived after, oldest" not in seen  # its place was before the cursor


def test_sessions_keep_their_place_when_they_grow(client):
    for s in range(6):
        client.add("alice", f"r{s}", [f"turn {s}"], session=f"s{s}", start_ms=BASE_MS + s)

    def grow(page: int) -> None:  # the oldest session, still to come, gets the newest message
        client.add("alice", f"grow-{page}", ["more"], session="s0", start_ms=BASE_MS + 10**9 + page)

    seen = [s["session_id"] for s in page_through(client, "/users/alice/sessions", "sessions", 2,
                                                  between=grow)]
    assert seen == ["s5", "s4", "s3", "s2", "s1", "s0"]


def test_users_keep_their_place_when_they_change(client):
    for u in range(6):
        client.add(f"user-{u}", "r1", ["hello"])

    def change(page: int) -> None:  # the first user, still to come, changes
        client.add("user-0", f"again-{page}", ["hello again"])

    seen = [u["user_id"] for u in page_through(client, "/users", "users", 2, between=change)]
    assert seen == [f"user-{u}" for u in reversed(range(6))]


def test_sessions_page_newest_first_by_first_message_and_once_while_adds_arrive(app, client):
    for s in range(12):
        client.add("alice", f"r{s}", [f"turn {s}"], session=f"s{s}", start_ms=BASE_MS + s)
    listed = page_through(client, "/users/alice/sessions", "sessions", 5)
    assert [s["session_id"] for s in listed] == [f"s{s}" for s in reversed(range(12))]
    assert listed[0] == {"session_id": "s11", "messages": 1,
                         "first_at": "2023-11-14T22:13:20.011Z", "last_at": "2023-11-14T22:13:20.011Z"}
    stop = threading.Event()
    thread = _adding(app.port, "alice", stop, seed=3)  # adds to s0..s2 and new sessions
    try:
        for order in ("newest", "oldest"):
            seen = [s["session_id"] for s in page_through(client, "/users/alice/sessions", "sessions",
                                                          2, order=order)]
            assert len(seen) == len(set(seen))
            assert {f"s{s}" for s in range(12)} <= set(seen)
    finally:
        stop.set()
        thread.join()


def test_users_are_listed_once_each_while_users_arrive_and_change(app, client):
    for u in range(9):
        client.add(f"user-{u}", "r1", [f"hello {u}"] * (u + 1) if u else ["hello"])
    stop = threading.Event()
    thread = _adding(app.port, "user-4", stop, seed=5)  # an existing user keeps changing

    def newcomers() -> None:
        other = Client(app.port)
        for n in range(20):
            other.add(f"new-{n}", "r1", ["hi"])
        other.close()

    arriving = threading.Thread(target=newcomers)
    arriving.start()
    try:
        for order in ("newest", "oldest"):
            seen = [u["user_id"] for u in page_through(client, "/users", "users", 2, order=order)]
            assert len(seen) == len(set(seen))
            assert {f"user-{u}" for u in range(9)} <= set(seen)
    finally:
        stop.set()
        thread.join()
        arriving.join()
    listed = {u["user_id"]: u for u in page_through(client, "/users", "users", 1000)}
    assert listed["user-2"]["messages"] == 3 and listed["user-2"]["sessions"] == 1
    assert listed["user-4"]["messages"] > 5  # its Adds are counted
    assert listed["user-4"]["last_activity"] > listed["user-2"]["last_activity"]


def test_a_deleted_user_is_no_longer_listed(client):
    client.add("goes", "r1", ["gone soon"])
    client.add("stays", "r1", ["kept"])
    assert {u["user_id"] for u in client.request("GET", "/users").body["users"]} == {"stays", "goes"}
    assert client.request("DELETE", "/users/goes").status == 200
    assert [u["user_id"] for u in client.request("GET", "/users").body["users"]] == ["stays"]
    client.add("goes", "r1", ["back again"])  # a user who adds again is listed again, as new
    listed = client.request("GET", "/users").body["users"]
    assert [(u["user_id"], u["messages"]) for u in listed] == [("goes", 1), ("stays", 1)]
    client.add("stays", "r2", ["more", "and more"])
    assert [(u["user_id"], u["messages"]) for u in client.request("GET", "/users").body["users"]] \
        == [("goes", 1), ("stays", 3)]  # counts are read fresh


def test_deletion_leaves_no_trace_of_the_users_name_in_its_file(app, client):
    name = "departing-7731"
    client.add(name, "r1", ["words"])
    client.add("other", "r1", ["more words"])
    assert client.request("DELETE", f"/users/{name}").status == 200
    stored = b"".join(path.read_bytes() for path in Path(app.config.db_path).parent.rglob("*")
                      if path.is_file())
    assert name.encode() not in stored
    assert b"other" in stored  # control: a user still there is named in its file


def test_a_message_whose_request_is_unknown_shows_no_request_id(app, client):
    client.add("alice", "r1", ["one", "two"])
    client.add("alice", "r2", ["three"], start_ms=BASE_MS + 60_000)
    with app.store.connection("alice", create=False) as conn:  # a record lost (an old store)
        conn.execute("DELETE FROM requests WHERE request_id = 'r2'")
    listed = client.request("GET", "/users/alice/messages?order=oldest").body["messages"]
    assert [m.get("request_id") for m in listed] == ["r1", "r1", None]


# ---- isolation -------------------------------------------------------------------------


def test_another_users_id_in_the_path_returns_nothing_of_this_user(client):
    client.add("alice", "r1", [f"alice secret {i}" for i in range(6)], session="alice-session")
    client.add("bob", "r1", ["bob own words"], session="bob-session")
    alice = client.request("GET", "/users/alice/messages").body["messages"]
    assert len(alice) == 6  # populated control
    bob = client.request("GET", "/users/bob/messages?status=all").body["messages"]
    assert [m["content"] for m in bob] == ["bob own words"]
    assert [s["session_id"] for s in client.request("GET", "/users/bob/sessions").body["sessions"]] \
        == ["bob-session"]
    assert client.request("GET", "/users/bob/messages?session_id=alice-session").body["messages"] == []
    for path in ("/users/bob/messages/m4", "/users/ALICE/messages/m4", "/users/alice%20/messages/m4"):
        assert client.request("GET", path).status == 404, path
        assert client.request("DELETE", path).status == 404, path
    assert client.request("GET", "/users/alice/messages/m4").body["content"] == "alice secret 3"
    assert len(client.request("GET", "/users/alice/messages").body["messages"]) == 6


@pytest.mark.parametrize("listing", ["messages", "sessions"])
def test_a_cursor_is_bound_to_its_user_and_to_the_user_as_it_is_now(client, listing):
    """Alice's cursor is refused on bob's listing, and on alice's own once she was deleted and
    made again; each user's own cursor of now still pages (the controls)."""
    for user in ("alice", "bob"):
        for r in range(3):
            client.add(user, f"r{r}", [f"{user} {r} {i}" for i in range(2)], session=f"s{r}")
    cursor = client.request("GET", f"/users/alice/{listing}?limit=1").body["next_cursor"]
    assert cursor
    refused = client.request("GET", f"/users/bob/{listing}?limit=1&cursor={cursor}")
    assert refused.status == 400 and refused.body["error"]["field"] == "cursor"
    own = client.request("GET", f"/users/bob/{listing}?limit=1").body["next_cursor"]
    assert client.request("GET", f"/users/bob/{listing}?limit=1&cursor={own}").status == 200
    assert client.request("DELETE", "/users/alice").status == 200
    gone = client.request("GET", f"/users/alice/{listing}?limit=1&cursor={cursor}")
    assert gone.status == 404 and gone.body["error"]["code"] == "unknown_user"
    for r in range(3):
        client.add("alice", f"again{r}", [f"alice again {r}"], session=f"s{r}")
    again = client.request("GET", f"/users/alice/{listing}?limit=1&cursor={cursor}")
    assert again.status == 400 and again.body["error"]["field"] == "cursor"
    fresh = client.request("GET", f"/users/alice/{listing}?limit=1").body["next_cursor"]
    assert client.request("GET", f"/users/alice/{listing}?limit=1&cursor={fresh}").status == 200


def test_users_page_to_the_end_whatever_their_ids(client):
    """A cursor of the users listing is as short for any id: paging past a user of 256 control
    characters goes on to the last user."""
    hostile = "".join(chr(c) for c in range(1, 32)) * 8 + "\u007f" * 8
    names = ["ann", hostile, "cy", "dee"]
    for name in names:
        assert client.add(name, "r1", ["hello"]).status == 200
    seen, cursor = [], None
    while True:
        page = client.request("GET", "/users?limit=1" + (f"&cursor={cursor}" if cursor else ""))
        assert page.status == 200
        seen += [u["user_id"] for u in page.body["users"]]
        cursor = page.body["next_cursor"]
        if cursor is None:
            break
        assert len(cursor) < 200
    assert sorted(seen) == sorted(names)


def test_reads_of_an_unknown_user_are_404_unknown_user_and_make_no_file(app, client):
    """A read of a user the store does not hold names `user_id` as unknown, where an empty page
    would read as an empty memory; a user whose every message was forgotten is held and reads
    empty (the control, beside alice's populated pages); Search answers an unknown user 200
    with no data, as the contract asks; a DELETE says it found nothing."""
    client.add("alice", "r1", ["something"])
    client.add("emptied", "r1", ["soon forgotten"])
    assert client.request("DELETE", "/users/emptied/messages/m1").status == 200
    files = user_files(app)
    for user, held in (("alice", True), ("emptied", True), ("nobody", False)):
        for path in ("messages", "sessions", "speakers", "audit", "export"):
            answer = client.request("GET", f"/users/{user}/{path}")
            if held:
                assert answer.status == 200, (user, path)
            else:
                assert answer.status == 404, path
                assert answer.body["error"]["code"] == "unknown_user"
                assert answer.body["error"]["field"] == "user_id"
    assert client.request("GET", "/users/alice/messages").body["messages"]
    assert client.request("GET", "/users/emptied/messages").body["messages"] == []
    for method, path in (("GET", "/users/nobody/messages/m1"), ("DELETE", "/users/nobody/messages/m1"),
                         ("POST", "/users/nobody/messages/m1/confirm"),
                         ("POST", "/users/nobody/messages/m1/reject")):
        refused = client.request(method, path)
        assert refused.status == 404 and refused.body["error"]["code"] == "unknown_user", path
    absent = client.request("GET", "/users/alice/messages/m9")  # a held user's missing message
    assert absent.status == 404 and absent.body["error"]["code"] == "not_found"
    assert client.search("nobody", "something").body == {"data": []}
    assert client.contents("alice", "something") == ["something"]
    assert client.request("DELETE", "/users/nobody").body["found"] is False
    assert user_files(app) == files
    assert client.request("DELETE", "/users/alice").body["found"] is True


# ---- refusals --------------------------------------------------------------------------


def _forged(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


@pytest.mark.parametrize("query,field", [
    ("limit=0", "limit"), ("limit=1001", "limit"), ("limit=ten", "limit"), ("limit=-1", "limit"),
    ("limit=1&limit=2", "limit"), ("limit=%ff", "limit"), ("limit=%D9%A3", "limit"),
    ("order=latest", "order"), ("order=NEWEST", "order"),
    ("status=replaced", "status"), ("status=x&status=all", "status"),
    ("session_id=%20%20", "session_id"), ("session_id=" + "s" * 257, "session_id"),
    ("cursor=not-a-cursor", "cursor"), ("cursor=%21%21", "cursor"), ("cursor=" + "A" * 3000, "cursor"),
    ("cursor=" + _forged([1, 2, 3]), "cursor"), ("cursor=" + _forged({"l": "x", "p": [1, 2, 3]}), "cursor"),
])
def test_bad_parameters_are_400_naming_the_parameter(client, query, field):
    client.add("alice", "r1", ["a", "b", "c"])
    response = client.request("GET", f"/users/alice/messages?{query}")
    assert response.status == 400, response.body
    assert response.body["error"] == {"code": "invalid_field", "field": field,
                                      "message": response.body["error"]["message"]}


def _tampered(cursor: str, change, store=None) -> str:
    """The cursor with its position changed: re-sealed with the store's own key when `store` is
    given (what the type checks behind the MAC refuse), else with its old tag kept."""
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    data = json.loads(raw[:-cursors.TAG_BYTES])
    change(data)
    payload = json.dumps(data, separators=(",", ":")).encode()
    if store is not None:
        return cursors.seal(store.cursor_key, payload)
    return base64.urlsafe_b64encode(payload + raw[-cursors.TAG_BYTES:]).decode().rstrip("=")


@pytest.mark.parametrize("change", [
    lambda d: d["p"].__setitem__(0, 2**63), lambda d: d["p"].__setitem__(1, "9"),
    lambda d: d["p"].__setitem__(1, True), lambda d: d["p"].__setitem__(1, 1.5),
    lambda d: d["p"].append(1), lambda d: d.__setitem__("x", 1), lambda d: d["p"].__setitem__(2, None),
])
def test_a_cursor_changed_by_hand_is_refused(client, app, change):
    client.add("alice", "r1", ["a", "b", "c"])
    cursor = client.request("GET", "/users/alice/messages?limit=1").body["next_cursor"]
    assert client.request("GET", f"/users/alice/messages?limit=1&cursor={cursor}").status == 200
    for edited in (_tampered(cursor, change), _tampered(cursor, change, app.store)):
        response = client.request("GET", f"/users/alice/messages?limit=1&cursor={edited}")
        assert response.status == 400 and response.body["error"]["field"] == "cursor"


def test_a_cursor_is_refused_when_any_of_its_position_changes(client):
    """The position itself, edited within its type (a later id: a place the listing never gave),
    is refused by the cursor's MAC; the same cursor unchanged is the populated control."""
    client.add("alice", "r1", ["a", "b", "c"])
    cursor = client.request("GET", "/users/alice/messages?limit=1").body["next_cursor"]
    page = client.request("GET", f"/users/alice/messages?limit=1&cursor={cursor}")
    assert page.status == 200 and page.body["messages"]
    edited = _tampered(cursor, lambda d: d["p"].__setitem__(1, d["p"][1] - 1))
    response = client.request("GET", f"/users/alice/messages?limit=1&cursor={edited}")
    assert response.status == 400 and response.body["error"]["field"] == "cursor"


@pytest.mark.parametrize("other", ["order=oldest", "status=all", "session_id=s1"])
def test_a_cursor_belongs_to_its_listing(client, other):
    client.add("alice", "r1", ["a", "b", "c"])
    cursor = client.request("GET", "/users/alice/messages?limit=1").body["next_cursor"]
    assert client.request("GET", f"/users/alice/messages?limit=1&cursor={cursor}").status == 200
    moved = client.request("GET", f"/users/alice/messages?limit=1&cursor={cursor}&{other}")
    assert moved.status == 400 and moved.body["error"]["field"] == "cursor"
    sessions = client.request("GET", f"/users/alice/sessions?cursor={cursor}")
    assert sessions.status == 400 and sessions.body["error"]["field"] == "cursor"


def test_empty_parameters_are_the_defaults(client):
    client.add("alice", "r1", ["a", "b"])
    response = client.request("GET", "/users/alice/messages?cursor=&limit=&order=&status=&session_id=")
    assert response.status == 200 and len(response.body["messages"]) == 2


@pytest.mark.parametrize("path,status", [
    ("/users/alice/messages/m9", 404), ("/users/alice/messages/9", 400), ("/users/alice/messages/m0", 400),
    ("/users/alice/messages/m01", 400), ("/users/alice/messages/m" + "9" * 19, 400),
    ("/users/alice/messages/w3-1-2", 400), ("/users/alice/messages/m%ff", 400),
    ("/users/alice/messages/%D9%A3", 400), ("/users/%ff/messages", 400), ("/users//messages", 400),
    ("/users/alice/messages/m1/x", 404), ("/users/alice/sessions/s1", 404), ("/users/alice/export/x", 404),
    ("/users/%ff/nowhere", 404),
])
def test_malformed_message_paths_are_4xx(client, path, status):
    client.add("alice", "r1", ["a"])
    response = client.request("GET", path)
    assert response.status == status, response.body
    assert set(response.body["error"]) == {"code", "message", "field"}


def test_no_malformed_path_is_ever_a_500(client):
    client.add("alice", "r1", ["a", "b"])
    pieces = ["users", "alice", "messages", "sessions", "speakers", "m1", "m0", "confirm", "reject",
              "export", "audit", "", "%ff", "%2F", "..", "m1%00", "%E2%80%AE", "?cursor=%ff", "?limit=%00",
              "?status=", "?cursor=" + _forged({"l": 1}), "m" + "1" * 40, quote("用户")]
    rng = random.Random(17)
    for _ in range(400):
        path = "/" + "/".join(rng.choice(pieces) for _ in range(rng.randrange(1, 6)))
        for method in ("GET", "DELETE", "POST"):
            response = client.request(method, path)
            assert response.status < 500, (method, path, response.body)
    assert len(client.request("GET", "/users/alice/messages").body["messages"]) <= 2


def test_the_audit_page_refuses_a_query_that_is_not_utf8(client):
    response = client.request("GET", "/users/alice/audit?cursor=%ff")
    assert response.status == 400 and response.body["error"]["field"] == "cursor"


def test_a_user_not_opened_since_an_upgrade_is_listed(tmp_path):
    """A user file still at an earlier schema (nobody touched it since the new version started)
    is listed with its counts, as one upgraded is."""
    from conftest import start_app
    from old_schema import take_back
    from reliability_support import user_file

    app = start_app(tmp_path)
    c = Client(app.port)
    for user in ("old", "new"):
        assert c.add(user, "r1", ["one", "two"]).status == 200
    app.stop()
    take_back(user_file(tmp_path / "aml.db", "old"), 8)
    app = start_app(tmp_path)
    try:
        listed = Client(app.port).request("GET", "/users").body["users"]
        assert {u["user_id"]: u["messages"] for u in listed} == {"old": 2, "new": 2}
    finally:
        app.stop()
