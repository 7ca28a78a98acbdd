"""The answer window (answer_window_tokens): a Search keeps the front of its ranking exactly as
without it, then fills the reader's window with whole messages of the user's memory, never one
twice, never cut, never more than top_k items and never past the window; off, nothing changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Client, start_app
from old_schema import take_back
from reliability_support import user_file

from aml_retriever.analysis.tokens import bound, pieces
from aml_retriever.engine import window
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import parse_add, parse_search

TOPICS = ["the harbour ferry timetable", "my sister's wedding in Porto", "the kitchen tiles",
          "a trip to Kyoto in April", "the violin lessons", "the garden shed roof"]


def conversation(sessions: int = 12, turns: int = 14) -> list[dict]:
    """Adds of a two-person chat: each session about one topic, every turn distinct."""
    adds = []
    for s in range(sessions):
        topic = TOPICS[s % len(TOPICS)]
        messages = [{"role": "user" if t % 2 == 0 else "assistant",
                     "timestamp": 1_700_000_000_000 + (s * 100 + t) * 60_000,
                     "content": f"Session {s} turn {t}: about {topic}, detail number {s * 31 + t}."}
                    for t in range(turns)]
        adds.append({"user_id": "u", "request_id": f"r{s}", "session_id": f"s{s}",
                     "messages": messages})
    return adds


@pytest.fixture
def service(tmp_path: Path):
    svc = MemoryService.open(str(tmp_path / "aml.db"), synchronous="NORMAL")
    for add in conversation():
        svc.add(parse_add(add, 200))
    yield svc
    svc.close()


def search(svc: MemoryService, query: str, top_k: int = 100, tokens: int = 0, **extra) -> dict:
    svc.answer_window_tokens = tokens
    return svc.search(parse_search({"user_id": "u", "query": query, "top_k": top_k, **extra}))


def members(item: dict) -> list[int]:
    return [int(m[1:]) for m in item["source_message_ids"]]


def stored(svc: MemoryService) -> dict[int, str]:
    with svc.store.connection("u", create=False) as conn:
        return dict(conn.execute("SELECT id, content FROM messages"))


def conversation_order(svc: MemoryService) -> list[int]:
    with svc.store.connection("u", create=False) as conn:
        return [m for (m,) in conn.execute("SELECT id FROM messages ORDER BY session_id, "
                                           "timestamp_ms, id")]


def as_joined(item: dict, texts: dict[int, str], order: list[int]) -> str:
    """What an item's content must be: its messages whole, in order, a gap line between two
    that are not next to each other in their session."""
    ids, parts = members(item), []
    for i, m in enumerate(ids):
        if i and order.index(m) != order.index(ids[i - 1]) + 1:
            parts.append(window.GAP_LINE)
        parts.append(texts[m])
    return "\n".join(parts)


def test_the_front_is_the_ranking_as_it_was_and_the_rest_is_context(service):
    plain = search(service, "when is the ferry to Porto", tokens=0)["data"]
    filled = search(service, "when is the ferry to Porto", tokens=117_760)["data"]
    keep, _ = window.kept([len(item["content"].split()) for item in plain], 100)
    assert filled[:keep] == plain[:keep]  # ids, order, scores, contents: as without the window
    assert len(filled) > keep and all(item["view"] == "context" for item in filled[keep:])
    assert all(item["score"] == 0.0 for item in filled[keep:])


def test_no_message_twice_none_cut_and_at_most_top_k_items(service):
    texts, order = stored(service), conversation_order(service)
    for top_k in (100, 20, 12):
        data = search(service, "the violin lessons in April", top_k, 117_760)["data"]
        assert len(data) <= top_k
        ids = [m for item in data for m in members(item)]
        assert len(ids) == len(set(ids))  # each message once across all items
        for item in data:  # whole messages, in the order listed, never rewritten
            assert item["content"] == as_joined(item, texts, order)
            assert {"view", "source_message_ids", "session_id", "created_at"} <= set(item)
            assert len({texts[m] for m in members(item)}) == len(members(item))
            if item["view"] == "context":  # one session, in conversation order
                assert [order.index(m) for m in members(item)] == sorted(
                    order.index(m) for m in members(item))


def test_a_memory_that_fits_is_returned_whole(service):
    data = search(service, "kitchen tiles", 100, 117_760)["data"]
    assert sorted(m for item in data for m in members(item)) == sorted(stored(service))


def test_the_answer_stays_inside_the_window(service):
    """The answer and the rest of the reader's prompt (its instructions, the question) fit the
    window: the last item is never cut, however long the question."""
    texts = stored(service)
    for tokens in (600, 2_000, 5_000):
        for query in ("the garden shed roof", "the garden shed roof " + "and the long aside " * 60):
            data = search(service, query, 100, tokens)["data"]
            context = [item for item in data if item["view"] == "context"]
            spent = sum(pieces(texts[m]) + 1 for item in data for m in members(item)) \
                + sum(item["content"].count(window.GAP_LINE) for item in context) * window.GAP_PIECES \
                + window.ITEM_TOKENS * len(data) + window.prompt_pieces(query, ())
            # The ranked front too: what does not fit is passed; a question longer than the
            # window leaves room for nothing.
            assert bound(spent) <= tokens or (not data and bound(window.prompt_pieces(query, ())) > tokens)
            assert context or tokens < 2_000


@pytest.mark.parametrize("max_words", [300, 2_000])
def test_max_words_still_bounds_the_answer(service, max_words):
    """The two compose, the smaller wins: the answer holds at most max_words words (a run that
    does not fit whole is cut between messages, never inside one)."""
    texts, order = stored(service), conversation_order(service)
    data = search(service, "the ferry timetable", 100, 117_760, max_words=max_words)
    assert data["words"] <= max_words
    assert data["words"] == sum(len(texts[m].split()) for item in data["data"]
                                for m in members(item))
    for item in data["data"]:
        assert item["content"] == as_joined(item, texts, order)
    if max_words == 2_000:  # control: room is left after the ranked front, and context fills it
        assert any(item["view"] == "context" for item in data["data"])
        assert data["words"] > 1_500


def test_off_the_answers_are_unchanged(service):
    assert search(service, "Porto wedding", 100, 0) == search(service, "Porto wedding", 100, 0)
    assert all(item["view"] != "context" for item in search(service, "Porto wedding")["data"])


def test_the_fill_keeps_to_what_the_search_may_see(service):
    data = search(service, "Kyoto", 100, 117_760, session_id="s3", filter_session=True)["data"]
    assert data and {item["session_id"] for item in data} == {"s3"}


def test_a_store_from_before_the_token_column_is_filled_by_estimates_until_reindex(tmp_path):
    db = tmp_path / "aml.db"
    svc = MemoryService.open(str(db), synchronous="NORMAL")
    for add in conversation(4, 6):
        svc.add(parse_add(add, 200))
    svc.close()
    take_back(user_file(db, "u"), 5)  # the file as schema 5 left it: no token column
    svc = MemoryService.open(str(db), synchronous="NORMAL")
    try:
        with svc.store.connection("u", create=False) as conn:
            assert conn.execute("SELECT count(*) FROM messages WHERE tokens IS NULL").fetchone()[0] == 24
        data = search(svc, "the kitchen tiles", 100, 117_760)["data"]
        assert sorted(m for item in data for m in members(item)) == list(range(1, 25))
        svc.reindex()
        with svc.store.connection("u", create=False) as conn:
            rows = conn.execute("SELECT content, tokens FROM messages").fetchall()
        assert all(tokens == pieces(content) for content, tokens in rows)
    finally:
        svc.close()


def test_over_http_the_setting_fills_the_window_and_the_flag_sets_it(tmp_path):
    app = start_app(tmp_path, answer_window_tokens=117_760)
    try:
        c = Client(app.port)
        for add in conversation(5, 8):
            assert c.post("/add", add).status == 200
        response = c.search("u", "the harbour ferry", top_k=100)
        data = response.body["data"]
        assert response.status == 200 and len({m for item in data for m in members(item)}) == 40
        json.dumps(response.body)  # valid JSON, whatever its size
    finally:
        app.stop()


def test_the_leaderboard_script_serves_with_the_window_on(tmp_path):
    """The one command the README gives for the leaderboard: the window is on without a flag,
    and the server runs a process a core; its log's first line says both."""
    import socket
    import subprocess
    import time

    from aml_retriever.processes import usable_cores

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = Path(__file__).resolve().parents[1]
    server = subprocess.Popen([str(root / "scripts" / "serve_leaderboard.sh"), "--port", str(port),
                               "--db", "lb.db"], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if Client(port).request("GET", "/health").status == 200:
                    break
            except OSError:
                time.sleep(0.1)
        c = Client(port)
        for add in conversation(5, 8):
            assert c.post("/add", add).status == 200
        data = c.search("u", "the harbour ferry", top_k=100).body["data"]
        assert len({m for item in data for m in members(item)}) == 40  # the whole memory
        assert (tmp_path / "lb.db").exists()  # a relative --db is the caller's
    finally:
        server.terminate()
        _, err = server.communicate(timeout=30)
    first = err.splitlines()[0]
    assert "answer window 117760 tokens; reader's view on" in first
    cores = usable_cores()  # one process a core the machine lets it use
    assert f"with {cores} processes" in first if cores > 1 else "processes" not in first


def test_the_front_kept_is_read_no_further_than_it_keeps():
    """kept() counts the ranked items' words only as far as it keeps them: a top_k 100 answer of
    long replies keeps KEEP_MIN and never counts the rest; short ones are kept up to KEEP_MAX."""
    def long_replies():
        for _ in range(window.KEEP_MIN):
            yield 1_000
        raise AssertionError("counted an item it does not keep")

    assert window.kept(long_replies(), 100) == (window.KEEP_MIN, window.KEEP_MIN * 1_000)
    assert window.kept([1] * 100, 100) == (window.KEEP_MAX, window.KEEP_MAX)
    assert window.kept([1] * 100, 7) == (7, 7)  # never more than top_k
    assert window.kept([], 100) == (0, 0)


def test_context_is_one_item_a_session_with_its_chosen_turns_in_order(service):
    """A session's messages the fill chose are one item, in conversation order, a gap line
    where it leaves some out: the user's turns of a session come without the replies between."""
    texts, order = stored(service), conversation_order(service)
    data = search(service, "the violin lessons", 100, 4_000)["data"]
    context = [item for item in data if item["view"] == "context"]
    assert context  # populated
    sessions = [item["session_id"] for item in context]
    assert len(sessions) == len(set(sessions))  # one item a session
    gapped = [item for item in context if window.GAP_LINE in item["content"]]
    assert gapped  # some leave turns out: a small window takes the user's turns first
    for item in gapped:
        assert item["content"] == as_joined(item, texts, order)


def test_a_text_stored_in_many_sessions_is_returned_once(tmp_path):
    svc = MemoryService.open(str(tmp_path / "aml.db"), synchronous="NORMAL")
    try:
        for s in range(30):
            svc.add(parse_add({"user_id": "u", "request_id": f"r{s}", "session_id": f"s{s}",
                               "messages": [{"role": "user",
                                             "content": "I keep my passport in the blue drawer.",
                                             "timestamp": 1_700_000_000_000 + s * 86_400_000},
                                            {"role": "assistant", "content": f"Noted, reply {s}.",
                                             "timestamp": 1_700_000_000_000 + s * 86_400_000 + 1}]}, 200))
        for tokens in (0, 117_760):
            data = search(svc, "where is my passport", 100, tokens)["data"]
            held = [item["content"].count("passport") for item in data]
            assert sum(held) == 1  # once, with the window off and on
        assert len(search(svc, "where is my passport", 100, 117_760)["data"]) > 1  # populated
    finally:
        svc.close()


def test_each_context_message_says_why_it_was_chosen(service):
    data = search(service, "Porto wedding detail number 40", 100, 6_000, explain=True)["data"]
    context = [item for item in data if item["view"] == "context"]
    assert context
    for item in context:
        chosen = item["explain"]["context"]
        assert [c["message_id"] for c in chosen] == item["source_message_ids"]
        assert {c["chosen"] for c in chosen} <= set(window.REASONS.values())
    reasons = {c["chosen"] for item in context for c in item["explain"]["context"]}
    assert "the speaker's turn, in a session the ranking hit" in reasons


def test_a_query_without_a_word_answers_nothing_and_one_matching_nothing_the_memory(service):
    assert search(service, "?! ... --", 100, 117_760)["data"] == []
    assert search(service, "?! ... --", 100, 0)["data"] == []
    # Words the memory does not hold: the memory, oldest first (it fits the window whole).
    data = search(service, "xylophone zebra", 100, 117_760)["data"]
    assert sorted(m for item in data for m in members(item)) == sorted(stored(service))


def test_a_ranked_item_too_large_for_what_is_left_is_passed_and_the_next_may_fit(tmp_path):
    svc = MemoryService.open(str(tmp_path / "aml.db"), synchronous="NORMAL")
    try:
        svc.add(parse_add({"user_id": "u", "request_id": "r", "session_id": "s", "messages": [
            {"role": "user", "content": "ferry " + "timetable harbour " * 3_000,
             "timestamp": 1_700_000_000_000},
            {"role": "assistant", "content": "The ferry leaves the harbour at nine.",
             "timestamp": 1_700_000_900_000}]}, 200))
        data = search(svc, "ferry harbour", 100, 2_000)["data"]
        assert [item["content"] for item in data] == ["The ferry leaves the harbour at nine."]
        assert len(search(svc, "ferry harbour", 100, 0)["data"]) == 2  # control: both rank
    finally:
        svc.close()


def test_the_fill_reads_what_it_walks_not_the_memory(tmp_path, monkeypatch):
    """A small window over a large session reads a few pages of outlines around the hits, not
    every message: its reads follow the window, not the memory (one larger than WHOLE: a
    smaller one is read in one query)."""
    monkeypatch.setattr(window, "WHOLE", 1_000)
    svc = MemoryService.open(str(tmp_path / "aml.db"), synchronous="OFF")
    try:
        for start in range(0, 3_000, 200):
            svc.add(parse_add({"user_id": "u", "request_id": f"r{start}", "session_id": "s", "messages": [
                {"role": "user" if i % 2 == 0 else "assistant",
                 "content": f"Turn {i} about {TOPICS[i % 6]} and number {i * 7}.",
                 "timestamp": 1_700_000_000_000 + i * 1000} for i in range(start, start + 200)]}, 200))
        reads = []
        made = window.Outline.__init__

        def counted(self, *args, **kwargs):
            made(self, *args, **kwargs)
            reads.append(self)
        monkeypatch.setattr(window.Outline, "__init__", counted)
        for tokens, most in ((3_000, 1_500), (117_760, 6_000)):
            data = search(svc, "the garden shed roof number 2107", 100, tokens)["data"]
            assert any(item["view"] == "context" for item in data)
            assert reads[-1].rows_read <= most
        assert reads[0].rows_read < reads[1].rows_read  # a larger window reads more
    finally:
        svc.close()


def test_a_long_memory_without_the_users_turns_still_answers_a_question_matching_nothing(
        tmp_path, monkeypatch):
    """One session of assistant turns longer than the fill may read (READ_LIMIT): the walk for
    the users' turns gives up after SCAN_MISSES others in a row, and the last step reads the
    memory oldest first, along what was read before (before: the first walk read all it might,
    found none, and the answer was empty; one session of 100,000: 0 items in 360 ms, now one
    item of the window's size in 130-160 ms)."""
    monkeypatch.setattr(window, "WHOLE", 100)  # read a page at a time, as a large memory is
    monkeypatch.setattr(window, "READ_LIMIT", 600)
    svc = MemoryService.open(str(tmp_path / "aml.db"), synchronous="OFF")
    try:
        for start in range(0, 1_000, 200):
            svc.add(parse_add({"user_id": "u", "request_id": f"r{start}", "session_id": "s", "messages": [
                {"role": "assistant", "content": f"Reply {i} about {TOPICS[i % 6]}.",
                 "timestamp": 1_700_000_000_000 + i * 1000} for i in range(start, start + 200)]}, 200))
        outlines = []
        made = window.Outline.__init__

        def kept(self, *args, **kwargs):
            made(self, *args, **kwargs)
            outlines.append(self)
        monkeypatch.setattr(window.Outline, "__init__", kept)
        for misses in (10 ** 9, 200):  # never given up: every outline it may read is read
            monkeypatch.setattr(window, "SCAN_MISSES", misses)
            data = search(svc, "xylophone zebra", 100, 2_000)["data"]
            assert data and members(data[0])[0] == 1  # the memory, oldest first
        assert outlines[0].rows_read >= 600 > outlines[1].rows_read  # (a page may pass it)
    finally:
        svc.close()
