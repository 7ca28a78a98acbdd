"""The plain reference every evaluation table puts beside the engine: BM25 over each user's own
messages, one message per result, nothing else.

Terms: words of space-delimited scripts (lower-cased, English stop words dropped) and, for scripts
written without spaces (Chinese, Japanese, Thai...) and Korean, character unigrams plus bigrams:
the tokenisation of the public character-bigram baselines. Scoring: Okapi BM25 with the Lucene
IDF `log(1 + (N - df + 0.5) / (df + 0.5))`, k1 1.5, b 0.75 (the defaults of the bm25s library the
published reference numbers were measured with). Pure Python and evaluation-only: it keeps every
message in memory and scores every message per question.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aml_retriever.analysis.stopwords import STOP_WORDS
from aml_retriever.analysis.tokenizer import index_text

K1 = 1.5
B = 0.75


def reference_terms(text: str) -> list[str]:
    """A text's terms: its words (stop words out) and its n-grams, as the references count them."""
    indexed = index_text(text)
    return [w for w in indexed.words.split() if w not in STOP_WORDS] + indexed.grams.split()


@dataclass
class _Memory:
    contents: list[str] = field(default_factory=list)
    counts: list[Counter[str]] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    df: Counter[str] = field(default_factory=Counter)


class BigramBM25:
    """An evaluation backend (see backends.Backend) answering from memory, per user."""

    name = "bigram-bm25"

    def __init__(self) -> None:
        self._users: dict[str, _Memory] = {}
        self._requests: set[tuple[str, str]] = set()

    def add(self, body: dict[str, Any]) -> None:
        key = (body["user_id"], body["request_id"])
        if key in self._requests:
            return
        self._requests.add(key)
        memory = self._users.setdefault(body["user_id"], _Memory())
        for message in body["messages"]:
            terms = Counter(reference_terms(message["content"]))
            memory.contents.append(message["content"])
            memory.counts.append(terms)
            memory.lengths.append(sum(terms.values()))
            memory.df.update(terms.keys())

    def search(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        memory = self._users.get(body["user_id"])
        if memory is None:
            return []
        wanted = [t for t in dict.fromkeys(reference_terms(body["query"])) if t in memory.df]
        n = len(memory.contents)
        average = sum(memory.lengths) / n or 1.0
        idf = {t: math.log(1 + (n - memory.df[t] + 0.5) / (memory.df[t] + 0.5)) for t in wanted}
        scored = []
        for i, counts in enumerate(memory.counts):
            norm = K1 * (1 - B + B * memory.lengths[i] / average)
            score = sum(idf[t] * counts[t] * (K1 + 1) / (counts[t] + norm) for t in wanted if t in counts)
            if score > 0:
                scored.append((-score, i))
        top = sorted(scored)[:body.get("top_k", 10)]
        return [{"id": f"m{i + 1}", "content": memory.contents[i], "score": -s} for s, i in top]

    def close(self) -> None:
        self._users.clear()
