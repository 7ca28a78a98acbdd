"""Every ranking signal and retrieval setting, in one table.

A signal's weight of 0 switches it off; the ablation runner, the config toggles and the error text
for an unknown name are all built from `SIGNALS`, so they cannot drift apart. Settings that change
what the index holds (`INDEX_SETTINGS`) are part of the stored index identity.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Signal:
    name: str
    weight: float
    help: str


SIGNALS: tuple[Signal, ...] = (
    Signal("lexical", 1.0, "BM25 of each message over the user's own index (stemmed words, n-grams)"),
    Signal("window", 1.0, "BM25 of sliding windows of consecutive messages of one session"),
    # A quarter: with windows in, most of the context a segment adds is already there (LoCoMo
    # dev, 1.0 -> 0.5: b@500w .780 -> .790), and a segment of a long day's chatter lifts its
    # every turn. 0.5 -> 0.25 (with the weighted BM25): LoCoMo MRR .648 -> .649, b@1000w .853 ->
    # .856; BEAM MRR .493 -> .501, b@1000w .470 -> .484; MemDaily x10 MRR .879 -> .887;
    # synthetic mixed MRR .710 -> .721. Off entirely: LoCoMo MRR .642.
    Signal("segment", 0.25, "BM25 of the session segment a message belongs to, mixed into its score"),
    Signal("coverage", 0.5, "share of the query's exact (unstemmed) words a result contains"),
    Signal("entity", 0.5, "named entities (capitalised names, quoted titles) shared with the query"),
    Signal("number", 0.3, "numbers and units shared with the query"),
    Signal("date", 0.5, "dates: when-questions favour dated messages; named months/years match"),
    Signal("speaker", 0.5, "turns of a speaker the question names"),
    # Off by default: once windows are in, the next turn already rides in its window, and on its
    # own it pushed single turns of little evidence up (LoCoMo dev: MRR .621 without it .641).
    Signal("adjacency", 0.0, "the turn right after a strong hit (answers follow questions)"),
    Signal("recency", 0.0, "newer messages first (off by default; on for current-state questions)"),
    Signal("supersession", 0.5, "current-state questions: a newer update outranks what it replaced"),
    # An order, not a list weight: any weight above 0 turns it on. On for agents' memories
    # (scopes.py; agent-memory suite, restated, present questions: newest first .158 -> .758).
    # Off for the HTTP contract: conversations repeat a topic's words in turns that are not
    # versions of one fact (LoCoMo dev MRR .649 -> .552 with it; synthetic update suite, present
    # R@1 .12 -> .28): see docs/EVAL.md.
    Signal("versions", 0.0, "one fact's restated versions in the order the question needs: "
           "newest first, or the past one it names (versions.py)"),
    Signal("options", 0.3, "answer choices of a multiple-choice question, below the question's own"),
    # A question in the first person asks what the user said (BEAM dev: 78% of the evidence is
    # the user's own messages, which long assistant replies about the same words outrank). BEAM
    # dev, 0 -> 0.5: b@1000w .341 -> .471, first result 474 -> 110 words, MRR .503 -> .494; at
    # 1.0 b@1000w .520 but R@100 .794. LoCoMo and MemDaily questions leave it silent.
    # Reaches evidence that shares no word with the question, and only that (the question's own
    # hits are left out of its list), so it adds results below the others without reordering
    # them: MemDaily dev R@100 .988 -> 1.000, x10 .993 -> .998, LoCoMo R@100 .923 -> .924, MRR
    # .649 -> .648; BEAM unchanged. Ranking the seeds first in it, or letting it hold lexical
    # hits as well, raised MemDaily x10 b@1000w to .935 but cost LoCoMo MRR .649 -> .606.
    Signal("hop", 0.3, "a second round: messages found only by the distinctive terms of the best "
           "hits, for evidence sharing no word with the question"),
    Signal("first_person", 0.5, "first-person questions: the user's own messages, in lexical order"),
    # A share, not a list weight: an English word of the question that the user's messages
    # lack also searches for its nearest words in meaning (analysis/related.py) that they hold,
    # at most related.MOST_NEIGHBOURS of them, each at this share of the word's own weight in the
    # lexical list, so a question's own words always count for more than their neighbours.
    # 0 -> 0.2: synthetic paraphrase MRR .689 -> .804 (0.4: .822), mixed .728 -> .756 (0.4:
    # .762); BEAM, MemDaily unchanged; LoCoMo leaderboard-format dev MRR .661 -> .663, b@1000w
    # .851 -> .849, its multi-hop b@1000w .581 -> .575 (0.4: .571): 0.2 (docs/EVAL.md).
    Signal("related", 0.2, "words nearest in meaning to the question's English words, searched "
           "at this share of their word's weight (analysis/related.py)"),
    # An exponent, not a list weight: lexical scores of texts longer than hits.LONG_TOKENS
    # index terms are scaled by (LONG_TOKENS / length) ** weight.
    Signal("brevity", 1.0, "lexical scores of long texts discounted by their length (an exponent)"),
)
SIGNAL_NAMES = tuple(s.name for s in SIGNALS)
DEFAULT_WEIGHTS = {s.name: s.weight for s in SIGNALS}
# Settings that change the rows the index holds; a store remembers them and refuses others.
INDEX_SETTINGS = ("segment_gap_minutes", "segment_max_messages")
# Until schema 4 windows were stored rows and the identity named their sizes too; a store recorded
# so for the same settings holds the same index once its window rows are gone (the upgrade).
FORMER_INDEX_SETTINGS = ("window_sizes", *INDEX_SETTINGS)


@dataclass(frozen=True)
class RetrievalConfig:
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    # Reciprocal-rank fusion constant: 60 is the value of the original RRF paper and of most
    # hybrid retrievers; it keeps the top few ranks of each list from dominating.
    rrf_k: float = 60.0
    # How many candidates each list contributes before fusion (at least top_k). At top_k 10,
    # depth 15 / 20 / 30 / 50 / 100 gave LoCoMo dev MRR .625 / .627 / .629 / .633 / .638 and a
    # 10k-message Search p50 of 2.0 / 2.4 / 3.0 / 4.4 / 8.4 ms; synthetic suites .739 at 20 vs
    # .738 at 30. Twice the default top_k keeps the ranking at a quarter less time.
    candidate_depth: int = 20
    # Message hits read for every candidate wanted (times the depth above): windows and segments
    # are scored from the hits they hold, so they need more hits than the message list keeps.
    # The first stage's depth, and the cost of a Search that grows with it (each hit's links,
    # length and windows are read). LoCoMo dev at top_k 100, 1.5 / 2 / 3 / 4: MRR .629 / .634 /
    # .643 / .649, R@100 .884 / .896 / .916 / .924; BEAM 500K R@100 .709 / .724 / .727 / .747.
    hit_depth: int = 4
    # Sliding window sizes, in messages (3 beat 2 in measurements on long conversations). Read
    # from the conversation order at Search time, so changing them needs no reindex.
    window_sizes: tuple[int, ...] = (3,)
    # A session segment ends at a silence this long or at this many messages.
    segment_gap_minutes: float = 30.0
    segment_max_messages: int = 24

    def __post_init__(self) -> None:
        unknown = sorted(set(self.weights) - set(SIGNAL_NAMES))
        if unknown:
            raise ValueError(f"unknown signal {unknown[0]!r}; known: {', '.join(SIGNAL_NAMES)}")
        missing = {n: 0.0 for n in SIGNAL_NAMES if n not in self.weights}
        if missing:
            object.__setattr__(self, "weights", {**self.weights, **missing})

    def weight(self, name: str) -> float:
        return self.weights[name]

    def without(self, name: str) -> RetrievalConfig:
        """The same configuration with one signal switched off (for ablations)."""
        if name not in SIGNAL_NAMES:
            raise ValueError(f"unknown signal {name!r}; known: {', '.join(SIGNAL_NAMES)}")
        return replace(self, weights={**self.weights, name: 0.0})

    def with_values(self, **values: Any) -> RetrievalConfig:
        """A copy with numeric settings or weights (`weight_<signal>=...`) changed (for scans)."""
        weights = dict(self.weights)
        plain = {}
        for key, value in values.items():
            if key.startswith("weight_"):
                weights[key.removeprefix("weight_")] = float(value)
            else:
                plain[key] = value
        return replace(self, weights=weights, **plain)

    @classmethod
    def lexical_only(cls) -> RetrievalConfig:
        return cls(weights={n: (1.0 if n == "lexical" else 0.0) for n in SIGNAL_NAMES})

    def index_identity(self, settings: tuple[str, ...] = INDEX_SETTINGS) -> str:
        """A short hash of the settings that shape the index (see INDEX_SETTINGS)."""
        shape = {name: getattr(self, name) for name in settings}
        return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:8]
