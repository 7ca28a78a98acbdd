"""Who is who in a conversation sent as `user` and `assistant` with the bare text: the names one
side calls the other and the names a speaker gives itself (analysis/speakers.py), kept per user
at Add (storage/speakers.py, shard migration 9) and read by a Search (engine/speakers.py)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from old_schema import take_back
from reliability_support import user_file

from aml_retriever.analysis import speakers as finder
from aml_retriever.analysis.speakers import ADDRESSED, INTRODUCED, Evidence, Mention, attach, mentions
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import parse_add, parse_search
from aml_retriever.storage.migrations import SHARD_MIGRATIONS

DAY = 1_683_554_160_000  # Monday 8 May 2023, 13:56 UTC


@pytest.mark.parametrize(("text", "found"), [
    ("Hey Mel! Good to see you! How have you been?", [("mel", ADDRESSED)]),
    ("Thanks, Caroline. That means a lot.", [("caroline", ADDRESSED)]),
    ("Wow, that's cool, Caroline! What happened?", [("caroline", ADDRESSED)]),
    ("Caroline, that's great news.", [("caroline", ADDRESSED)]),
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
    return [Evidence(name, role, addressed=votes) for name, role, votes in items]


def test_names_attach_to_the_role_they_are_given() -> None:
    found = attach(evidence(("caroline", "user", 122), ("caro", "user", 2), ("mel", "assistant", 53),
                            ("melanie", "assistant", 52), ("yeah", "user", 4),
                            ("yeah", "assistant", 1)))
    assert found.names == {"assistant": ("mel", "melanie"), "user": ("caroline", "caro")}
    assert found.role_of("melanie") == found.role_of("mel") == "assistant"
    assert found.role_of("yeah") is None  # 4 to 1 over the roles, and not the user's person


def test_clear_evidence_only() -> None:
    assert attach(evidence(("jon", "user", 1))).roles == {}  # one mention
    assert attach(evidence(("sure", "user", 3), ("sure", "assistant", 3))).roles == {}  # split
    # A role several people share: no name is attached to it.
    assert attach(evidence(("alice", "user", 10), ("bob", "user", 9))).roles == {}
    assert attach(evidence(("alice", "user", 10), ("bob", "user", 2))).roles == {"alice": "user"}


def test_the_same_evidence_in_any_order_attaches_the_same_names() -> None:
    items = evidence(("gina", "assistant", 69), ("jon", "user", 83), ("jo", "user", 3),
                     ("tie", "user", 2), ("tie", "assistant", 2))
    assert attach(items) == attach(list(reversed(items)))
    # A name shortened only in the question finds its role; one that two roles share does not.
    assert attach(items).role_of("jonathan") == "user"
    assert attach(evidence(("ann", "user", 5), ("anne", "assistant", 5))).role_of("annette") is None


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
    """A message that is only a name, a name in every turn, a script without capitals and a user
    with thousands of candidate names: every Add stored, every Search answered."""
    names = [f"Name{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(600)]
    turns = [("user" if i % 2 else "assistant", f"Hey {name}! Thanks, {name}.")
             for i, name in enumerate(names)]
    turns += [("user", "Caroline"), ("assistant", "Caroline: Caroline, Caroline!"),
              ("user", "小明，你好！我叫小红。")]
    with opened(tmp_path / "aml.db") as svc:
        for start in range(0, len(turns), 100):
            add(svc, turns[start:start + 100], request=f"r{start}", start=DAY + start * 1000)
        assert search(svc, "What did Nameaa and Caroline say to 小明?", top_k=10)
        assert svc.stats()["messages"] == len(turns)


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
