"""Run conversations through a backend and score what comes back.

`add_all` posts every Add (each user's Adds in order; users in parallel over HTTP), `search_all`
asks every question, `score` turns the ranked results into per-question records (metrics.py) and
`summarise` averages them per group: `all` (every answerable, non-adversarial question), each
suite, each suite/category, each difficulty, plus the adversarial confidence measure. What a
reader sees beside the evidence (reader.py) is read from the same results' contents, so the
in-process service and a server over HTTP are measured alike.
"""

from __future__ import annotations

import concurrent.futures as cf
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from aml_retriever.evaluation import metrics, reader
from aml_retriever.evaluation.backends import Backend
from aml_retriever.evaluation.dataset import Conversation, Question

# Results asked per question unless told otherwise: the contract's maximum, so every R@k up to
# 100 can be read from one Search.
DEFAULT_TOP_K = 100
# Seconds between progress lines on stderr.
PROGRESS_EVERY = 2.0


class Progress:
    """Counts work done (from any thread) and prints a line now and then, and at the end."""

    def __init__(self, label: str, total: int, stream: TextIO | None = sys.stderr) -> None:
        self.label, self.total, self.stream = label, total, stream
        self.done = 0
        self.started = self._last = time.perf_counter()
        self._lock = threading.Lock()

    def step(self, n: int = 1) -> None:
        with self._lock:
            self.done += n
            now = time.perf_counter()
            if self.stream is None or (now - self._last < PROGRESS_EVERY and self.done != self.total):
                return
            self._last = now
            share = 100 * self.done / self.total if self.total else 100
            print(f"{self.label}: {self.done}/{self.total} ({share:.0f}%) {now - self.started:.1f}s",
                  file=self.stream, flush=True)


@dataclass(frozen=True)
class AddStats:
    adds: int
    messages: int
    seconds: float
    latencies_ms: tuple[float, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"adds": self.adds, "messages": self.messages, "seconds": round(self.seconds, 3),
                "adds_per_s": round(self.adds / self.seconds, 1) if self.seconds else None,
                "messages_per_s": round(self.messages / self.seconds, 1) if self.seconds else None,
                "latency_ms": _rounded(metrics.percentiles(self.latencies_ms))}


@dataclass(frozen=True)
class Outcome:
    """One question's ranked results and how long the Search took."""

    user_id: str
    question: Question
    results: tuple[metrics.Result, ...]
    latency_ms: float


def _rounded(values: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in values.items()}


def add_all(backend: Backend, conversations: Sequence[Conversation], concurrency: int = 1,
            progress: TextIO | None = sys.stderr, label: str = "add") -> AddStats:
    """Every Add of every conversation; one user's Adds always in order (a session is ordered by
    arrival among equal timestamps), different users in parallel when concurrency > 1."""
    meter = Progress(label, sum(len(c.adds) for c in conversations), progress)

    def one_user(conversation: Conversation) -> list[float]:
        latencies = []
        for body in conversation.adds:
            started = time.perf_counter()
            backend.add(body)
            latencies.append((time.perf_counter() - started) * 1000)
            meter.step()
        return latencies

    started = time.perf_counter()
    latencies: list[float] = []
    for user_latencies in _map(one_user, conversations, concurrency):
        latencies.extend(user_latencies)
    return AddStats(sum(len(c.adds) for c in conversations),
                    sum(c.message_count for c in conversations), time.perf_counter() - started,
                    tuple(latencies))


def search_all(backend: Backend, conversations: Sequence[Conversation], top_k: int = DEFAULT_TOP_K,
               concurrency: int = 1, progress: TextIO | None = sys.stderr,
               label: str = "search") -> list[Outcome]:
    """Every question as a Search of its user, results kept in rank order."""
    jobs = [(c.user_id, q) for c in conversations for q in c.questions]
    meter = Progress(label, len(jobs), progress)

    def one(job: tuple[str, Question]) -> Outcome:
        user_id, question = job
        started = time.perf_counter()
        items = backend.search({"query": question.question, "user_id": user_id, "top_k": top_k})
        latency = (time.perf_counter() - started) * 1000
        meter.step()
        return Outcome(user_id, question, tuple(metrics.results_from_items(items)), latency)

    return list(_map(one, jobs, concurrency))


def _map(fn: Callable[[Any], Any], items: Sequence[Any], concurrency: int) -> Iterable[Any]:
    if concurrency <= 1:
        return map(fn, items)
    with cf.ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(fn, items))


# ---- scoring ---------------------------------------------------------------------------------

def score(outcomes: Iterable[Outcome]) -> list[dict[str, Any]]:
    """One JSON-ready record per question: identity, first ranks of its evidence, every metric
    (answerable questions only), the top score and volume."""
    records = []
    for o in outcomes:
        q = o.question
        record: dict[str, Any] = {
            "qid": q.qid, "user_id": o.user_id, "suite": q.suite, "category": q.category,
            "difficulty": q.difficulty, "adversarial": q.adversarial, "evidence": len(q.evidence),
            "top_score": o.results[0].score if o.results else None,
            "latency_ms": round(o.latency_ms, 3), **metrics.volume(o.results)}
        if q.evidence:
            hits = metrics.first_hits([e.content for e in q.evidence], o.results)
            record["ranks"] = [h.rank if h else None for h in hits]
            record.update(metrics.question_metrics(hits))
            record.update(reader_view(q, o.results))
        records.append(record)
    return records


def reader_view(q: Question, results: Sequence[metrics.Result]) -> dict[str, float | None]:
    """Whether the results' text shows the date and the speaker beside the question's evidence
    (None where the question does not ask for them)."""
    contents = [r.content for r in results]
    return {metrics.DATE_VISIBLE: reader.date_visible(q.temporal, q.answer,
                                                      [e.content for e in q.evidence], contents),
            metrics.SPEAKER_VISIBLE: reader.speaker_visible(
                q.question, [(e.content, e.speaker) for e in q.evidence], contents)}


def _group_keys(record: dict[str, Any]) -> list[str]:
    keys = [f"suite:{record['suite']}/category:{record['category']}"]
    if not record["adversarial"]:
        keys += ["all", f"suite:{record['suite']}"]
        if record["difficulty"]:
            keys.append(f"difficulty:{record['difficulty']}")
    return keys


def summarise(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Mean metrics per group (answerable questions), and the adversarial measures."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        if record["evidence"]:
            for key in _group_keys(record):
                grouped.setdefault(key, []).append(record)
    groups = {key: {"n": len(rows), **metrics.mean_metrics(rows), **metrics.applicable_means(rows)}
              for key, rows in sorted(grouped.items(), key=lambda kv: _group_order(kv[0]))}
    return {"groups": groups, "adversarial": adversarial_summary(records),
            "skipped_no_evidence": sum(1 for r in records if not r["evidence"] and not r["adversarial"]),
            "latency_ms": _rounded(metrics.percentiles([r["latency_ms"] for r in records]))}


def _group_order(key: str) -> tuple[int, str]:
    rank = 0 if key == "all" else 1 if key.startswith("suite:") and "/" not in key \
        else 2 if key.startswith("difficulty:") else 3
    return rank, key


def adversarial_summary(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """How unsure the retriever is when the answer is not in memory: the AUROC of the top score
    separating each user's answerable questions from that user's adversarial ones, and how often
    an adversarial question got no result at all."""
    adversarial = [r for r in records if r["adversarial"] and not r["evidence"]]
    if not adversarial:
        return {"n": 0}
    answerable: dict[str, list[float | None]] = {}
    for r in records:
        if not r["adversarial"] and r["evidence"]:
            answerable.setdefault(r["user_id"], []).append(r["top_score"])
    pairs = [(a, d["top_score"]) for d in adversarial for a in answerable.get(d["user_id"], [])]
    return {"n": len(adversarial), "confidence_auroc": metrics.confidence_auroc(pairs),
            "empty_rate": sum(1 for r in adversarial if not r["results"]) / len(adversarial),
            "mean_results": sum(r["results"] for r in adversarial) / len(adversarial)}


def combine_seeds(summaries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Summaries of several seeds as one: every metric's mean and range over the seeds that have
    the group, and the question count summed."""
    groups: dict[str, dict[str, Any]] = {}
    names = sorted({g for s in summaries for g in s["groups"]}, key=_group_order)
    for name in names:
        present = [s["groups"][name] for s in summaries if name in s["groups"]]
        row: dict[str, Any] = {"n": sum(p["n"] for p in present), "seeds": len(present)}
        for key in (*metrics.METRIC_KEYS, *metrics.VOLUME_KEYS):
            values = [p[key] for p in present if key in p]
            if values:
                row[key] = metrics.spread(values).as_dict()
        for key in metrics.READER_KEYS:
            count = metrics.applicable_count(key)
            values = [p[key] for p in present if p[key] is not None]
            row[key] = metrics.spread(values).as_dict() if values else None
            row[count] = sum(p[count] for p in present)
        groups[name] = row
    adversarial: dict[str, Any] = {"n": sum(s["adversarial"]["n"] for s in summaries)}
    for key in ("confidence_auroc", "empty_rate", "mean_results"):
        values = [s["adversarial"][key] for s in summaries if s["adversarial"].get(key) is not None]
        if values:
            adversarial[key] = metrics.spread(values).as_dict()
    return {"groups": groups, "adversarial": adversarial}
