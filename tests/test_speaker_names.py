"""The judged fixture of who is named in a chat (tests/data/speaker_names.json, written by
tests/data/make_speaker_names.py): 46 synthetic chats sent as the leaderboard sends them, role
`user` and `assistant` and the bare text, each session saying who speaks each role.

What must hold: in the chats whose sides are never named, whose turns open with ordinary words
("Morning,", "Nah,", "Yo,", "Update:", "Max, sit!", "Honestly,", "Sure thing,") or address a
third person, a pet or a brand, no turn reads with a name; in the chats with real names (one or
several a side, a persona, a side that names itself, three people), no turn reads with a wrong
name, and every side whose name the text gives on the evidence is named, by the name the chat
calls it. The control: what the old rule read (a name given to one role by two messages) names
a side in most of the chats without names, so each exclusion is the rules', not the data's."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from aml_retriever.analysis.speakers import Evidence, claims
from aml_retriever.analysis.tokenizer import normalize
from aml_retriever.memory.reader_view import ReaderView, render
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import parse_add
from aml_retriever.storage import speakers as stored

FIXTURE = json.loads((Path(__file__).parent / "data" / "speaker_names.json").read_text("utf-8"))
CHATS = {chat["id"]: chat for chat in FIXTURE["chats"]}
NAMELESS = [key for key, chat in CHATS.items()
            if all(name is None for s in chat["sessions"] for name in s["who"].values())]


def stored_chat(tmp_path: Path, chat: dict[str, Any]) -> closing[MemoryService]:
    svc = MemoryService.open(str(tmp_path / "aml.db"), synchronous="NORMAL")
    for s, session in enumerate(chat["sessions"]):
        start = FIXTURE["start_ms"] + s * 3 * FIXTURE["day_ms"]
        svc.add(parse_add({"user_id": "u", "request_id": f"r{s}", "session_id": f"s{s}", "messages": [
            {"role": role, "content": text, "timestamp": start + i * 60_000}
            for i, (role, text) in enumerate(session["turns"])]}, 1000))
    return closing(svc)


def shown(svc: MemoryService) -> list[tuple[int, str, str]]:
    """Each turn's session, role and the name its line reads with in the reader's view: the name
    shown before the text, or the one the text names when the view says the text names it."""
    with svc.store.connection("u", create=False) as conn:
        assert conn is not None
        view = ReaderView.read(conn)
        rows = conn.execute("SELECT id, content, timestamp_ms, role, signal_keys, marks, told, "
                            "session_id FROM messages ORDER BY id").fetchall()
        found = []
        for row in rows:
            said = view.said(*row[:7])
            line = render([said])
            name = said.speaker
            if said.source == "text":
                name = said.content.split(":", 1)[0]
                assert line.split("UTC] ", 1)[1].startswith(f"({said.role}) {name}:")
            elif name:
                assert line.split("UTC] ", 1)[1].startswith(f"{name} ({said.role}): ")
            found.append((int(row[7][1:]), row[3], name))
        return found


def wrong(name: str, truth: str | None) -> bool:
    """Whether a name shown is not its speaker's (a form of it: "Deb" for "Deborah" is right)."""
    if not name:
        return False
    if truth is None:
        return True
    a, b = normalize(name), normalize(truth)
    return not (a.startswith(b) or b.startswith(a))


def test_the_fixture_is_what_it_says() -> None:
    assert len(CHATS) >= 30 and len(NAMELESS) >= 25
    assert sum(len(s["turns"]) for chat in CHATS.values() for s in chat["sessions"]) > 2000
    assert {"morning-opener", "nah", "yo", "update-prefix", "max-sit", "honestly", "sure-thing",
            "third-person-addressed", "cat-greeted", "brand"} <= set(NAMELESS)
    assert {"deb-deborah", "cal-calvin", "persona", "three-people", "self-introduced"} <= set(CHATS)


@pytest.mark.parametrize("key", sorted(CHATS))
def test_no_turn_reads_with_a_wrong_name(tmp_path: Path, key: str) -> None:
    chat = CHATS[key]
    with stored_chat(tmp_path, chat) as svc:
        turns = shown(svc)
    assert len(turns) == sum(len(s["turns"]) for s in chat["sessions"])
    assert [(s, role, name) for s, role, name in turns
            if wrong(name, chat["sessions"][s]["who"][role])] == []
    for role in chat["required"]:
        names = {name for _, r, name in turns if r == role}
        expected = {s["who"][role] for s in chat["sessions"]}
        assert names == expected, (role, names)  # every turn: the name the chat calls it


def test_the_old_rule_names_most_of_the_nameless_chats(tmp_path: Path) -> None:
    """The control: two messages giving a word to one role (what attached a name before) are
    found in most nameless chats; no name is attached in any of them."""
    voted = []
    for key in NAMELESS:
        with stored_chat(tmp_path / key, CHATS[key]) as svc:
            with svc.store.connection("u", create=False) as conn:
                assert conn is not None
                rows = [Evidence(*row) for row in conn.execute(
                    "SELECT name, role, addressed, introduced, written FROM speaker_names")]
                if claims(rows):
                    voted.append(key)
                assert stored.read(conn).roles == {}, key
    assert len(voted) >= 20, voted


def test_a_role_with_several_names_says_which_it_shows(tmp_path: Path) -> None:
    with stored_chat(tmp_path, CHATS["deb-deborah"]) as svc:
        body = svc.speakers("u")
    user = next(s for s in body["speakers"] if s["role"] == "user")
    assert user["shown"] == "Deborah" and [n["name"] for n in user["names"]] == ["Deb", "Deborah"]
    with stored_chat(tmp_path / "persona", CHATS["persona"]) as svc:
        body = svc.speakers("u")
    user = next(s for s in body["speakers"] if s["role"] == "user")
    assert user["shown"] == "Nina" and [n["name"] for n in user["names"]] == ["Nina", "Zed"]
    assert user["names"][1]["introduced"] == 2 and user["names"][1]["addressed"] == 0


def test_one_message_counts_once_and_a_forget_takes_back_all_it_gave(tmp_path: Path) -> None:
    """'I'm Mallory. I'm MAllory. ...' in one message is one introduction (ten before); forgotten,
    it leaves no trace of the name."""
    with stored_chat(tmp_path, CHATS["mallory"]) as svc:
        path = svc.store.shard_path("u")
        conn = sqlite3.connect(path)
        try:
            assert conn.execute("SELECT addressed, introduced FROM speaker_names "
                                "WHERE name = 'mallory'").fetchall() == [(0, 1)]
            (message,) = conn.execute("SELECT message_id FROM speaker_mentions "
                                      "WHERE name = 'mallory'").fetchone()
        finally:
            conn.close()
        assert {name for _, role, name in shown(svc) if role == "user"} == {"Bob"}
        svc.forget("u", [message], "forget")
        conn = sqlite3.connect(path)
        try:
            assert conn.execute("SELECT count(*) FROM speaker_names WHERE name = 'mallory'"
                                ).fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM speaker_mentions WHERE name = 'mallory'"
                                ).fetchone() == (0,)
            assert stored.usage(conn, "mallory", "Mallory").read == 0
            assert stored.usage(conn, "bob", "Bob").read > 0  # control
        finally:
            conn.close()
