"""GET /users/{user_id}/speakers: who is who in a user's conversation, over HTTP.

What must hold: the names one side calls the other ("Hey Mel!", "Thanks, Caroline.") and a
speaker gives itself ("I'm Caroline") are attached to their roles with their counts and the first
five messages that give each role its name, oldest first (a mention of the name for another role
is not its evidence), each role with the name the reader's view shows for it; a name mentioned
once, split between the roles, or a word in a name's place ("Morning, ...") is a candidate and
not a speaker, with why; a conversation that names nobody answers empty lists beside one that
names both sides;
an unknown user answers empty and makes no file; a forgotten message takes its evidence back; the
key is needed as for every other read; the same memory always answers the same body."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Client

KEY = "speakers-key"
START_MS = 1_683_554_160_000  # Monday 8 May 2023, 13:56 UTC
# Two sessions as the leaderboard sends them: `user` and `assistant` with the bare text. The
# comment says what each message gives whom (m1 is the first).
FIRST = [
    ("user", "Hey Mel! Good to see you!"),  # m1: mel -> assistant (the role that answers)
    ("assistant", "Hey Caroline! Good to see you too."),  # m2: caroline -> user
    ("user", "I'm Caroline, by the way, if you forgot."),  # m3: caroline, introduced -> user
    ("assistant", "That's lovely, Caroline."),  # m4: caroline -> user
    ("user", "Thanks, Melanie! And cheers, Jon."),  # m5: melanie, jon -> assistant
    ("assistant", "Hey Sam! Oh wait, wrong chat."),  # m6: sam -> user
    ("user", "Caroline, you said that already."),  # m7: caroline -> assistant (not its evidence)
    ("assistant", "Sorry, Caroline!"),  # m8: caroline -> user
    ("user", "Hey Sam, hi."),  # m9: sam -> assistant
    ("assistant", "Thanks, Caroline."),  # m10: caroline -> user
    ("user", "Thanks, Melanie."),  # m11: melanie -> assistant
    ("assistant", "Bye Caroline!"),  # m12: caroline -> user
]
SECOND = [
    ("user", "Hi Mel, how was your weekend?"),  # m13: mel -> assistant
    ("assistant", "Great, Caroline! We went hiking."),  # m14: caroline -> user
    ("user", "Hey Sam! Wrong window, sorry."),  # m15: sam -> assistant
    ("assistant", "Hi Sam!"),  # m16: sam -> user
]
NAMELESS = [
    ("user", "Good to see you! I paint every day."),
    ("assistant", "That's lovely. We went hiking at the weekend."),
    ("user", "Thanks, that sounds fun."),
]
EXPECTED = {
    "user_id": "u",
    "speakers": [
        {"role": "assistant", "shown": "Melanie", "names": [
            {"name": "Mel", "addressed": 2, "introduced": 0, "evidence": ["m1", "m13"]},
            {"name": "Melanie", "addressed": 2, "introduced": 0, "evidence": ["m5", "m11"]}]},
        {"role": "user", "shown": "Caroline", "names": [
            {"name": "Caroline", "addressed": 6, "introduced": 1,
             "evidence": ["m2", "m3", "m4", "m8", "m10"]}]}],
    "candidates": [
        {"name": "Sam", "roles": [{"role": "assistant", "addressed": 2, "introduced": 0},
                                  {"role": "user", "addressed": 2, "introduced": 0}],
         "why": "given to several roles"},
        {"name": "Jon", "roles": [{"role": "assistant", "addressed": 1, "introduced": 0}],
         "why": "given by one message only"}],
}


def add(c: Client, user: str, request_id: str, session: str, turns: list[tuple[str, str]],
        start_ms: int = START_MS) -> None:
    response = c.post("/add", {"request_id": request_id, "user_id": user, "session_id": session,
                               "messages": [{"role": role, "content": content,
                                             "timestamp": start_ms + i * 1000}
                                            for i, (role, content) in enumerate(turns)]})
    assert response.status == 200, response.body


@pytest.fixture
def app(make_app):
    return make_app(api_key=KEY)


@pytest.fixture
def c(app):
    client = Client(app.port, api_key=KEY)
    add(client, "u", "r1", "s1", FIRST)
    add(client, "u", "r2", "s2", SECOND, START_MS + 86_400_000)
    add(client, "nameless", "r1", "s1", NAMELESS)
    yield client
    client.close()


def speakers(c: Client, user: str) -> dict:
    response = c.request("GET", f"/users/{user}/speakers")
    assert response.status == 200, response.body
    return response.body


def user_files(app) -> list[Path]:
    return sorted(Path(f"{app.config.db_path}.users").rglob("*.db"))


def test_the_names_each_side_is_given_are_attached_with_their_evidence(c):
    assert speakers(c, "u") == EXPECTED


# Two sessions whose user opens turns with "Morning," and is never named (m1 is the first).
MORNINGS = [
    [("user", "Up early today."), ("assistant", "Morning, same here."),
     ("user", "I love the quiet in the morning.")],
    [("user", "Back from a run."), ("assistant", "Morning, you're keen!")],
]


def test_a_word_in_a_names_place_is_a_candidate_with_why(c):
    for i, turns in enumerate(MORNINGS):
        add(c, "mornings", f"r{i}", f"s{i}", turns, START_MS + i * 86_400_000)
    assert speakers(c, "mornings") == {"user_id": "mornings", "speakers": [], "candidates": [
        {"name": "Morning", "roles": [{"role": "user", "addressed": 2, "introduced": 0}],
         "why": "never written as a name where no sentence starts"}]}
    assert speakers(c, "u")["speakers"]  # control: names on the same server


def test_a_name_mentioned_once_or_split_between_roles_is_a_candidate_only(c):
    found = speakers(c, "u")
    attached = {name["name"] for role in found["speakers"] for name in role["names"]}
    candidates = {candidate["name"] for candidate in found["candidates"]}
    assert {"Jon", "Sam"} <= candidates and not {"Jon", "Sam"} & attached
    assert {"Mel", "Melanie", "Caroline"} == attached and not attached & candidates  # control


def test_a_conversation_that_names_nobody_answers_empty_lists(c):
    assert speakers(c, "nameless") == {"user_id": "nameless", "speakers": [], "candidates": []}
    assert speakers(c, "u")["speakers"]  # populated control, on the same server


def test_an_unknown_user_is_a_404_and_makes_no_file(app, c):
    files = user_files(app)
    for user in ("nobody", "U"):  # ids are exact: "U" is not "u"
        refused = c.request("GET", f"/users/{user}/speakers")
        assert refused.status == 404 and refused.body["error"]["code"] == "unknown_user"
    assert speakers(c, "u")["speakers"]  # the control: the user held
    assert user_files(app) == files and len(files) == 2


def test_a_forgotten_message_takes_its_evidence_back(c):
    assert c.request("DELETE", "/users/u/messages/m2").status == 200
    caroline = speakers(c, "u")["speakers"][1]["names"][0]
    assert caroline == {"name": "Caroline", "addressed": 5, "introduced": 1,
                        "evidence": ["m3", "m4", "m8", "m10", "m12"]}


def test_the_same_memory_always_answers_the_same_body(c):
    first = c.request("GET", "/users/u/speakers").raw
    assert c.request("GET", "/users/u/speakers?ignored=1").raw == first


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"X-Api-Key": "wrong"}])
def test_a_missing_or_wrong_key_is_401_like_every_other_read(app, c, headers):
    stranger = Client(app.port)
    try:
        for path in ("/users/u/speakers", "/users/u/sessions"):
            response = stranger.request("GET", path, headers=headers)
            assert response.status == 401, path
            assert response.body == {"error": {"code": "unauthorized",
                                               "message": "missing or invalid API key", "field": None}}
    finally:
        stranger.close()
    assert speakers(c, "u")["speakers"]  # control: the right key reads them


@pytest.mark.parametrize("path,status,field", [
    ("/users/%20/speakers", 400, "user_id"), ("/users/%ff/speakers", 400, "user_id"),
    ("/users/u/speakers/x", 404, None),
])
def test_a_bad_path_is_a_4xx_in_the_one_error_shape(c, path, status, field):
    response = c.request("GET", path)
    assert response.status == status and response.body["error"]["field"] == field
    assert set(response.body["error"]) == {"code", "message", "field"}


def test_only_get_is_served(c):
    response = c.request("POST", "/users/u/speakers", {})
    assert response.status == 405 and response.headers["allow"] == "GET"
