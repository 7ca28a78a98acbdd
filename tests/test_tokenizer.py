"""Index terms and query expressions: every script findable, no query text ever FTS5 syntax."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aml_retriever.analysis import tokenizer
from aml_retriever.analysis.tokenizer import (
    FTS_TOKENIZE,
    index_text,
    match_expression,
    normalize,
    query_terms,
    quote,
)


@pytest.mark.parametrize("text,expected", [
    ("Zürich", "zurich"), ("CAFÉ", "cafe"), ("Ελληνικά", "ελληνικα"), ("ﬁle", "file"),
    ("e\u0301", "e"), ("Straße", "strasse"), ("Привет", "привет"), ("ＡＢＣ１２３", "abc123"),
])
def test_normalize_folds_case_width_and_latin_greek_diacritics(text, expected):
    assert normalize(text) == expected


def test_devanagari_marks_are_kept():
    assert normalize("हिन्दी") == "हिन्दी"


def test_cjk_runs_become_unigrams_and_bigrams_and_leave_the_words_column():
    terms = index_text("I live in 北京 now")
    assert terms.words == "i live in now"
    assert terms.grams == "北 京 北京"


def test_korean_particles_do_not_hide_the_noun():
    assert "서울" in index_text("서울에 살아요").grams.split()


def test_thai_vowel_marks_stay_with_their_consonant():
    grams = index_text("กิน").grams.split()
    assert "กิ" in grams and "กิน" in grams


def test_emoji_are_indexed_as_symbols_without_presentation_selectors():
    assert index_text("launch 🚀 ❤️").grams.split() == ["🚀", "❤"]


def test_query_gram_runs_use_bigrams_then_ideographs_but_no_lone_kana():
    assert query_terms("北京烤鸭").grams == ["北京", "京烤", "烤鸭", "北", "京", "烤", "鸭"]
    assert query_terms("猫").grams == ["猫"]
    assert query_terms("すしです").grams == ["すし", "しで", "です"]  # no lone kana
    assert query_terms("서울에").grams == ["서울", "울에"]


def test_query_terms_are_unique_and_none_is_dropped():
    terms = query_terms(" ".join(f"w{i}" for i in range(200)) + " w1 w1")
    assert terms.words == [f"w{i}" for i in range(200)]


def test_quote_doubles_inner_quotes():
    assert quote('say "hi"') == '"say ""hi"""'


def test_nothing_to_search_gives_no_expression():
    assert match_expression(query_terms("?!... ---")) is None


def _index(*texts: str) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(words, grams, content='', tokenize=\"{FTS_TOKENIZE}\")")
    for rowid, text in enumerate(texts, 1):
        terms = index_text(text)
        conn.execute("INSERT INTO t (rowid, words, grams) VALUES (?, ?, ?)",
                     (rowid, terms.words, terms.grams))
    return conn


def _search(conn: sqlite3.Connection, query: str) -> list[int]:
    expression = match_expression(query_terms(query))
    if expression is None:
        return []
    return [r[0] for r in conn.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY rowid", (expression,))]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_query_text_is_a_valid_expression(query):
    conn = _index("alpha beta", "北京 서울", "🚀")
    _search(conn, query)  # raises on an FTS5 syntax error


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=120))
def test_a_message_is_found_by_its_own_text(text):
    conn = _index("zzqy unrelated filler", text)
    if query_terms(text):
        assert 2 in _search(conn, text)


WORDS = st.sampled_from(["Zürich", "北京", "서울에", "東京", "Новосибирск", "القاهرة", "हिन्दी",
                         "กรุงเทพ", "🚀", "naïve", "O'Brien", "e-mail", "c++", "x*", "NEAR"])


@settings(max_examples=200, deadline=None)
@given(st.lists(WORDS, min_size=1, max_size=8), st.sampled_from([" ", ", ", "、", "! "]))
def test_each_word_of_a_mixed_script_message_finds_it(words, separator):
    conn = _index("filler line", separator.join(words))
    for word in words:
        if query_terms(word):
            assert 2 in _search(conn, word), word


# ---- the ASCII fast path -----------------------------------------------------------------

ASCII = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127), max_size=200)


@settings(max_examples=300, deadline=None)
@given(ASCII)
def test_ascii_fast_path_matches_the_unicode_path(text: str) -> None:
    assert tokenizer.normalize(text) == tokenizer._normalize_unicode(text)
    assert tokenizer._gram_runs(text) == tokenizer._gram_runs_unicode(text)


def test_ascii_fast_path_covers_every_ascii_character() -> None:
    every = "".join(chr(c) for c in range(128))
    assert tokenizer._gram_runs(tokenizer.normalize(every)) == \
        tokenizer._gram_runs_unicode(tokenizer._normalize_unicode(every))
    assert index_text("Hello, World_42!").words == "hello world 42"
