"""The token estimate that fills the answer window is never below the reader's own count: checked
against o200k_base itself (gpt-4o's BPE), through the test-only packages tiktoken and bpe-openai
(which ships the vocabulary, so nothing is downloaded), on English, Chinese, code and random text.
And it is not so far above that the window is wasted."""

from __future__ import annotations

import gzip
import hashlib
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aml_retriever.analysis.tokens import estimate_tokens

ROOT = Path(__file__).resolve().parents[1]
tiktoken = pytest.importorskip("tiktoken", reason="the oracle needs the test-only package tiktoken "
                               "(scripts/run_tests.sh installs it)")
bpe_openai = pytest.importorskip("bpe_openai", reason="the oracle's vocabulary ships in the "
                                 "test-only package bpe-openai (scripts/run_tests.sh installs it)")
# The o200k_base file tiktoken itself would download, by its published hash.
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
O200K_PATTERN = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])


@pytest.fixture(scope="module")
def o200k(tmp_path_factory: pytest.TempPathFactory):
    source = Path(bpe_openai.__file__).parent / "data" / "o200k_base.tiktoken.gz"
    if not source.exists():
        pytest.skip("this bpe-openai ships no o200k_base vocabulary")
    data = gzip.decompress(source.read_bytes())
    if hashlib.sha256(data).hexdigest() != O200K_SHA256:
        pytest.skip("the shipped vocabulary is not o200k_base as tiktoken publishes it")
    path = tmp_path_factory.mktemp("o200k") / "o200k_base.tiktoken"
    path.write_bytes(data)
    from tiktoken.load import load_tiktoken_bpe

    ranks = load_tiktoken_bpe(str(path), expected_hash=O200K_SHA256)
    return tiktoken.Encoding(name="o200k_base", pat_str=O200K_PATTERN, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018})


def count(encoding, text: str) -> int:
    return len(encoding.encode(text, disallowed_special=()))


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
