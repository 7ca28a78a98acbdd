"""Who is who in a conversation sent as `user` and `assistant` with the bare text: the names one
side calls the other and the names a speaker gives itself (analysis/speakers.py), kept per user
at Add (storage/speakers.py, shard migration 9) and read by a Search (engine/speakers.py).

What must hold: a name is attached only on evidence that it is a person's name and that role's
(each rule below with a populated control: the same evidence with the rule's fact changed
attaches the name); one message counts once however often it spells a name; a forget takes back
all its message gave; bad input is bounded."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from old_schema import take_back
from reliability_support import user_file

from aml_retriever.analysis import speakers as finder
from aml_retriever.analysis.speakers import (
    ADDRESSED,
    FIRST_WORD,
    INTRODUCED,
    LOWERCASE,
    ONE_SESSION,
    OPENER_ONLY,
    OPENING,
    SEVERAL,
    TALKED_ABOUT,
    Evidence,
    Mention,
    Usage,
    attach,
    claims,
    mentions,
    usage_of,
)
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import parse_add, parse_search
from aml_retriever.storage import speakers as stored
from aml_retriever.storage.migrations import SHARD_MIGRATIONS

DAY = 1_683_554_160_000  # Monday 8 May 2023, 13:56 UTC


@pytest.mark.parametrize(("text", "found"), [
    ("Hey Mel! Good to see you! How have you been?", [("mel", ADDRESSED)]),
    ("Thanks, Caroline. That means a lot.", [("caroline", ADDRESSED)]),
    ("Wow, that's cool, Caroline! What happened?", [("caroline", ADDRESSED)]),
    ("Caroline, that's great news.", [("caroline", OPENING)]),
    ("Caroline, that's great news. Thanks, Caroline!", [("caroline", ADDRESSED)]),
    ("Morning, how did you sleep?", [("morning", OPENING)]),
    ("I'm Mallory. I'm MAllory. I'm MaLlory!", [("mallory", INTRODUCED)]),
    ("Hi Zoë, long time!", [("zoe", ADDRESSED)]),
    ("Hey Will! Are you coming?", [("will", ADDRESSED)]),
    ("Hope you're well. May I ask something?", []),
    ("Oh My God, the Great Barrier Reef!", []),
    ("Yeah, sure. Cool, thanks!", []),
    ("I will go in May, Hope says.", []),
    ("I'm Caroline, nice to meet you.", [("caroline", INTRODUCED)]),
    ("my name is Jon and I dance", [("jon", INTRODUCED)]),
    ("I'm sure it is fine. I'm Sorry.", []),
    ("Caroline", []),
    ("我叫小明，你好小红！", []),
    ("HEY JO! LOL.", []),
])
def test_names_addressed_and_introduced(text: str, found: list[tuple[str, str]]) -> None:
    assert [(m.name, m.kind) for m in mentions(text)] == found


def test_a_long_text_is_read_at_its_two_ends() -> None:
    filler = "The weather was fine all week. " * 40
    text = "Hey Ana, here is the plan. " + filler + "Thanks, Tom. " + filler + "See you soon, Ben!"
    assert [m.name for m in mentions(text)] == ["ana", "ben"]
    assert [m.name for m in mentions(filler[:600] + "Thanks, Tom.")] == ["tom"]  # read whole


def evidence(*items: tuple[str, str, int]) -> list[Evidence]:
    """Names given by that many messages of the other side, where no message starts, in as
    many sessions."""
    return [Evidence(name, role, addressed=votes, sessions=votes) for name, role, votes in items]


# How the texts write a name: capitalised where no sentence starts in every message that gives
# it, never in lowercase, spoken of by none.
AS_NAME = Usage(read=10, capitalised=10, giving=10)


def read(items: list[Evidence], **usage: Usage) -> dict[str, str]:
    """The names attached, each with its role, every name read as a name unless told."""
    return attach(items, {e.name: usage.get(e.name, AS_NAME) for e in items}).roles


def test_names_attach_to_the_role_they_are_given() -> None:
    found = attach(evidence(("caroline", "user", 122), ("caro", "user", 2), ("mel", "assistant", 53),
                            ("melanie", "assistant", 52), ("yeah", "user", 4),
                            ("yeah", "assistant", 1)),
                   {name: AS_NAME for name in ("caroline", "caro", "mel", "melanie", "yeah")})
    assert found.names == {"assistant": ("mel", "melanie"), "user": ("caroline", "caro")}
    assert found.role_of("melanie") == found.role_of("mel") == "assistant"
    assert found.role_of("yeah") is None  # 4 to 1 over the roles, and not the user's person
    # The view shows the person's longest name, whichever the chat uses most.
    assert found.shown == {"assistant": "melanie", "user": "caroline"}


def test_clear_evidence_only() -> None:
    assert read(evidence(("jon", "user", 1))) == {}  # one message
    assert read(evidence(("jon", "user", 2))) == {"jon": "user"}  # control
    assert read(evidence(("sure", "user", 3), ("sure", "assistant", 3))) == {}  # split
    # A role several people share: no name is attached to it.
    assert read(evidence(("alice", "user", 10), ("bob", "user", 9))) == {}
    assert read(evidence(("alice", "user", 10), ("bob", "user", 2))) == {"alice": "user"}
    # A name the texts were not read for cannot be attached, and still counts as a second person.
    unread = evidence(("alice", "user", 10), ("bob", "user", 9))
    assert attach(unread, {"alice": AS_NAME}).roles == {}
    assert attach(unread[:1], {"alice": AS_NAME}).roles == {"alice": "user"}  # control


@pytest.mark.parametrize(("usage", "why"), [
    (Usage(read=3, capitalised=0, giving=3), FIRST_WORD),  # "Morning, ..." only ever opens
    (Usage(read=9, capitalised=4, lowercase=1, giving=3), LOWERCASE),  # "this morning"
    (Usage(read=9, capitalised=9, talked_about=6, giving=3), TALKED_ABOUT),  # "I took Max out"
])
def test_a_word_the_texts_do_not_write_as_a_name_is_none(usage: Usage, why: str) -> None:
    items = evidence(("max", "assistant", 3))
    assert attach(items, {"max": usage}).rejected == {"max": why}
    assert attach(items, {"max": usage}).roles == {}
    assert read(items) == {"max": "assistant"}  # control: written as a name


def test_the_lowercase_and_talked_about_rules_leave_a_name_its_rare_exceptions() -> None:
    # A real name written once in lowercase in 18 messages, spoken of in a third of them: named.
    items = evidence(("darryl", "user", 12))
    assert attach(items, {"darryl": Usage(read=30, capitalised=18, lowercase=1, talked_about=6,
                                          giving=12)}).roles == {"darryl": "user"}
    # Spoken of more than to, by a role that named itself by it ("Sincerely, Darryl"): named.
    spoken_of = Usage(read=30, capitalised=18, talked_about=20, giving=12)
    introduced = [Evidence("darryl", "user", addressed=11, introduced=1, sessions=2)]
    assert attach(introduced, {"darryl": spoken_of}).roles == {"darryl": "user"}
    assert attach(evidence(("darryl", "user", 12)), {"darryl": spoken_of}).roles == {}  # control


def test_a_person_is_addressed_where_no_message_starts_in_two_sessions() -> None:
    # Only ever the first word of the messages giving it ("Max, sit!"): not the role's name.
    openers = [Evidence("max", "assistant", addressed=3, opening=3, sessions=3)]
    assert attach(openers, {"max": AS_NAME}).rejected == {"max": OPENER_ONLY}
    assert read([Evidence("max", "assistant", addressed=3, opening=2, sessions=3)]) == {
        "max": "assistant"}  # control: one greeting among them
    # Given in one session only: anyone's ("Hey Stranger!" twice), unless self-introduced.
    one_sitting = [Evidence("ivy", "assistant", addressed=3, sessions=1)]
    assert attach(one_sitting, {"ivy": AS_NAME}).rejected == {"ivy": ONE_SESSION}
    assert read([Evidence("ivy", "assistant", addressed=3, introduced=1, sessions=1)]) == {
        "ivy": "assistant"}  # control
    assert read([Evidence("ivy", "assistant", addressed=3, sessions=2)]) == {"ivy": "assistant"}


def test_a_role_with_several_names_shows_the_person_the_chat_calls_it() -> None:
    # Deb and Deborah, one person: the longest form is shown.
    found = attach([Evidence("deb", "user", addressed=20, sessions=5),
                    Evidence("deborah", "user", addressed=3, sessions=2)],
                   {"deb": AS_NAME, "deborah": AS_NAME})
    assert found.names == {"user": ("deb", "deborah")} and found.shown == {"user": "deborah"}
    # A persona the role gives only itself: listed after, never shown.
    persona = [Evidence("nina", "user", addressed=8, sessions=4),
               Evidence("zed", "user", introduced=2, sessions=2)]
    found = attach(persona, {"nina": AS_NAME, "zed": AS_NAME})
    assert found.names == {"user": ("nina", "zed")} and found.shown == {"user": "nina"}
    assert found.role_of("zed") == "user"
    # Two people given the role as often: none (the shares decide, not the names).
    two = [Evidence("ben", "assistant", addressed=6, sessions=3),
           Evidence("cat", "assistant", addressed=5, sessions=2)]
    assert attach(two, {"ben": AS_NAME, "cat": AS_NAME}).rejected == {"ben": SEVERAL, "cat": SEVERAL}


def test_the_same_evidence_in_any_order_attaches_the_same_names() -> None:
    items = evidence(("gina", "assistant", 69), ("jon", "user", 83), ("jo", "user", 3),
                     ("tie", "user", 2), ("tie", "assistant", 2))
    usage = {name: AS_NAME for name in ("gina", "jon", "jo", "tie")}
    assert attach(items, usage) == attach(list(reversed(items)), dict(reversed(usage.items())))
    # A name shortened only in the question finds its role; one that two roles share does not.
    assert attach(items, usage).role_of("jonathan") == "user"
    assert attach(evidence(("ann", "user", 5), ("anne", "assistant", 5)),
                  {"ann": AS_NAME, "anne": AS_NAME}).role_of("annette") is None


@pytest.mark.parametrize(("name", "texts", "capitalised", "lowercase", "talked_about"), [
    ("mel", [("Hey Mel! Good to see you.", True), ("Thanks, Mel.", True)], 2, 0, 0),
    ("morning", [("Morning, how did you sleep?", True), ("I slept in this morning.", False)], 0, 1, 0),
    ("max", [("Max, sit!", True), ("I took Max to the vet.", False)], 1, 0, 1),
    ("mel", [("Mail me at mel@example.com or see github.com/mel", False)], 0, 0, 0),  # not prose
    # Read at 64 places at most, however long: the first 64 say nothing, the rest is not read...
    ("mel", [("MEL! " * 5000 + "hey Mel", False)], 0, 0, 0),
    ("mel", [("hey Mel " + "MEL! " * 5000, False)], 1, 0, 1),  # ...the control
])
def test_how_the_texts_write_a_word(name: str, texts: list[tuple[str, bool]], capitalised: int,
                                    lowercase: int, talked_about: int) -> None:
    found = usage_of(name, "", texts)
    assert (found.capitalised, found.lowercase, found.talked_about) == (capitalised, lowercase,
                                                                        talked_about)
    assert found.read == len(texts) and found.giving == sum(gives for _, gives in texts)


# A conversation as the leaderboard sends it: the first speaker is `user`, the second
# `assistant`, the text alone. Both paint; only the names say who.
CONVERSATION = [
    ("user", "Hey Mel! Good to see you!"),
    ("assistant", "Hey Caroline! Good to see you too."),
    ("user", "I paint every day, it calms me."),
    ("assistant", "That's lovely, Caroline."),
]
# Chatter between them, so that what they said is rare enough to count, as in a real memory.
CHATTER = [("user" if i % 2 else "assistant", f"The {topic} was {how} this time.")
           for i, (topic, how) in enumerate(
               [("bakery", "busy"), ("train", "late"), ("concert", "loud"), ("market", "crowded"),
                ("library", "quiet"), ("beach", "windy"), ("garden", "green"), ("office", "cold")])]
NEXT_DAY = [
    ("user", "Hi Mel, how was your weekend?"),
    ("assistant", "Great, Caroline! We went hiking with the kids and the dog."),
    ("user", "Sounds fun, Mel."),
    ("assistant", "And then I finally painted a sunrise over the hills for my living room wall."),
]


def opened(db: Path) -> closing[MemoryService]:
    return closing(MemoryService.open(str(db), synchronous="NORMAL"))


def add(svc: MemoryService, turns: list[tuple[str, str]], user: str = "u", request: str = "r1",
        session: str = "s1", start: int = DAY) -> None:
    svc.add(parse_add({"user_id": user, "request_id": request, "session_id": session, "messages": [
        {"role": role, "content": content, "timestamp": start + i * 1000}
        for i, (role, content) in enumerate(turns)]}, 200))


def search(svc: MemoryService, query: str, user: str = "u", top_k: int = 3) -> list[str]:
    return [item["content"] for item in svc.search(parse_search(
        {"user_id": user, "query": query, "top_k": top_k}))["data"]]


def rows(db: Path, sql: str, user: str = "u") -> list[tuple]:
    conn = sqlite3.connect(user_file(db, user))
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_an_add_keeps_the_names_and_their_evidence(tmp_path: Path) -> None:
    db = tmp_path / "aml.db"
    with opened(db) as svc:
        add(svc, CONVERSATION)
        add(svc, NEXT_DAY, request="r2", session="s2", start=DAY + 86_400_000)
    assert rows(db, "SELECT name, role, addressed, introduced FROM speaker_names ORDER BY name") == [
        ("caroline", "user", 3, 0), ("mel", "assistant", 3, 0)]
    # The opening "Hey Mel!" is given to the role that answers it; each other name to the role
    # that spoke before.
    assert rows(db, "SELECT message_id, name, role FROM speaker_mentions ORDER BY message_id") == [
        (1, "mel", "assistant"), (2, "caroline", "user"), (4, "caroline", "user"),
        (5, "mel", "assistant"), (6, "caroline", "user"), (7, "mel", "assistant")]
    assert rows(db, "SELECT role, unnamed FROM roles ORDER BY role") == [("assistant", 4), ("user", 4)]


def conversation(svc: MemoryService, user: str = "u", names: bool = True) -> None:
    def said(turns: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return turns if names else [(role, text.replace("Mel", "you").replace("Caroline", "you"))
                                    for role, text in turns]
    add(svc, said(CONVERSATION + CHATTER), user=user)
    add(svc, said(NEXT_DAY + CHATTER), user=user, request="r2", session="s2", start=DAY + 86_400_000)


def explained(svc: MemoryService, query: str, user: str = "u") -> list[tuple[str, set[str]]]:
    """Each message result's content and the signals that listed it (its explanation)."""
    return [(item["content"], {part["signal"] for part in item["explain"]["signals"]
                               if part["rank"] is not None})
            for item in svc.search(parse_search({"user_id": user, "query": query, "top_k": 20,
                                                 "explain": True}))["data"]
            if item["view"] == "message"]


def paintings(svc: MemoryService, query: str, user: str = "u") -> list[str]:
    """Who painted, in the order the single-message results show it."""
    painters = {CONVERSATION[2][1]: "caroline", NEXT_DAY[3][1]: "mel"}
    return [painters[content] for content, _ in explained(svc, query, user) if content in painters]


def test_the_named_speakers_turns_are_theirs(tmp_path: Path) -> None:
    with opened(tmp_path / "aml.db") as svc:
        conversation(svc)
        conversation(svc, "nameless", names=False)
        for asked, role in (("Melanie", "assistant"), ("Caroline", "user")):
            said = {content for content, signals in explained(svc, f"What did {asked} paint?")
                    if "speaker" in signals}
            assert said and said <= {text for turn_role, text in CONVERSATION + NEXT_DAY + CHATTER
                                     if turn_role == role}
        assert paintings(svc, "What did Melanie paint?")[0] == "mel"
        # The control: the same conversation without a name in it has no speaker to rank by.
        assert not any("speaker" in signals for _, signals in
                       explained(svc, "What did Melanie paint?", "nameless"))
        assert paintings(svc, "What did Melanie paint?", "nameless")[0] == "caroline"


def test_forget_and_reindex_keep_the_counts_right(tmp_path: Path) -> None:
    db = tmp_path / "aml.db"
    with opened(db) as svc:
        conversation(svc)
        before = rows(db, "SELECT * FROM speaker_names ORDER BY name")
        svc.forget("u", [4], "forget")
        assert rows(db, "SELECT name, addressed FROM speaker_names ORDER BY name") == [
            ("caroline", 2), ("mel", 3)]
        assert rows(db, "SELECT role, unnamed FROM roles ORDER BY role") == [
            ("assistant", 11), ("user", 12)]
        assert 4 not in [m for (m,) in rows(db, "SELECT message_id FROM speaker_mentions")]
        svc.forget("u", [2, 14], "forget")
        assert rows(db, "SELECT name FROM speaker_names") == [("mel",)]
    with opened(db) as svc:
        conversation(svc, "v")
        svc.reindex()
    assert rows(db, "SELECT * FROM speaker_names ORDER BY name", user="v") == before


def test_a_deleted_user_leaves_no_names(tmp_path: Path) -> None:
    db = tmp_path / "aml.db"
    with opened(db) as svc:
        conversation(svc)
        conversation(svc, "kept")
        svc.delete_user("u")
    assert rows(db, "SELECT count(*) FROM speaker_names", user="kept") == [(2,)]


def test_the_upgrade_from_schema_8_counts_roles_and_reindex_finds_the_names(tmp_path: Path) -> None:
    db = tmp_path / "aml.db"
    with opened(db) as svc:
        conversation(svc)
        add(svc, [("user", "Caroline: a turn that names its speaker.")], request="r3")
    take_back(user_file(db, "u"), 8)
    with opened(db) as svc:
        assert search(svc, "What did Melanie paint?")  # the file is upgraded on open
        assert rows(db, "PRAGMA user_version") == [(len(SHARD_MIGRATIONS),)]
        assert rows(db, "SELECT role, unnamed FROM roles ORDER BY role") == [
            ("assistant", 12), ("user", 12)]
        assert rows(db, "SELECT count(*) FROM speaker_names") == [(0,)]
        assert paintings(svc, "What did Melanie paint?")[0] == "caroline"
        svc.reindex()
        assert paintings(svc, "What did Melanie paint?")[0] == "mel"


def test_bad_input_is_bounded_and_stored(tmp_path: Path) -> None:
    """A message that is only a name, a name in every turn, a script without capitals, messages
    of 10,000 capitalised words, a role that is itself a name, three people, and a user with
    thousands of candidate names: every Add stored, every Search and reading answered, no name
    attached without evidence."""
    names = [f"Name{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(600)]
    turns = [("user" if i % 2 else "assistant", f"Hey {name}! Thanks, {name}.")
             for i, name in enumerate(names)]
    turns += [("user", "Caroline"), ("assistant", "Caroline: Caroline, Caroline!"),
              ("user", "小明，你好！我叫小红。"), ("Caroline", "Hey Dan! Thanks, Dan."),
              ("Dan (user)", "Hi Caroline, I'm Dan."), ("Eve", "Hello both, I'm Eve.")]
    turns += [(role, "Hey Ana! " + "Ana. Bob Cal Dee " * 2500) for role in ("user", "assistant") * 3]
    with opened(tmp_path / "aml.db") as svc:
        for start in range(0, len(turns), 100):
            add(svc, turns[start:start + 100], request=f"r{start}", session=f"s{start // 100}",
                start=DAY + start * 1000)
        assert search(svc, "What did Nameaa and Caroline say to 小明?", top_k=10)
        assert svc.stats()["messages"] == len(turns)
        found = svc.speakers("u")
        assert found["speakers"] == [] and len(found["candidates"]) == 20
        assert {c["why"] for c in found["candidates"]} <= {"given to several roles",
                                                           "one of several people given the role",
                                                           "given by one message only",
                                                           "not read: too many names"}


def test_a_reading_checks_a_bounded_number_of_names(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """300 names each given to the assistant by two messages in two sessions: the texts are read
    for the CHECKED most given only (the rest still count as other people: none attaches)."""
    names = [f"Name{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(300)]
    read_for: list[str] = []
    real = stored.usage
    monkeypatch.setattr(stored, "usage", lambda conn, name, written: read_for.append(name) or
                        real(conn, name, written))
    turns = [turn for name in names for turn in (("user", f"Thanks, {name}!"), ("assistant", "Sure."))]
    with opened(tmp_path / "aml.db") as svc:
        for session in range(2):
            for at in range(0, len(turns), 200):
                add(svc, turns[at:at + 200], request=f"r{session}-{at}", session=f"s{session}",
                    start=DAY + session * 86_400_000 + at * 1000)
        assert svc.speakers("u")["speakers"] == []
        assert len(read_for) == stored.CHECKED
        with svc.store.connection("u", create=False) as conn:  # the control: 300 to read
            assert conn is not None
            assert len(claims(Evidence(*row) for row in conn.execute(
                "SELECT name, role, addressed, introduced, written FROM speaker_names"))) == 300


def test_mentions_are_mentions() -> None:
    assert mentions("Hey Mel!") == (Mention("mel", ADDRESSED, "Mel"),)
    assert finder.MIN_VOTES >= 2


def test_explain_says_which_named_speaker_said_it_and_how_that_is_known(tmp_path: Path) -> None:
    with opened(tmp_path / "aml.db") as svc:
        conversation(svc)
        conversation(svc, "nameless", names=False)
        add(svc, [("user", "Caroline: I paint on Sundays.")], request="r3", session="s3")
        explained_items = svc.search(parse_search({"user_id": "u", "query": "What did Melanie paint?",
                                                   "top_k": 10, "explain": True}))["data"]
        mel = NEXT_DAY[3][1]
        item = next(i for i in explained_items if i["content"] == mel)
        assert item["explain"]["speakers"] == [{"name": "melanie", "known_by": "conversation",
                                                "role": "assistant", "message_id": item["id"]}]
        by_text = svc.search(parse_search({"user_id": "u", "query": "Did Caroline paint on Sundays?",
                                           "top_k": 10, "explain": True}))["data"]
        assert {"name": "caroline", "known_by": "text", "message_id": "m25"} in [
            s for i in by_text for s in i["explain"].get("speakers", [])]
        # The control: a conversation that names nobody explains no speaker.
        assert not any("speakers" in i["explain"] for i in svc.search(parse_search(
            {"user_id": "nameless", "query": "What did Melanie paint?", "top_k": 10,
             "explain": True}))["data"])
