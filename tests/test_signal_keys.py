"""The signals a Search reads are stored at Add time (shard migration 7): each message's names,
numbers, dates and speaker as keys beside it (`signal_keys`, each between newlines), its update
and date marks as bits. A Search looks the question's keys up in its candidates' (engine/keys.py)
instead of parsing every candidate's features; the upgrade from schema 6 derives them from the
stored features, and `reindex` writes them anew."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from old_schema import take_back
from reliability_support import user_file

from aml_retriever.analysis.features import MARK_DATED, MARK_UPDATE, extract
from aml_retriever.engine.keys import QuestionKeys
from aml_retriever.engine.query import plan
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import parse_add, parse_search
from aml_retriever.storage.migrations import SHARD_MIGRATIONS

DAY = 1_704_200_000_000  # 2 January 2024: no message is said in the periods asked about
MESSAGES = [
    ("Caroline", "I moved to Lisbon with Melanie in March 2023."),
    ("Melanie", "We paid 1,200 euros for the flat on 2023-05-02."),
    ("Caroline", "The Porto trip is now set for June 14, 2023."),
    ("Melanie", "Nothing dated or named here, only chatter about tea."),
    ("user", "Ana: my 3 cats still sleep all day."),
    ("assistant", "Tell me more about the cats."),
    ("Melanie", "We married in 2023, a good year."),
]
QUESTIONS = ["Where did Caroline move with Melanie?", "How much was the flat, 1200 euros?",
             "What happened in May 2023?", "When is the Porto trip?",
             "What did Ana say about her 3 cats?", "Where does Caroline live now?",
             "What happened in 2023?"]


def add_all(svc: MemoryService, user: str = "u") -> None:
    svc.add(parse_add({"user_id": user, "request_id": "r1", "session_id": "s1", "messages": [
        {"role": role, "content": content, "timestamp": DAY + i * 60_000}
        for i, (role, content) in enumerate(MESSAGES)]}, 200))


def answers(svc: MemoryService) -> list[list[tuple[str, float]]]:
    return [[(item["id"], item["score"]) for item in svc.search(parse_search(
        {"user_id": "u", "query": q, "top_k": 10}))["data"]] for q in QUESTIONS]


def stored(db: Path) -> tuple[list[tuple[str, int]], list[tuple[int, int]]]:
    """Every (key, message) the user's file holds, and each message's marks."""
    conn = sqlite3.connect(user_file(db, "u"))
    try:
        rows = conn.execute("SELECT id, signal_keys, marks FROM messages ORDER BY id").fetchall()
    finally:
        conn.close()
    keys = sorted((key, i) for i, text, _ in rows for key in text.split("\n") if key)
    assert all(text == "" or (text[0] == text[-1] == "\n") for _, text, _ in rows)
    return keys, [(i, marks) for i, _, marks in rows]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "aml.db"
    svc = MemoryService.open(str(path), synchronous="NORMAL")
    add_all(svc)
    svc.close()
    return path


def test_an_add_stores_each_message_s_keys_and_marks(db):
    keys, marks = stored(db)
    expected = sorted((key, i) for i, (role, content) in enumerate(MESSAGES, 1)
                      for key in extract(role, content, DAY + (i - 1) * 60_000).keys())
    assert keys == expected
    assert ("e:lisbon", 1) in keys and ("n:1200", 2) in keys and ("d:2023-05-02", 2) in keys
    assert ("s:caroline", 1) in keys and ("s:ana", 5) in keys
    assert dict(marks)[1] == MARK_UPDATE | MARK_DATED  # "moved to", "March 2023"
    assert dict(marks)[4] == 0 and dict(marks)[6] == 0  # the controls: nothing to mark
    assert dict(marks)[7] == MARK_DATED


def downgrade_to_schema_6(db: Path, features_as_objects: bool = False) -> None:
    """The user file as schema 6 left it: no keys, no marks, no links index (and, for the stores
    older still, each message's features as the JSON object they once were)."""
    take_back(user_file(db, "u"), 6)
    conn = sqlite3.connect(user_file(db, "u"))
    if features_as_objects:
        for message_id, role, content, timestamp in conn.execute(
                "SELECT id, role, content, timestamp_ms FROM messages").fetchall():
            f = extract(role, content, timestamp)
            conn.execute("UPDATE messages SET features = ? WHERE id = ?", (json.dumps(
                {"speaker": f.speaker, "entities": f.entities, "numbers": f.numbers,
                 "dates": f.dates, "update": f.update}), message_id))
    conn.commit()
    conn.close()


@pytest.mark.parametrize("features_as_objects", [False, True])
def test_a_store_of_schema_6_gets_the_same_keys_and_answers_on_open(db, features_as_objects):
    svc = MemoryService.open(str(db), synchronous="NORMAL")
    before, keys = answers(svc), stored(db)
    svc.close()
    downgrade_to_schema_6(db, features_as_objects)
    svc = MemoryService.open(str(db), synchronous="NORMAL")
    try:
        assert answers(svc) == before
        conn = sqlite3.connect(user_file(db, "u"))
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(SHARD_MIGRATIONS)
        conn.close()
        assert stored(db) == keys
    finally:
        svc.close()


def test_reindex_writes_the_keys_and_marks_anew(db):
    keys = stored(db)
    conn = sqlite3.connect(user_file(db, "u"))
    conn.execute("UPDATE messages SET marks = 0, signal_keys = ''")
    conn.commit()
    conn.close()
    svc = MemoryService.open(str(db), synchronous="NORMAL")
    try:
        svc.reindex()
    finally:
        svc.close()
    assert stored(db) == keys


def test_the_question_s_keys_rank_as_the_features_they_stand_for(db):
    """Each feature signal still finds what it did when it parsed the features: the holder of
    the question's name, number, period or speaker comes first."""
    svc = MemoryService.open(str(db), synchronous="NORMAL")
    try:
        first = [svc.search(parse_search({"user_id": "u", "query": q, "top_k": 1}))["data"][0]
                 ["source_message_ids"] for q in QUESTIONS]
    finally:
        svc.close()
    assert first[1] == ["m2"]  # 1200: the number, written "1,200"
    assert first[4] == ["m5"]  # Ana's turn, her speaker key


@pytest.mark.parametrize("question,periods", [
    ("What happened in May 2023?", {"2023-05": {2, 7}}),  # its day, and the year holding it
    ("What happened on 2023-05-02?", {"2023-05-02": {2, 7}}),
    ("What happened in 2023?", {"2023": {1, 2, 3, 7}}),  # every date within it
    ("What happened in March 2024?", {"2024-03": set()}),
])
def test_a_period_meets_the_dates_within_it_and_around_it(db, question, periods):
    """dates.covers, looked up in the stored keys: a date within the period, or one the period
    lies in."""
    conn = sqlite3.connect(user_file(db, "u"))
    try:
        rows = conn.execute("SELECT id, signal_keys FROM messages").fetchall()
    finally:
        conn.close()
    needles = QuestionKeys(plan(question)).periods
    assert {p: {i for i, keys in rows if any(n in keys for n in found_by)}
            for p, found_by in needles.items()} == periods


def test_a_store_of_schema_7_gets_the_links_index_and_answers_as_before(db):
    """Shard migration 8: the links every Search follows get an index of their own."""
    svc = MemoryService.open(str(db), synchronous="NORMAL")
    before = answers(svc)
    svc.close()
    take_back(user_file(db, "u"), 7)
    svc = MemoryService.open(str(db), synchronous="NORMAL")
    try:
        assert answers(svc) == before
        conn = sqlite3.connect(user_file(db, "u"))
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'messages_links'"
                            ).fetchone() == (1,)
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(SHARD_MIGRATIONS)
        conn.close()
    finally:
        svc.close()


@pytest.mark.parametrize("question,holders", [
    ("Did they move to Lisbon?", {"lisbon": {1}}),
    ("Did they move to Lisb?", {"lisb": set()}),  # a key is found whole, never by its start
    ("Was it 120 euros?", {"120": set()}),  # 1200 is not 120
])
def test_a_question_s_name_or_number_is_held_only_whole(db, question, holders):
    conn = sqlite3.connect(user_file(db, "u"))
    try:
        rows = conn.execute("SELECT id, signal_keys FROM messages").fetchall()
    finally:
        conn.close()
    asked = QuestionKeys(plan(question))
    needles = {**asked.entities, **asked.numbers}
    assert {v: {i for i, keys in rows if any(n in keys for n in found_by)}
            for v, found_by in needles.items()} == holders


HOSTILE = st.text(alphabet=st.sampled_from(["\x00", "\n", "a", "Z", "é", "1", " ", ":", "北"]),
                  min_size=1, max_size=12)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(HOSTILE, HOSTILE), min_size=1, max_size=6))
def test_an_upgrade_from_schema_6_writes_every_key_as_an_add_does_nul_and_all(tmp_path_factory, rows):
    """Hostile rows (NULs, newlines in roles and texts, "Name: " prefixes holding them): the keys
    the upgrade derives equal what the Add wrote, byte for byte (SQLite's JSON functions cut a
    string at a NUL: the role "Bob\\0Mallory" was stored as said by "Bob")."""
    db = tmp_path_factory.mktemp("hostile") / "aml.db"
    svc = MemoryService.open(str(db), synchronous="OFF")
    svc.add(parse_add({"user_id": "u", "request_id": "r1", "session_id": "s1", "messages": [
        {"role": f"{role}", "content": f"{role}: {content} Zeta{content} in May 2023",
         "timestamp": DAY + i * 60_000} for i, (role, content) in enumerate(rows)]}, 200))
    svc.close()
    before = _raw_keys(db)
    assert any("\n" in keys for keys in before.values())  # populated
    take_back(user_file(db, "u"), 6)
    _open_user(db)
    assert _raw_keys(db) == before


def test_a_file_upgraded_before_the_keys_kept_nuls_is_mended(db_nul):
    """A file that went through migration 7 when it cut at NULs is written again by migration
    11 where the features hold one; other rows are left as they are."""
    path, fresh = db_nul
    assert "s:bob\x00mallory" in fresh[1] and "e:zeta\x00omega" in fresh[1]  # populated
    take_back(user_file(path, "u"), 10)
    conn = sqlite3.connect(user_file(path, "u"))
    conn.execute("UPDATE messages SET signal_keys = 'cut' WHERE instr(features, '\\u0000') > 0")
    conn.execute("UPDATE messages SET signal_keys = 'left' WHERE instr(features, '\\u0000') = 0")
    conn.commit()
    conn.close()
    _open_user(path)
    mended = _raw_keys(path)
    assert [mended[m] for m in fresh if "\x00" in fresh[m]] == [k for k in fresh.values() if "\x00" in k]
    assert {mended[m] for m in fresh if "\x00" not in fresh[m]} == {"left"}  # control: untouched


@pytest.fixture
def db_nul(tmp_path: Path) -> tuple[Path, dict[int, str]]:
    path = tmp_path / "aml.db"
    svc = MemoryService.open(str(path), synchronous="OFF")
    svc.add(parse_add({"user_id": "u", "request_id": "r1", "session_id": "s1", "messages": [
        {"role": "Bob\x00Mallory", "content": 'I quote "zeta\x00omega" and Zeta\x00Omega.',
         "timestamp": DAY},
        {"role": "user", "content": "Plain words about Lisbon.", "timestamp": DAY + 1}]}, 200))
    svc.close()
    return path, _raw_keys(path)


def _open_user(db: Path) -> None:
    """Open the user's file with this version (which brings it to the current schema)."""
    svc = MemoryService.open(str(db), synchronous="OFF")
    try:
        svc.search(parse_search({"user_id": "u", "query": "Zeta", "top_k": 5}))
    finally:
        svc.close()


def _raw_keys(db: Path) -> dict[int, str]:
    conn = sqlite3.connect(user_file(db, "u"))
    try:
        return dict(conn.execute("SELECT id, signal_keys FROM messages"))
    finally:
        conn.close()
