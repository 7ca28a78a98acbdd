"""Retrieval metrics over ranked results: pure functions, no I/O, no service.

A question's gold evidence is a list of messages. An evidence message is *retrieved* by a result
when the result's `source_message_ids` include the evidence's id (when the caller knows it), or
when the result's content contains the evidence's exact text (whitespace runs compared as one
space). Containment is what lets a server without provenance be scored, and it credits a window
result (several messages joined by "\\n") with every message it carries. An evidence message's
*rank* is the rank of the first result that retrieves it.

Per question, with E evidence messages and r(e) the rank of e (None when never retrieved):

  R@k        |{e : r(e) <= k}| / |E|                       (evidence recall at k)
  all@k      1 if every e has r(e) <= k, else 0            (all-evidence hit at k)
  MRR        1 / min r(e), 0 when nothing is retrieved
  nDCG@10    sum over results i <= 10 of g(i) / log2(i + 1), divided by the same sum for the ideal
             list (one evidence message per result, best first) and capped at 1; g(i) is the
             number of evidence messages first retrieved by result i, so a window carrying two
             evidence messages at rank 1 earns both (hence the cap)
  b@Ww       evidence recall when the results are read in order and reading stops after W words
             (whitespace-separated words, each character of Chinese, Japanese, Thai and the like
             a word of its own, as `max_words` counts them): e counts when the words read up to
             the end of its text in its first result are at most W; matched by id only, the
             whole result counts

What a reader that reads only the results' text sees beside the evidence (reader.py): `date
visible` and `speaker visible`, 1/0 per question where they apply and None where they do not;
a group's value is their mean over the questions they apply to, beside that count (`n date
visible`, `n speaker visible`).

Volume, per question: `results`, `words` (in all results) and `words@5` (in the first five: what
a reader of the top of the list pays).

Adversarial questions (the answer is not in memory) have no evidence; for them the measure is how
low the retriever's confidence is: `confidence_auroc` is the probability that an answerable
question's top score beats an adversarial question's top score of the same user (ties count one
half; an empty result list is the lowest possible confidence).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from aml_retriever.analysis.tokenizer import reading_words

KS = (1, 5, 10, 20, 50, 100)
# Word budgets of b@Ww: the headline 500-2,000 of the tables, and a grid from 100 to 5,000 for
# the curve of evidence found against words read (docs/charts/evidence_by_words.svg).
BUDGETS = (100, 200, 300, 500, 1000, 2000, 3000, 5000)
NDCG_DEPTH = 10

RECALL_KEYS = tuple(f"R@{k}" for k in KS)
ALL_HIT_KEYS = tuple(f"all@{k}" for k in KS)
BUDGET_KEYS = tuple(f"b@{w}w" for w in BUDGETS)
# Evidence inside the leaderboard's answer window: its reader answers from the first 117,760
# tokens of the results, at 1.35 tokens a word 87,229 words (as ../shared/eval/metrics.py counts it).
IN_WINDOW_WORDS = 87_229
IN_WINDOW = "in window"
METRIC_KEYS = (*RECALL_KEYS, *ALL_HIT_KEYS, "MRR", f"nDCG@{NDCG_DEPTH}", *BUDGET_KEYS, IN_WINDOW)
# Apart from METRIC_KEYS: they apply to some questions only, so they are averaged over those.
DATE_VISIBLE = "date visible"
SPEAKER_VISIBLE = "speaker visible"
READER_KEYS = (DATE_VISIBLE, SPEAKER_VISIBLE)
# Descriptive, not quality: how much the retriever returned.
VOLUME_KEYS = ("results", "words", "words@5")


@dataclass(frozen=True)
class Result:
    """One returned result, reduced to what scoring reads."""

    content: str
    source_ids: tuple[str, ...] = ()
    score: float | None = None


@dataclass(frozen=True)
class Hit:
    """Where an evidence message was first retrieved: its 1-based rank and the words read up to
    the end of its text in that result (all words before the result included)."""

    rank: int
    words_read: int


def normalise(text: str) -> str:
    """Whitespace runs as one space, trimmed: a window joined by newlines still contains its
    messages, and a server that re-spaces text is not penalised."""
    return " ".join(text.split())


def word_count(text: str) -> int:
    return reading_words(text)


def results_from_items(items: Iterable[Mapping[str, object]]) -> list[Result]:
    """Contract result objects (`content`, `score`, optional `source_message_ids`) as Results."""
    out = []
    for item in items:
        content = item.get("content")
        ids = item.get("source_message_ids")
        score = item.get("score")
        out.append(Result(content if isinstance(content, str) else "",
                          tuple(str(i) for i in ids) if isinstance(ids, list) else (),
                          float(score) if isinstance(score, int | float) else None))
    return out


def first_hits(evidence: Sequence[str], results: Sequence[Result],
               evidence_ids: Sequence[str | None] | None = None) -> list[Hit | None]:
    """For each evidence text (and its id, when known), where the ranked results first hold it."""
    ids = list(evidence_ids) if evidence_ids is not None else [None] * len(evidence)
    if len(ids) != len(evidence):
        raise ValueError("evidence_ids must be as long as evidence")
    texts = [normalise(r.content) for r in results]
    hits: list[Hit | None] = [None] * len(evidence)
    words_before = 0
    for rank, (result, text) in enumerate(zip(results, texts, strict=True), start=1):
        for i, (gold, gold_id) in enumerate(zip(evidence, ids, strict=True)):
            if hits[i] is not None:
                continue
            needle = normalise(gold)
            at = text.find(needle) if needle else -1
            if at >= 0:
                hits[i] = Hit(rank, words_before + word_count(text[:at + len(needle)]))
            elif gold_id is not None and gold_id in result.source_ids:
                hits[i] = Hit(rank, words_before + word_count(text))
        words_before += word_count(text)
    return hits


def _dcg(gains: Mapping[int, int]) -> float:
    return sum(g / math.log2(rank + 1) for rank, g in gains.items())


def question_metrics(hits: Sequence[Hit | None]) -> dict[str, float]:
    """Every per-question metric from the first hits of its evidence (at least one)."""
    if not hits:
        raise ValueError("a question needs at least one evidence message to be scored")
    n = len(hits)
    ranks = [h.rank for h in hits if h is not None]
    out: dict[str, float] = {}
    for k in KS:
        found = sum(1 for r in ranks if r <= k)
        out[f"R@{k}"] = found / n
        out[f"all@{k}"] = float(found == n)
    out["MRR"] = 1.0 / min(ranks) if ranks else 0.0
    gains: dict[int, int] = {}
    for r in ranks:
        if r <= NDCG_DEPTH:
            gains[r] = gains.get(r, 0) + 1
    ideal = _dcg({i: 1 for i in range(1, min(n, NDCG_DEPTH) + 1)})
    out[f"nDCG@{NDCG_DEPTH}"] = min(1.0, _dcg(gains) / ideal)
    for w in BUDGETS:
        out[f"b@{w}w"] = sum(1 for h in hits if h is not None and h.words_read <= w) / n
    out[IN_WINDOW] = sum(1 for h in hits if h is not None and h.words_read <= IN_WINDOW_WORDS) / n
    return out


def volume(results: Sequence[Result]) -> dict[str, float]:
    return {"results": float(len(results)),
            "words": float(sum(word_count(r.content) for r in results)),
            "words@5": float(sum(word_count(r.content) for r in results[:5]))}


def mean_metrics(rows: Sequence[Mapping[str, float]],
                 keys: Sequence[str] = METRIC_KEYS + VOLUME_KEYS) -> dict[str, float]:
    """Per-key mean over rows (each a question's metrics); {} for no rows."""
    if not rows:
        return {}
    return {k: statistics.fmean(r[k] for r in rows) for k in keys if all(k in r for r in rows)}


def applicable_count(key: str) -> str:
    """The name of the count beside a mean over the questions a measure applies to."""
    return f"n {key}"


def applicable_means(rows: Sequence[Mapping[str, float | None]],
                     keys: Sequence[str] = READER_KEYS) -> dict[str, float | None]:
    """Per key, the mean over the rows where it applies (not None; None when it applies to none)
    and how many those are."""
    out: dict[str, float | None] = {}
    for key in keys:
        seen = [value for r in rows if (value := r.get(key)) is not None]
        out[key] = statistics.fmean(seen) if seen else None
        out[applicable_count(key)] = len(seen)
    return out


def confidence_auroc(pairs: Iterable[tuple[float | None, float | None]]) -> float | None:
    """P(answerable top score > adversarial top score) over (answerable, adversarial) pairs;
    None stands for an empty result list, the lowest confidence. None when there are no pairs."""
    total, wins = 0, 0.0
    for answerable, adversarial in pairs:
        a = -math.inf if answerable is None else answerable
        d = -math.inf if adversarial is None else adversarial
        total += 1
        wins += 1.0 if a > d else 0.5 if a == d else 0.0
    return wins / total if total else None


def percentiles(values: Sequence[float], ps: Sequence[int] = (50, 90, 95, 99)) -> dict[str, float]:
    """Nearest-rank percentiles ({} for no values): p50 of [1, 2, 3, 4] is 2."""
    if not values:
        return {}
    ordered = sorted(values)
    n = len(ordered)
    return {f"p{p}": ordered[min(n, max(1, math.ceil(p / 100 * n))) - 1] for p in ps}


@dataclass(frozen=True)
class Spread:
    """A metric over seeds: mean and range."""

    mean: float
    low: float
    high: float

    def as_dict(self) -> dict[str, float]:
        return {"mean": self.mean, "min": self.low, "max": self.high}


def spread(values: Sequence[float]) -> Spread:
    if not values:
        raise ValueError("spread of no values")
    return Spread(statistics.fmean(values), min(values), max(values))
