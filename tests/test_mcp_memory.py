"""The two memories behind the MCP tools, in process: remembering is idempotent, recall and recent
rank both memories together and name each statement's scope, a word budget bounds what recall,
recent and history answer (whole statements only, what it left out counted, pages that lose
nothing), forget removes exactly one statement (every derived row with it, leaving the index as a
rebuild would) and records the removal, and a store written before the removal record upgrades
on open."""

from __future__ import annotations

import itertools
import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import ids
from old_schema import write_old_user
from reliability_support import open_user, store_bytes

from aml_retriever.agents.scopes import (
    DEFAULT_MAX_WORDS,
    LOCAL_GITIGNORE,
    MAX_WORDS,
    MEMORY_USER,
    AmbiguousText,
    ScopedMemory,
    default_global_root,
    parse_statement_id,
    ranked_scores,
    statement_words,
)
from aml_retriever.analysis.tokenizer import reading_words
from aml_retriever.common.errors import InvalidField, NotFound
from aml_retriever.common.signals import SIGNAL_NAMES
from aml_retriever.memory.lifecycle import Tombstoned, fingerprint
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import AddRequest, Message
from aml_retriever.storage.migrations import SHARD_MIGRATIONS


def shard(memory: ScopedMemory, scope: str) -> sqlite3.Connection:
    service = memory._service(scope, create=False)
    assert service is not None
    return open_user(service.store.path, MEMORY_USER)


# ---- where memories live ---------------------------------------------------------------------

def test_local_memory_lives_in_the_project_and_global_memory_in_the_given_root(memory, tmp_path):
    memory.remember("The project uses Poetry.")
    memory.remember("The user is called Ana.", scope="global")
    assert (tmp_path / "project" / ".aml" / "memory.db").is_file()
    assert (tmp_path / "account" / "memory.db").is_file()
    assert (tmp_path / "account").stat().st_mode & 0o777 == 0o700


def test_the_project_memory_stays_out_of_git(memory, tmp_path):
    """`git status` in the project lists nothing of .aml/ (it showed the folder untracked),
    and the project's own files are listed as ever (the control)."""
    import shutil
    import subprocess

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "notes.txt").write_text("a file of the project")
    memory.remember("The project uses Poetry.")
    listed = subprocess.run(["git", "-C", str(project), "status", "--porcelain", "--untracked-files=all"],
                            capture_output=True, text=True, check=True).stdout
    assert "notes.txt" in listed and ".aml" not in listed
    assert (project / ".aml" / "memory.db").is_file()


def test_a_project_memory_an_earlier_release_made_gets_its_gitignore(tmp_path):
    """A .aml/ made before the folder held its own .gitignore gets one when next opened (git
    add -A committed the memory, its secret included)."""
    earlier = ScopedMemory.at(tmp_path / "project", tmp_path / "account")
    earlier.remember("The project uses Poetry.")
    earlier.close()
    ignore = tmp_path / "project" / ".aml" / ".gitignore"
    ignore.unlink()  # as the release before left it
    again = ScopedMemory.at(tmp_path / "project", tmp_path / "account")
    try:
        assert again.recall("Poetry")  # opened
    finally:
        again.close()
    assert ignore.read_text() == LOCAL_GITIGNORE


def test_reading_a_memory_never_written_creates_no_file(memory, tmp_path):
    assert memory.recall("anything")["results"] == []
    assert memory.recent()["results"] == []
    assert not (tmp_path / "project" / ".aml").exists() and not (tmp_path / "account").exists()


@pytest.mark.parametrize("platform, environ, expected", [
    ("linux", {}, "/home/u/.local/share/aml_retriever"),
    ("linux", {"XDG_DATA_HOME": "/data/xdg"}, "/data/xdg/aml_retriever"),
    ("linux", {"XDG_DATA_HOME": "relative/xdg"}, "/home/u/.local/share/aml_retriever"),
    ("darwin", {"XDG_DATA_HOME": "/data/xdg"}, "/home/u/Library/Application Support/aml_retriever"),
    ("win32", {"APPDATA": "/c/Users/u/AppData/Roaming"}, "/c/Users/u/AppData/Roaming/aml_retriever"),
])
def test_the_default_global_root_is_the_platforms_user_data_directory(platform, environ, expected):
    assert default_global_root(environ, platform, Path("/home/u")) == Path(expected)


# ---- remember --------------------------------------------------------------------------------

def test_remembering_the_same_statement_again_replays_it(memory):
    first = memory.remember("The user prefers tabs.", kind="preference")
    assert first["replayed"] is False and first["statement"]["id"] == "local:1"
    again = memory.remember("The user prefers tabs.", kind="preference")
    spaced = memory.remember("  The USER   prefers tabs.\n", kind="preference")
    for replay in (again, spaced):
        assert replay == {"statement": first["statement"], "replayed": True}
    other_kind = memory.remember("The user prefers tabs.", kind="fact")
    assert other_kind["statement"] == first["statement"] and "'preference'" in other_kind["note"]
    assert memory.recent()["results"] == [first["statement"]]
    other = memory.remember("The user prefers tabs.", scope="global")  # another memory: its own
    assert other["statement"]["id"] == "global:1" and other["replayed"] is False


def test_each_run_is_a_session_and_a_later_run_replays_what_an_earlier_one_remembered(tmp_path):
    stores = {"local": tmp_path / "p" / "memory.db", "global": tmp_path / "g" / "memory.db"}
    first, second = ScopedMemory(stores), ScopedMemory(stores)
    try:
        assert first.session_id != second.session_id
        stored = first.remember("Runs share one memory.")["statement"]
        assert second.remember("Runs share one memory.") == {"statement": stored, "replayed": True}
        second.remember("A second run adds its own statement.")
        sessions = shard(second, "local").execute("SELECT session_id FROM sessions").fetchall()
        assert sorted(sessions) == sorted([(first.session_id,), (second.session_id,)])
    finally:
        first.close()
        second.close()


def test_a_statement_carries_its_scope_id_kind_and_time(memory):
    statement = memory.remember("Deploys go through Ansible.", kind="decision")["statement"]
    assert statement["scope"] == "local" and statement["kind"] == "decision"
    assert statement["content"] == "Deploys go through Ansible."
    assert statement["time"].endswith("Z") and statement["time"][:2] == "20"
    assert memory.remember("Plain note.")["statement"]["kind"] == "note"


def test_content_is_stored_byte_for_byte(memory):
    content = "Zürich 北京 👍 «quoted»\ttabbed"
    memory.remember(content)
    assert memory.recall("zurich")["results"][0]["content"] == content


# ---- recall and recent -----------------------------------------------------------------------

def test_recall_searches_both_memories_and_names_why_each_matched(memory):
    memory.remember("The CI pipeline runs on GitHub Actions.")
    memory.remember("The user likes concise answers.", scope="global")
    memory.remember("Unrelated: the office plant is a fern.")
    results = memory.recall("GitHub Actions pipeline concise answers")["results"]
    assert ids(results) == ["local:1", "global:1"]
    for result in results:
        assert parse_statement_id(result["id"])[0] == result["scope"]
        assert result["why"] and set(result["why"]) <= set(SIGNAL_NAMES)
        assert "lexical" in result["why"] and result["score"] > 0


def test_recall_ranks_both_memories_by_score_and_keeps_local_first_on_a_tie(memory):
    memory.remember("Deploy target is Kubernetes.", scope="global")
    memory.remember("Deploy target is Kubernetes.")
    results = memory.recall("deploy target")["results"]
    assert ids(results) == ["local:1", "global:1"]
    assert results[0]["score"] == results[1]["score"]
    memory.remember("Deploy deploy target target: Kubernetes deploy.", scope="global")
    scores = [r["score"] for r in memory.recall("deploy target")["results"]]
    assert scores == sorted(scores, reverse=True)


def test_recall_scores_read_best_first_where_a_memory_ranks_a_lower_match_first(tmp_path):
    """A memory's ranking may place a statement holding more of the query's weight (`match`)
    after one holding less; the `score` shown reads best first all the same: each match at
    most the score before it, the match itself kept. The control: such lists occur (seeded
    statements of a small vocabulary: about two in five recalls)."""
    rng = random.Random(1)
    words = ("deploy target staging cluster user Friday Monday tea coffee morning meeting Ana "
             "notes wiki project Python version upgrade release weekly").split()
    out_of_order = 0
    for trial in range(12):
        memory = ScopedMemory.at(tmp_path / f"p{trial}", tmp_path / f"a{trial}")
        try:
            for _ in range(5):
                memory.remember(" ".join(rng.choice(words) for _ in range(rng.randint(3, 9))) + ".")
            results = memory.recall("What " + " ".join(rng.sample(words, 3)) + "?")["results"]
        finally:
            memory.close()
        matches = [r["match"] for r in results]
        scores = [r["score"] for r in results]
        out_of_order += any(b > a for a, b in itertools.pairwise(matches))
        assert scores == sorted(scores, reverse=True)
        assert scores == ranked_scores(matches) and scores[:1] == matches[:1]
    assert out_of_order >= 2


def test_ranked_scores_cap_each_match_by_the_score_before_it():
    assert ranked_scores([0.24, 0.38, 0.38, 0.24, 0.0]) == [0.24, 0.24, 0.24, 0.24, 0.0]
    assert ranked_scores([1.0, 0.5, 0.7, 0.2]) == [1.0, 0.5, 0.5, 0.2]
    assert ranked_scores([]) == []


def test_recall_scores_a_statement_holding_only_a_word_every_statement_holds_far_below(memory):
    memory.remember("The user deploys on Fridays.")
    memory.remember("The user's name is Ana.", scope="global")  # shares only "user"
    memory.remember("The user prefers tea.")
    results = memory.recall("When does the user deploy?")["results"]
    assert results[0]["content"] == "The user deploys on Fridays." and results[0]["score"] == 1.0
    assert results[0]["matched"] == ["user", "deploy"]
    ana = next(r for r in results if r["content"].startswith("The user's name"))
    assert ana["matched"] == ["user"] and ana["score"] < 0.2  # before: the same score as the answer


def test_recall_with_a_scope_reads_only_that_memory(memory):
    memory.remember("Release notes live in CHANGES.md.")
    memory.remember("Release notes should be short.", scope="global")
    assert ids(memory.recall("release notes")["results"]) == ["local:1", "global:1"]  # control
    assert ids(memory.recall("release notes", scope="local")["results"]) == ["local:1"]
    assert ids(memory.recall("release notes", scope="global")["results"]) == ["global:1"]


def test_recall_returns_at_most_limit_statements(memory):
    for i in range(8):
        memory.remember(f"Build step {i} compiles the widget.", scope="local" if i % 2 else "global")
    assert len(memory.recall("widget", limit=5)["results"]) == 5
    assert len(memory.recall("widget", limit=100)["results"]) == 8


def test_recent_lists_the_newest_statements_of_both_memories_first(memory):
    memory.remember("First, local.")
    memory.remember("Second, global.", scope="global")
    memory.remember("Third, local.")
    assert ids(memory.recent()["results"]) == ["local:2", "global:1", "local:1"]
    assert ids(memory.recent(limit=2)["results"]) == ["local:2", "global:1"]
    assert ids(memory.recent(scope="global")["results"]) == ["global:1"]


# ---- the word budget (max_words) -------------------------------------------------------------

PROSE = ("release", "budget", "cache", "server", "schema", "deploy", "window", "queue", "worker",
         "answer", "token", "limit", "page", "store", "index", "agent", "memory", "note")


def long_statement(i: int, words: int) -> str:
    """A statement of about `words` words of prose (at most 10,000 characters), distinct per i."""
    rng = random.Random(i)
    text = f"Statement {i} of the release budget: " + " ".join(
        rng.choice(PROSE) for _ in range(words))
    return text[:10_000].rstrip()


REMEMBERED: dict[str, str] = {}  # id -> the text remembered, of the memory long_memory made last


@pytest.fixture
def long_memory(memory):
    """100 statements of 40 to 1,500 words (up to 10,000 characters), a third of them global, and
    a handoff of 300 words; REMEMBERED holds what was remembered."""
    REMEMBERED.clear()
    for i in range(100):
        text = long_statement(i, 40 + (i * 373) % 1500)
        stored = memory.remember(text, scope="global" if i % 3 == 0 else "local")["statement"]
        REMEMBERED[stored["id"]] = text
    handoff = long_statement(1000, 300)
    REMEMBERED[memory.handoff(handoff)["handoff"]["id"]] = handoff
    return memory


def words_of(results: list[dict[str, Any]]) -> int:
    return sum(statement_words(r["content"]) for r in results)


def test_the_budget_counts_a_readers_words_and_text_without_spaces_by_its_length():
    prose = "The user deploys on Fridays, after the review."
    assert statement_words(prose) == reading_words(prose) == 8  # as the HTTP max_words counts
    assert statement_words("北京很好") == reading_words("北京很好") == 4
    assert statement_words("x" * 10_000) == 1250 and reading_words("x" * 10_000) == 1


def test_recall_of_100_long_statements_answers_whole_statements_within_the_budget(long_memory):
    unbounded = long_memory.recall("release budget", limit=100)
    assert len(unbounded["results"]) == 100 and "omitted" not in unbounded
    answer = long_memory.recall("release budget", limit=100, max_words=DEFAULT_MAX_WORDS)
    results = answer["results"]
    assert 1 < len(results) < 100
    assert answer["words"] == words_of(results) <= DEFAULT_MAX_WORDS
    assert answer["omitted"] == 100 - len(results)
    assert "max_words 2000" in answer["note"] and "narrower query" in answer["note"]
    assert all(r["content"] == REMEMBERED[r["id"]] for r in results)  # never cut
    # Packed best first, as the HTTP Search packs: each statement left out did not fit after the
    # better ones kept before it; those kept keep their order.
    kept = ids(results)
    assert kept == [i for i in ids(unbounded["results"]) if i in kept]
    used = 0
    for result in unbounded["results"]:
        cost = statement_words(result["content"])
        if result["id"] in kept:
            used += cost
        else:
            assert used + cost > DEFAULT_MAX_WORDS
    # The budget is the agent's to choose: a larger one answers more.
    more = long_memory.recall("release budget", limit=100, max_words=MAX_WORDS)
    assert len(more["results"]) > len(results) and more["words"] <= MAX_WORDS


def test_the_first_statement_alone_over_the_budget_is_answered_whole_and_said_to_be(long_memory):
    best = long_memory.recall("release budget", limit=100)["results"][0]
    answer = long_memory.recall("release budget", limit=100, max_words=5)
    assert [r["content"] for r in answer["results"]] == [REMEMBERED[best["id"]]]
    assert answer["words"] == statement_words(best["content"]) > 5
    assert answer["omitted"] == 99 and "alone has" in answer["note"]
    alone = long_memory.recall("release budget", limit=1, max_words=5)
    assert alone["omitted"] == 0 and "alone has" in alone["note"] and len(alone["results"]) == 1


def every_page(memory: ScopedMemory, **arguments: Any) -> list[dict[str, Any]]:
    pages, cursor = [], None
    while True:
        page = memory.recent(cursor=cursor, **arguments)
        pages.append(page)
        cursor = page["next_cursor"]
        if cursor is None:
            return pages


@pytest.mark.parametrize("limit, max_words", [(100, DEFAULT_MAX_WORDS), (7, 3000), (100, 1)])
def test_recent_pages_through_every_statement_within_the_budget_losing_none(long_memory, limit,
                                                                            max_words):
    everything = [r for page in every_page(long_memory, limit=100) for r in page["results"]]
    assert len(everything) == 101 and everything[0]["kind"] == "handoff"  # control: unbounded
    pages = every_page(long_memory, limit=limit, max_words=max_words)
    listed = [r for page in pages for r in page["results"]]
    assert ids(listed) == ids(everything)  # none lost, none repeated, the same order
    assert [r["content"] for r in listed] == [REMEMBERED[r["id"]] for r in everything]
    assert len(pages) > (101 + limit - 1) // limit  # the budget made the pages shorter
    for page in pages:
        assert 1 <= len(page["results"]) <= limit
        if len(page["results"]) > 1:
            assert words_of(page["results"]) <= max_words
        if "omitted" in page:  # something left out, or the first alone over the budget
            assert page["words"] == words_of(page["results"])
        if page.get("omitted"):
            assert page["next_cursor"] is not None and "next_cursor" in page["note"]
    assert any(page.get("omitted") for page in pages)


def test_history_keeps_the_version_asked_for_and_the_newest_within_limit_and_budget(memory):
    current = memory.remember(long_statement(0, 600))["statement"]["id"]
    first = current
    for version in range(1, 15):
        current = memory.update(current, long_statement(version, 600))["statement"]["id"]
    whole = memory.history(current)
    assert len(whole["versions"]) == 15 and "omitted" not in whole  # control: unbounded
    assert [e["action"] for e in whole["events"]] == ["remember"] + ["update"] * 14
    answer = memory.history(current, limit=10, max_words=DEFAULT_MAX_WORDS)
    kept = ids(answer["versions"])
    assert kept == ids(whole["versions"])[-len(kept):] and 1 < len(kept) < 10  # newest, in order
    assert words_of(answer["versions"]) == answer["words"] <= DEFAULT_MAX_WORDS
    assert answer["omitted"] == 15 - len(kept)
    assert all(set(kept) & set(e["message_ids"]) for e in answer["events"])
    assert answer["omitted_events"] == 15 - len(answer["events"]) > 0
    by_count = memory.history(current, limit=3, max_words=MAX_WORDS)
    assert ids(by_count["versions"]) == ids(whole["versions"])[-3:] and by_count["omitted"] == 12
    oldest = memory.history(first, limit=2, max_words=MAX_WORDS)  # the version asked for, always
    assert ids(oldest["versions"]) == [first, current]


def test_a_small_memory_answers_exactly_as_without_a_budget(memory):
    memory.remember("The CI pipeline runs on GitHub Actions.")
    memory.remember("The user likes concise answers.", scope="global")
    memory.update("local:1", "The CI pipeline runs on Buildkite.")
    memory.handoff("Next: move the deploy job to Buildkite.")
    bounded = {"max_words": DEFAULT_MAX_WORDS}
    assert (memory.recall("pipeline answers", limit=100, **bounded)
            == memory.recall("pipeline answers", limit=100))
    assert memory.recent(limit=100, **bounded) == memory.recent(limit=100)
    assert memory.history("local:2", limit=10, **bounded) == memory.history("local:2")
    page = memory.recent(limit=2, **bounded)
    assert set(page) == {"results", "next_cursor"}  # no omitted, no note
    assert ids(memory.recent(limit=2, cursor=page["next_cursor"], **bounded)["results"]) == [
        "global:1"]


# ---- forget ----------------------------------------------------------------------------------

def test_forget_by_id_removes_that_statement_only(memory):
    memory.remember("The staging host is orca.")
    memory.remember("The production host is walrus.")
    assert ids(memory.recall("host")["results"]) == ["local:1", "local:2"]  # control
    forgotten = memory.forget("local:1")["forgotten"]
    assert forgotten["id"] == "local:1" and forgotten["content"] == "The staging host is orca."
    assert ids(memory.recall("host")["results"]) == ["local:2"]
    assert memory.recall("orca staging")["results"] == []
    assert ids(memory.recent()["results"]) == ["local:2"]


def test_forget_of_text_in_both_memories_removes_none_and_lists_both(memory):
    memory.remember("The user writes British English.")
    memory.remember("The user writes British English.", scope="global")
    with pytest.raises(AmbiguousText) as refused:
        memory.forget(text="The user writes British English.")
    assert ids(refused.value.matches) == ["local:1", "global:1"]
    assert "local:1, global:1" in refused.value.message
    assert ids(memory.recall("British English")["results"]) == ["local:1", "global:1"]
    memory.forget(text="The user writes British English.", scope="global")
    assert ids(memory.recall("British English")["results"]) == ["local:1"]


def test_forget_of_text_held_twice_in_one_memory_removes_none(memory):
    memory.remember("Anchor statement.")  # creates the store
    service = memory._service("local", create=False)
    for request_id in ("import-1", "import-2"):  # two copies, as an import through Add could make
        service.add(AddRequest(request_id, MEMORY_USER, memory.session_id,
                               (Message("note", "Use the staging bucket.", None),)))
    with pytest.raises(AmbiguousText) as refused:
        memory.forget(text="Use the staging bucket.", scope="local")
    assert ids(refused.value.matches) == ["local:2", "local:3"]
    assert ids(memory.recent()["results"]) == ["local:3", "local:2", "local:1"]


def test_forget_by_text_finds_the_statement_as_remember_sees_it(memory):
    memory.remember("Tests run with pytest.")
    memory.remember("Tests should be fast.")
    assert memory.forget(text="  Tests run   with pytest. ")["forgotten"]["id"] == "local:1"
    assert ids(memory.recall("tests")["results"]) == ["local:2"]


def test_forget_refuses_what_it_cannot_do_and_says_what_to_do(memory):
    memory.remember("Something to keep.")
    with pytest.raises(NotFound, match="use recall or recent"):
        memory.forget("local:99")
    with pytest.raises(NotFound, match="find it with recall"):
        memory.forget(text="Never said.")
    with pytest.raises(InvalidField, match="such as local:42"):
        memory.forget("42")
    with pytest.raises(InvalidField, match="leave scope out"):
        memory.forget("local:1", scope="global")
    with pytest.raises(InvalidField, match="exactly one of id"):
        memory.forget()
    with pytest.raises(InvalidField, match="exactly one of id"):
        memory.forget("local:1", text="Something to keep.")
    assert ids(memory.recent()["results"]) == ["local:1"]


@pytest.mark.parametrize("text", ["local:0", "local:01", "remote:1", "local:1\n", "local:", "1"])
def test_a_malformed_statement_id_is_refused(text):
    with pytest.raises(InvalidField):
        parse_statement_id(text)


def test_forget_records_the_removal_without_its_content(memory):
    memory.remember("The API token rotates monthly.")
    memory.remember("Keep this one.")
    memory.forget("local:1")
    conn = shard(memory, "local")
    rows = conn.execute("SELECT message_id, removed_ms, reason FROM removals").fetchall()
    assert [(r[0], r[2]) for r in rows] == [(1, "forget")] and rows[0][1] > 0
    columns = {row[1] for row in conn.execute("PRAGMA table_info(removals)")}
    assert columns == {"message_id", "removed_ms", "reason"}


def test_deleting_the_memory_user_clears_its_removal_record(memory):
    memory.remember("The API token rotates monthly.")
    memory.remember("Keep this one.")
    memory.forget("local:1")
    conn = shard(memory, "local")
    assert conn.execute("SELECT count(*) FROM removals").fetchone()[0] == 1  # control
    memory._service("local", create=False).delete_user(MEMORY_USER)
    assert conn.execute("SELECT count(*) FROM removals").fetchone()[0] == 0


def test_a_forgotten_statement_is_refused_again_unless_forced_then_stored_anew(memory):
    memory.remember("The build uses Bazel.")
    memory.remember("The build used Make.")  # control: another text is not refused
    memory.forget("local:1")
    with pytest.raises(Tombstoned, match=r"forgotten on .*force: true"):
        memory.remember("the build uses  bazel.")  # the same statement, as remember compares
    assert memory.recall("Bazel")["results"] == []
    again = memory.remember("The build uses Bazel.", force=True)
    assert again == {"statement": {**again["statement"], "id": "local:3"}, "replayed": False}
    assert ids(memory.recall("Bazel")["results"]) == ["local:3"]
    memory.forget("local:3")
    with pytest.raises(Tombstoned):  # forgetting it again leaves a tombstone again
        memory.remember("The build uses Bazel.")


def test_forgotten_text_leaves_no_trace_in_the_store_files(memory, tmp_path):
    for i in range(200):
        memory.remember(f"Filler statement {i} about build step {i}.")
    memory.remember("Secret hint: quokkaberry, ask Zelphinor.")
    for i in range(20):
        memory.remember(f"Later filler {i}.")
    db = tmp_path / "project" / ".aml" / "memory.db"
    assert b"zelphinor" in store_bytes(db)  # control: the index holds its terms
    memory.forget(text="Secret hint: quokkaberry, ask Zelphinor.")
    on_disk = store_bytes(db)
    for trace in (b"Zelphinor", b"zelphinor", b"quokkaberr"):
        assert trace not in on_disk
    assert b"Filler statement 17" in on_disk


# ---- forget at the service: derived rows and index exactly as a rebuild makes them -----------

def derived_state(conn: sqlite3.Connection) -> dict[str, object]:
    """Everything derived from the messages, with view ids (which a rebuild renumbers) replaced
    by what the views hold."""
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocab USING fts5vocab(main, message_index, 'row')")
    views = {row[0]: row[1:] for row in conn.execute(
        "SELECT id, kind, session_id, message_ids, start_ms, end_ms FROM views")}
    return {
        "vocab": conn.execute("SELECT term, doc, cnt FROM temp.vocab ORDER BY term").fetchall(),
        "views": sorted(views.values()),
        "links": conn.execute("SELECT id, prev_id, next_id FROM messages ORDER BY id").fetchall(),
        "segments": sorted((m, views[s]) for m, s in conn.execute(
            "SELECT id, segment_id FROM messages")),
        "open": sorted((s, views[o]) for s, o in conn.execute(
            "SELECT session_id, open_segment_id FROM sessions")),
        "speakers": conn.execute("SELECT speaker FROM speakers ORDER BY speaker").fetchall(),
    }


def test_forget_leaves_every_derived_row_as_a_rebuild_would(tmp_path):
    service = MemoryService.open(str(tmp_path / "aml.db"))
    start = 1_700_000_000_000
    for session, third in (("s1", "Cyd"), ("s2", "Eve")):
        messages = tuple(Message("user", f"{name}: turn {i} of {session} about topic{i}",
                                 start + i * 600_000)
                         for i, name in enumerate(["Ana", "Ben", third, "Ana", "Ben", "Dee", "Ana"]))
        service.add(AddRequest(f"r-{session}", "u", session, messages))
    service.forget("u", [3, 6, 9], "forget")  # Cyd's only turn, Dee's turn in s1, Ben's in s2
    conn = open_user(service.store.path, "u")
    after_forget = derived_state(conn)
    assert ("cyd",) not in after_forget["speakers"] and ("dee",) in after_forget["speakers"]
    sessions = conn.execute("SELECT session_id, message_count, first_ms, last_ms, last_message_id "
                            "FROM sessions ORDER BY session_id").fetchall()
    assert sessions == [("s1", 5, start, start + 6 * 600_000, 7),
                        ("s2", 6, start, start + 6 * 600_000, 14)]
    service.reindex()
    assert derived_state(conn) == after_forget
    service.close()


def test_forget_of_a_whole_session_and_request_drops_their_records(tmp_path):
    service = MemoryService.open(str(tmp_path / "aml.db"))
    service.add(AddRequest("gone", "u", "s-gone", (Message("user", "only message", None),)))
    service.add(AddRequest("kept", "u", "s-kept", (Message("user", "kept message", None),)))
    assert service.forget("u", [1, 42], "forget")["forgotten"] == ["m1"]  # 42 does not exist
    conn = open_user(service.store.path, "u")
    assert conn.execute("SELECT session_id FROM sessions").fetchall() == [("s-kept",)]
    assert conn.execute("SELECT request_id FROM requests").fetchall() == [("kept",)]
    assert service.forget("u", [1], "forget")["forgotten"] == []
    assert service.forget("nobody", [1], "forget")["forgotten"] == []
    service.close()


def test_a_store_written_before_the_removal_record_upgrades_on_open(tmp_path):
    paths = {"local": tmp_path / "p" / ".aml" / "memory.db", "global": tmp_path / "g" / "memory.db"}
    write_old_user(paths["local"], MEMORY_USER, 1, [
        ("an-old-request", "an-old-session", [("user", "Written by the previous version.", 0)])])
    current = ScopedMemory(paths)
    try:
        assert ids(current.recall("previous version")["results"]) == ["local:1"]
        assert shard(current, "local").execute("PRAGMA user_version").fetchone()[0] == len(
            SHARD_MIGRATIONS)
        current.forget("local:1")
        assert shard(current, "local").execute("SELECT count(*) FROM removals").fetchone()[0] == 1
        assert current.recall("previous version")["results"] == []
    finally:
        current.close()


def test_statement_fingerprints_ignore_case_unicode_form_and_spacing_but_not_words():
    key = bytes(32)
    assert fingerprint(key, "a  b") == fingerprint(key, " A b\n")
    composed, decomposed = "caf\u00e9", "CAFE\u0301"
    assert fingerprint(key, composed) == fingerprint(key, decomposed)
    assert fingerprint(key, "a b") != fingerprint(key, "a b.")  # control: punctuation counts
    assert fingerprint(key, "a b") != fingerprint(bytes([1] * 32), "a b")  # keyed
