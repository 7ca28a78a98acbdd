"""gpt-4o's tokenizer (o200k_base) as the tests' oracle of the token estimate: tiktoken with the
vocabulary the test-only package bpe-openai ships (nothing is downloaded), checked against the
hash tiktoken publishes. A test without the packages is skipped, saying why."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path
from typing import Any

import pytest

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


def encoding(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The o200k_base encoding, or the test skipped when it cannot be had."""
    tiktoken = pytest.importorskip("tiktoken", reason="the oracle needs the test-only package "
                                   "tiktoken (scripts/run_tests.sh installs it)")
    bpe_openai = pytest.importorskip("bpe_openai", reason="the oracle's vocabulary ships in the "
                                     "test-only package bpe-openai (scripts/run_tests.sh installs it)")
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


def count(encoding: Any, text: str) -> int:
    """The reader's own count of a text's tokens."""
    return len(encoding.encode(text, disallowed_special=()))
