"""Each ranking signal changes the ranking where it should, and only there: every test compares
the signal on against the same configuration with it off (the control)."""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aml_retriever.common.signals import SIGNAL_NAMES, RetrievalConfig
from aml_retriever.engine.candidates import Term, TermIndex
from aml_retriever.engine.hits import HitReader
from aml_retriever.engine.query import plan
from aml_retriever.engine.retrieval import Retrieval
from aml_retriever.engine.words import QuestionWords, _holds_word, exact_words
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import AddRequest, Message, SearchRequest

DAY_MS = 86_400_000
T0 = int(dt.datetime(2023, 1, 10, 12, tzinfo=dt.UTC).timestamp() * 1000)


@pytest.fixture
def svc(tmp_path: Any) -> Any:
    service = MemoryService.open(str(tmp_path / "aml.db"), synchronous="NORMAL")
    yield service
    service.close()


def add(svc: MemoryService, session: str, *contents: str, start_ms: int = T0, role: str = "user",
        step_ms: int = 1000) -> None:
    messages = tuple(Message(role, c, start_ms + i * step_ms) for i, c in enumerate(contents))
    svc.add(AddRequest(f"r{session}{start_ms}{contents[0][:8]}{role}", "u", session, messages))


def only(**weights: float) -> RetrievalConfig:
    return RetrievalConfig(weights={"lexical": 1.0, **weights})


def contents(svc: MemoryService, query: str, config: RetrievalConfig, top_k: int = 10) -> list[str]:
    svc.retrieval = config
    return [r["content"] for r in svc.search(SearchRequest(query, "u", top_k, (), None))["data"]]


def test_window_joins_a_question_split_over_consecutive_turns(svc):
    add(svc, "s1", "Which city did you visit in spring?", "Lisbon, and the tiles were lovely.",
        "Unrelated chatter about spring cleaning.")
    assert contents(svc, "city tiles", only())[0] != \
        "Which city did you visit in spring?\nLisbon, and the tiles were lovely."
    assert contents(svc, "city tiles", only(window=2.0))[0] == \
        "Which city did you visit in spring?\nLisbon, and the tiles were lovely."


def test_segment_favours_a_turn_whose_conversation_is_about_the_question(svc):
    add(svc, "s1", "I bought a guitar yesterday", "the weather is grey", start_ms=T0)
    add(svc, "s2", "lessons start on monday", "I bought a guitar today", start_ms=T0 + 10 * DAY_MS)
    query = "guitar lessons"
    assert contents(svc, query, only())[:2] == ["lessons start on monday", "I bought a guitar yesterday"]
    ranked = contents(svc, query, only(segment=1.0))
    assert ranked.index("I bought a guitar today") < ranked.index("I bought a guitar yesterday")


def test_coverage_prefers_the_words_as_written_over_their_stems(svc):
    add(svc, "s1", "runs shoes")
    add(svc, "s2", "my new running shoes arrived from the store", start_ms=T0 + DAY_MS)
    assert contents(svc, "running shoes", only())[0] == "runs shoes"
    assert contents(svc, "running shoes", only(coverage=2.0))[0] == \
        "my new running shoes arrived from the store"


def test_entity_prefers_the_name_the_question_asks_about(svc):
    add(svc, "s1", "she liked the novel, the novel, marta said")
    add(svc, "s2", "Marta wrote a novel once in her long life", start_ms=T0 + DAY_MS)
    query = "Did Marta like the novel?"
    assert contents(svc, query, only())[0] == "she liked the novel, the novel, marta said"
    assert contents(svc, query, only(entity=2.0))[0] == "Marta wrote a novel once in her long life"


def test_number_matches_digits_and_number_words(svc):
    add(svc, "s1", "I have cats")
    add(svc, "s2", "we have 2 cats at home now", start_ms=T0 + DAY_MS)
    assert contents(svc, "two cats", only())[0] == "I have cats"
    assert contents(svc, "two cats", only(number=2.0))[0] == "we have 2 cats at home now"


def test_date_answers_when_with_the_turn_that_carries_a_date(svc):
    add(svc, "s1", "hiking is fun")
    add(svc, "s2", "I went hiking last Saturday with friends", start_ms=T0 + DAY_MS)
    assert contents(svc, "When did you go hiking?", only())[0] == "hiking is fun"
    assert contents(svc, "When did you go hiking?", only(date=2.0))[0] == \
        "I went hiking last Saturday with friends"
    # control: a question that is not about time is left alone
    assert contents(svc, "Do you like hiking?", only(date=2.0))[0] == "hiking is fun"


def test_date_matches_a_named_month_by_message_time(svc):
    add(svc, "s1", "a walk by the river", start_ms=T0)
    add(svc, "s2", "another long walk by the river", start_ms=int(
        dt.datetime(2023, 5, 3, tzinfo=dt.UTC).timestamp() * 1000))
    assert contents(svc, "river walk in May 2023", only())[0] == "a walk by the river"
    assert contents(svc, "river walk in May 2023", only(date=2.0))[0] == "another long walk by the river"


def test_speaker_prefers_the_turns_of_the_person_named(svc):
    add(svc, "s1", "I love painting", role="Caroline")
    add(svc, "s2", "I love painting landscapes in the summer", role="Melanie", start_ms=T0 + DAY_MS)
    query = "What does Melanie love painting?"
    assert contents(svc, query, only())[0] == "I love painting"
    assert contents(svc, query, only(speaker=2.0))[0] == "I love painting landscapes in the summer"


def test_speaker_is_read_from_a_name_prefix_when_the_role_is_generic(svc):
    add(svc, "s1", "Caroline: I love painting")
    add(svc, "s2", "Melanie: I love painting landscapes in the summer", start_ms=T0 + DAY_MS)
    assert contents(svc, "What does Melanie love painting?", only(speaker=2.0))[0] == \
        "Melanie: I love painting landscapes in the summer"


def test_adjacency_brings_the_answer_that_follows_the_question_turn(svc):
    add(svc, "s1", "Where did you travel last spring?", "Peru, it was amazing.")
    assert "Peru, it was amazing." not in contents(svc, "travel spring", only())
    assert contents(svc, "travel spring", only(adjacency=1.0))[:2] == \
        ["Where did you travel last spring?", "Peru, it was amazing."]


def test_recency_prefers_the_newer_of_equal_matches(svc):
    add(svc, "s1", "the red bicycle", start_ms=T0)
    add(svc, "s2", "the red bicycle!", start_ms=T0 + DAY_MS)
    assert contents(svc, "red bicycle", only())[0] == "the red bicycle"
    assert contents(svc, "red bicycle", only(recency=2.0))[0] == "the red bicycle!"


def test_supersession_puts_the_newer_update_first_for_current_state_questions(svc):
    add(svc, "s1", "I live in Berlin", start_ms=T0)
    add(svc, "s2", "We moved to Munich last month and now live near the park",
        start_ms=T0 + 60 * DAY_MS)
    current = "Where do I currently live?"
    assert contents(svc, current, only())[0] == "I live in Berlin"
    ranked = contents(svc, current, only(supersession=1.0))
    assert ranked[0] == "We moved to Munich last month and now live near the park"
    assert "I live in Berlin" in ranked  # demoted, never removed


def test_supersession_stays_off_for_historical_questions(svc):
    add(svc, "s1", "I live in Berlin", start_ms=T0)
    add(svc, "s2", "We moved to Munich last month and now live near the park",
        start_ms=T0 + 60 * DAY_MS)
    for question in ("Where did I live before?", "Where did I first live?", "Where do I live?"):
        assert contents(svc, question, only(supersession=1.0))[0] == "I live in Berlin", question


def test_every_signal_can_be_switched_off_and_unknown_names_are_refused():
    config = RetrievalConfig()
    for name in SIGNAL_NAMES:
        assert config.without(name).weight(name) == 0.0
    with pytest.raises(ValueError, match="unknown signal 'bogus'; known: lexical"):
        config.without("bogus")
    with pytest.raises(ValueError, match="unknown signal"):
        RetrievalConfig(weights={"bogus": 1.0})


def test_a_question_of_only_stop_words_still_answers(svc):
    add(svc, "s1", "what is it", "something else entirely")
    assert contents(svc, "What is it?", RetrievalConfig())[0] == "what is it"


def test_results_never_repeat_evidence_across_views(svc):
    add(svc, "s1", *[f"tea note {i} about green tea" for i in range(12)])
    data = svc.search(SearchRequest("green tea", "u", 50, (), None))["data"]
    sources = [m for r in data for m in r["source_message_ids"]]
    assert len(sources) == len(set(sources)) == 12
    assert {r["view"] for r in data} <= {"message", "window"}
    assert len({r["content"] for r in data}) == len(data)


@pytest.mark.parametrize("first,second,query", [
    ("我们明天去北京", "坐高铁大概五个小时", "北京 高铁"),
    ("明日は東京に行きます", "新幹線で三時間です", "東京 新幹線"),
    ("내일 서울에 가요", "기차로 세 시간 걸려요", "서울 기차"),
    ("Завтра едем в Москву", "поездом восемь часов", "Москву поездом"),
])
def test_multi_script_queries_work_through_windows(svc, first, second, query):
    add(svc, "s1", first, second, "unrelated filler text here")
    assert contents(svc, query, only(window=2.0))[0] == f"{first}\n{second}"
    assert contents(svc, query.split()[0], RetrievalConfig())[0].startswith(first)


# ---- the question's words in a candidate ----------------------------------------------------

ASCII_WORDS = st.sampled_from(["run", "runs", "cat", "ca", "t", "42", "a1", "Lena", "lena's"])


@settings(max_examples=300, deadline=None)
@given(st.lists(ASCII_WORDS | st.sampled_from([" ", "-", "_", ".", "'", "\n"]), max_size=30),
       st.sets(st.sampled_from(["run", "cat", "ca", "t", "42", "a1", "lena", "s"]), max_size=4))
def test_shared_words_of_ascii_text_are_the_words_column_words(parts, wanted):
    """The one-pattern search of ASCII text finds exactly the question's words the general
    word split finds (whole words, case-folded, `_` and punctuation as separators)."""
    text = "".join(parts)
    index = TermIndex(sqlite3.connect(":memory:"))  # no lexical list read: every text is scanned
    words = QuestionWords(frozenset(wanted), index, {})
    assert words.in_text(1, text) == frozenset(wanted) & exact_words(text)


def test_words_are_looked_for_only_in_messages_holding_their_stem_and_found_alike(svc):
    """A Search skips the text of a message its lexical list shows to lack a word's stem; the
    words it finds are those a scan of every candidate's whole text finds."""
    add(svc, "s1", "The violin was in the attic.", "Violins and violas for sale.", "A violinist played.",
        "The attic holds old boxes.", "Nothing here about music.", "The weather is grey.")
    with svc.store.connection("u", create=False) as conn:
        search = Retrieval(conn, RetrievalConfig())
        question = plan("violin attic boxes")
        search.run(question, 10, None)
        holders = search.index.holders("violin")
        assert holders is not None and 0 < len(holders) < len(search.rows)  # control: some lack it
        words = QuestionWords(question.exact, search.index, search.rows)  # the holders its lists read
        for message_id, row in search.rows.items():
            scan = frozenset(question.exact) & exact_words(row.content)
            assert words.shared((message_id,)) == scan


def test_a_name_in_most_of_a_small_memory_still_counts(svc):
    """FTS5's IDF is ~0 for a term in over half the messages; the Lucene IDF keeps it positive,
    so the message about the cousin outranks one that shares only a particle."""
    add(svc, "s1", "我表弟在浙江杭州工作呢。", "我表弟身高169厘米。", "我表弟是北京人。",
        "我的表弟今年36岁。", "我表弟的邮箱是a@b.c。", "我上司都44岁了。", "我同事今年39岁。")
    assert "表弟" in contents(svc, "我表弟现在多大了呀？", only())[0]


LONG_REPLY = ("Here is a long answer about tomato gardening. " + "It covers soil, water and light "
              "in detail, with many tips for every season of the year. " * 30
              + "Your tomato harvest plan and the harvest tomato schedule are both sound.")


def test_brevity_ranks_a_short_precise_message_above_a_long_reply(svc):
    add(svc, "s1", "The tomato harvest starts in August.", start_ms=T0)
    add(svc, "s2", LONG_REPLY, start_ms=T0 + DAY_MS, role="assistant")
    query = "tomato harvest plan schedule"
    assert contents(svc, query, only())[0] == LONG_REPLY
    assert contents(svc, query, only(brevity=1.0))[0] == "The tomato harvest starts in August."


def test_a_first_person_question_favours_the_users_own_messages(svc):
    add(svc, "s1", "Tomato harvest tips: water tomato plants and plan the harvest early.",
        role="assistant")
    add(svc, "s2", "I planned the tomato harvest for August.", start_ms=T0 + DAY_MS)
    query = "When did I plan the tomato harvest?"
    control = contents(svc, query, only())
    assert control[0].startswith("Tomato harvest tips")
    assert contents(svc, query, only(first_person=2.0))[0] == "I planned the tomato harvest for August."
    # Not in the third person: the same question about someone else leaves the order alone.
    assert contents(svc, "When did Ana plan the tomato harvest?", only(first_person=2.0))[0] == \
        contents(svc, "When did Ana plan the tomato harvest?", only())[0]


def test_a_window_needs_a_second_member_with_evidence(svc):
    add(svc, "s1", "Did you find the violin?", "Yes, in the attic.", "Great news.")
    add(svc, "s2", "violin lessons resume", "the weather is grey", "see you", start_ms=T0 + DAY_MS)
    with svc.store.connection("u", create=False) as conn:
        search = Retrieval(conn, RetrievalConfig())
        reader = HitReader(conn, search.config, search.index, search.visible, search.rows,
                           search.held)
        hits = reader.read(plan("violin attic"), 20, None)
    matched = {m for m, _ in hits.messages}
    windows = [w for w, _ in hits.windows]
    assert windows  # control: the window joining two matching turns is there
    assert all(sum(m in matched for m in w) >= 2 for w in windows)


def test_hop_reaches_evidence_that_shares_no_word_with_the_question(svc):
    add(svc, "s1", "我叔叔的生日是在11月14号。", "我叔叔叫王志强。", "我同事在深圳上班。",
        "我表姐特别喜欢阅读。")
    question = "那个生日是11月14日的人，姓名是什么？"
    assert "我叔叔叫王志强。" not in contents(svc, question, only())
    found = contents(svc, question, only(hop=0.3))
    assert found[0] == "我叔叔的生日是在11月14号。"  # the question's own hit stays first
    assert "我叔叔叫王志强。" in found  # reached through 叔叔, which the first hit lends
    assert "我同事在深圳上班。" not in found  # control: nothing bridges to it


def test_hop_lends_the_first_hits_rare_words_in_english(svc):
    add(svc, "s1", "Lena is my sister.", "Lena lives in Porto these days.", "Paris is lovely.")
    found = contents(svc, "Which city is my sister in?", only(hop=0.3))
    assert found[0] == "Lena is my sister."
    assert "Lena lives in Porto these days." in found
    assert "Paris is lovely." not in found
    assert "Lena lives in Porto these days." not in contents(svc, "Which city is my sister in?", only())


def test_a_word_most_messages_hold_bridges_nothing(svc):
    add(svc, "s1", "The user's editor is Helix.", "The user's shell is fish.")
    assert contents(svc, "which editor", only(hop=0.3)) == ["The user's editor is Helix."]


@given(st.text(alphabet="ab1 -.\n", max_size=60), st.text(alphabet="ab1", min_size=1, max_size=4))
def test_a_whole_word_is_found_as_a_word_boundary_pattern_finds_it(text, word):
    pattern = re.compile(f"(?<![a-z0-9]){re.escape(word)}(?![a-z0-9])")
    assert _holds_word(text, word) == (pattern.search(text) is not None)


def test_a_word_list_cut_at_its_depth_names_no_holders(svc):
    add(svc, "s1", "The violin was in the attic.", "Violins and violas for sale.", "A violinist played.")
    with svc.store.connection("u", create=False) as conn:
        cut, whole = TermIndex(conn), TermIndex(conn)
        assert len(cut.ranked((Term("words", "violin"),), 1)) == 1
        assert cut.holders("violin") is None  # one of two holders read: the others are unknown
        assert len(whole.ranked((Term("words", "violin"),), 10)) == 2
        assert whole.holders("violin") is not None and len(whole.holders("violin")) == 2


_MIXED_WORDS = ["café", "cafe", "Café", "naïve", "naive", "Straße", "strasse", "résumé", "plan",
                "东京", "tokyo", "ﬁle", "file", "“quoted”", "it’s", "its", "42", "x_y", "ÉCOLE"]
_SEPARATORS = [" ", "", ",", "’", "_", "é", "ß", "\n", "-", "２", "Ⅻ", "東"]


@given(st.lists(st.tuples(st.sampled_from(_MIXED_WORDS), st.sampled_from(_SEPARATORS)), max_size=12),
       st.lists(st.sampled_from(_MIXED_WORDS), min_size=1, max_size=6))
@settings(max_examples=400, deadline=None)
def test_the_question_s_words_in_text_beyond_ascii_are_its_exact_words(text_words, asked):
    """A text with letters beyond ASCII has the question's words its exact words hold: its
    ASCII words found whole in the casefolded text, its other words normalised one by one;
    words joined by marks, by letters of other scripts, by nothing at all."""
    text = "".join(word + gap for word, gap in text_words) + " é"  # never ASCII
    wanted = frozenset(w for word in asked for w in exact_words(word))
    assert QuestionWords(wanted, None, {})._in_any_text(text) == wanted & exact_words(text)


@given(st.text(max_size=80), st.lists(st.text(max_size=6), min_size=1, max_size=5))
@settings(max_examples=400, deadline=None)
def test_the_question_s_words_in_any_text_are_its_exact_words(text, asked):
    wanted = frozenset(w for word in asked for w in exact_words(word))
    assert QuestionWords(wanted, None, {})._in_any_text(text + "é") == wanted & exact_words(text + "é")


@pytest.mark.parametrize("hit_depth", [1, 4, 7])
def test_the_first_stage_reads_hit_depth_hits_for_each_candidate_wanted(tmp_path, monkeypatch,
                                                                          hit_depth):
    """`hit_depth` is the first stage's depth: the question's terms are read hit_depth times as
    deep as the lists it ranks (candidate_depth, or top_k when larger)."""
    config = RetrievalConfig().with_values(hit_depth=hit_depth)
    svc = MemoryService.open(str(tmp_path / "aml.db"), retrieval=config, synchronous="NORMAL")
    try:
        svc.add(AddRequest("r", "u", "s", tuple(Message("user", f"the harbour ferry {i}", i)
                                                 for i in range(3))))
        limits = []
        ranked = TermIndex.ranked
        monkeypatch.setattr(TermIndex, "ranked", lambda self, terms, limit, *rest:
                            limits.append(limit) or ranked(self, terms, limit, *rest))
        svc.search(SearchRequest("harbour ferry", "u", 30, (), None))
        assert limits[0] == 30 * hit_depth
    finally:
        svc.close()
