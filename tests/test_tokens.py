"""The token estimate that fills the answer window is never below the reader's own count: checked
against o200k_base itself (gpt-4o's BPE), through the test-only packages tiktoken and bpe-openai
(which ships the vocabulary, so nothing is downloaded), on English, Chinese, code and random text.
And it is not so far above that the window is wasted."""

from __future__ import annotations

import base64
import random
from pathlib import Path
from typing import Any

import o200k_oracle
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from o200k_oracle import count

from aml_retriever.analysis.tokens import bound, estimate_tokens, pieces

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def o200k(tmp_path_factory: pytest.TempPathFactory):
    return o200k_oracle.encoding(tmp_path_factory)


def paragraphs(path: Path) -> list[str]:
    return [p for p in path.read_text(encoding="utf-8").split("\n\n") if p.strip()]


def samples() -> dict[str, list[str]]:
    """Real text of each kind this project stores: English prose and chat-like lines (the docs),
    Chinese (the Chinese README), code (the package's own source)."""
    english = [p for doc in sorted((ROOT / "docs").glob("*.md")) for p in paragraphs(doc)]
    chinese = paragraphs(ROOT / "README.zh.md")
    code = [p for module in sorted((ROOT / "aml_retriever").rglob("*.py")) for p in paragraphs(module)]
    return {"english": english, "chinese": chinese, "code": code}


@pytest.mark.parametrize("kind", ["english", "chinese", "code"])
def test_the_estimate_is_never_below_o200k_on_real_text(o200k, kind):
    texts = samples()[kind]
    assert len(texts) > 50  # populated
    under = [(text[:60], estimate_tokens(text), count(o200k, text)) for text in texts
             if estimate_tokens(text) < count(o200k, text)]
    assert under == []
    # Whole documents too: a long text, where the per-piece margins must not add up short.
    joined = "\n\n".join(texts)
    assert estimate_tokens(joined) >= count(o200k, joined)


@pytest.mark.parametrize("kind,most", [("english", 1.6), ("chinese", 1.8), ("code", 1.6)])
def test_the_estimate_does_not_waste_the_window(o200k, kind, most):
    """Above the reader's count, but not by so much that the window goes unfilled."""
    joined = "\n\n".join(samples()[kind])
    assert estimate_tokens(joined) <= most * count(o200k, joined)


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=400))
def test_the_estimate_is_never_below_o200k_on_any_text(o200k, text):
    assert estimate_tokens(text) >= count(o200k, text)


def test_a_mutated_estimate_fails_the_check(o200k):
    """The check can fail: an estimate of words alone is below the reader's count."""
    text = "\n\n".join(samples()["code"][:200])
    assert len(text.split()) < count(o200k, text) <= estimate_tokens(text)


def test_random_mixed_scripts_stay_above(o200k):
    rng = random.Random(7)
    alphabet = "abcXYZ 012 ,.;:!?\n北京上海饺子猫 😀 ñé ΩЖ \t{}()<>#*_-'\""
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 300)))
        assert estimate_tokens(text) >= count(o200k, text), text


LANGUAGES = ROOT / "tests" / "data" / "languages"
KINDS = sorted(path.stem for path in LANGUAGES.glob("*.txt"))


def test_twelve_kinds_of_chat_are_held():
    assert KINDS == ["arabic", "chinese", "code", "hindi", "korean", "lists", "numbers", "romaji",
                     "russian", "swahili", "turkish", "vietnamese"]


@pytest.mark.parametrize("kind", KINDS)
def test_no_language_is_undercounted_message_by_message_nor_as_a_whole_answer(o200k, kind):
    """Each message's estimate, and a whole answer of them counted as the window counts it (the
    messages' pieces and separators, the margin once): never below o200k_base's count. Not even
    an answer made of the kind's worst message over and over."""
    messages = paragraphs(LANGUAGES / f"{kind}.txt")
    assert len(messages) > 30
    assert [m[:40] for m in messages if estimate_tokens(m) < count(o200k, m)] == []
    answer = "\n".join(messages)
    assert bound(sum(pieces(m) + 1 for m in messages)) >= count(o200k, answer)
    worst = min(messages, key=lambda m: pieces(m) / count(o200k, m))
    assert bound((pieces(worst) + 1) * 200) >= count(o200k, "\n".join([worst] * 200))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=200), min_size=1, max_size=40))
def test_a_whole_answer_of_any_texts_is_never_undercounted(o200k, texts):
    assert bound(sum(pieces(t) + 1 for t in texts)) >= count(o200k, "\n".join(texts))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(sorted({w for kind in KINDS for m in paragraphs(LANGUAGES / f"{kind}.txt")
                                        for w in m.split()})), min_size=1, max_size=300))
def test_words_of_every_language_mixed_are_never_undercounted(o200k, words):
    text = " ".join(words)
    assert estimate_tokens(text) >= count(o200k, text)
    lines = "\n".join(words)
    assert bound(sum(pieces(w) + 1 for w in words)) >= count(o200k, lines)


@pytest.mark.parametrize("kind", KINDS)
def test_a_windowed_answer_is_never_over_the_window_by_the_readers_count(o200k, kind, tmp_path):
    """Served as the leaderboard serves (the window and the reader's view on), every answer in
    every kind of chat fits the reader's window by o200k_base's own count: the items' texts,
    what a reader spends on each item, the prompt around them."""
    windowed_answers_fit(o200k, paragraphs(LANGUAGES / f"{kind}.txt"), tmp_path, context=True)


def generated(kind: str) -> list[str]:
    """Messages of what the twelve kinds of chat hold little of: encoded data (base64 keys and
    files, which o200k_base splits finely: 0.95 of its count before), and letters outside the
    Basic Multilingual Plane (Gothic: 0.81 before; mathematical letters; emoji)."""
    rng = random.Random(kind)
    if kind == "base64":
        return [f"the key {i}: " + base64.b64encode(rng.randbytes(rng.randrange(20, 600))).decode()
                for i in range(60)]
    blocks = {"gothic": (0x10330, 27), "math": (0x1D400, 52), "emoji": (0x1F600, 80)}
    start, size = blocks[kind]
    return [" ".join("".join(chr(start + rng.randrange(size)) for _ in range(rng.randrange(2, 9)))
                     for _ in range(rng.randrange(5, 120))) for _ in range(60)]


@pytest.mark.parametrize("size", [100, 1_000, 20_000])
def test_encoded_data_is_never_undercounted(o200k, size):
    """Random bytes base64-encoded, alone and in a sentence (before: 0.91-0.95 of o200k's count
    from 1 kB on, the margin taken)."""
    rng = random.Random(size)
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        blob = encode(rng.randbytes(size)).decode()
        for text in (blob, f"Here is the key: {blob} thanks"):
            assert estimate_tokens(text) >= count(o200k, text)


@pytest.mark.parametrize("kind", ["base64", "gothic", "math", "emoji"])
def test_a_windowed_answer_of_encoded_data_or_letters_beyond_the_bmp_fits(o200k, kind, tmp_path):
    """(Their ranked front may fill the window, and a query of emoji alone fills no context.)"""
    windowed_answers_fit(o200k, generated(kind), tmp_path, context=False)


def windowed_answers_fit(o200k: Any, messages: list[str], tmp_path: Path, context: bool) -> None:
    """Every answer fits the window by the reader's count; with `context`, the larger window
    holds context items too."""
    from aml_retriever.engine import window
    from aml_retriever.memory.service import MemoryService
    from aml_retriever.memory.validation import parse_add, parse_search

    svc = MemoryService.open(str(tmp_path / "aml.db"), synchronous="OFF")
    svc.reader_view = True
    for s in range(0, len(messages), 6):
        svc.add(parse_add({"user_id": "u", "request_id": f"r{s}", "session_id": f"s{s // 12}",
                           "messages": [{"role": "user" if i % 2 else "assistant", "content": m,
                                         "timestamp": 1_700_000_000_000 + (s + i) * 60_000}
                                        for i, m in enumerate(messages[s:s + 6])]}, 200))
    try:
        for tokens in (1_500, 12_000):
            svc.answer_window_tokens = tokens
            for query in (messages[3].split()[0], " ".join(messages[10].split()[:4])):
                data = svc.search(parse_search({"user_id": "u", "query": query, "top_k": 100}))["data"]
                assert data and (tokens < 12_000 or not context
                                 or any(item["view"] == "context" for item in data))
                read = sum(count(o200k, item["content"]) + window.ITEM_TOKENS for item in data)
                assert read + count(o200k, query) + window.PROMPT_RESERVE <= tokens
    finally:
        svc.close()
