"""What a rehearsal (rehearsal.py) counted, and the files it leaves in --out.

- `report.json`: the settings (never the API key), the server, wall time, every attempt by route
  and status, each logical write's outcome (`ok`, `ok_after_retry`, `failed`) with example
  reasons, retries and seconds waited on Retry-After, latency per attempt, and the evidence
  figures per data set (R@10, MRR, in window, date visible, speaker visible: runner.score and
  runner.summarise, so they are the project's runner's figures for the same answers).
- `answers.jsonl`: one line per scored Search, its items' count and the SHA-256 of their contents
  joined by newlines, so two rehearsals can be compared (`compare`): the same messages must give
  the same answers whatever order the Adds arrived in.
- `prompts/<qid>.txt`: the leaderboard reader's prompt for a few questions, exactly as its
  LoCoMo/LongMemEval template renders it (`prompt`), {name} being the conversation's user_id.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aml_retriever.analysis.tokens import estimate_tokens
from aml_retriever.evaluation import metrics, runner

INTERFACE = "memory-api-v1.1"
ROUTES = ("add", "search")
OK, OK_AFTER_RETRY, FAILED = "ok", "ok_after_retry", "failed"
# Example reasons kept per route and kind (failed, retried): enough to see the pattern.
EXAMPLES = 5
# The figures of each data set the report and the summary show.
EVIDENCE_KEYS = ("R@10", "MRR", metrics.IN_WINDOW, metrics.DATE_VISIBLE, metrics.SPEAKER_VISIBLE)
NAME_NOTE = ("{name} in the reader's template is the conversation's user_id: the platform's own "
             "name for the user is not known here")
ANSWERS, REPORT, PROMPTS = "answers.jsonl", "report.json", "prompts"


@dataclass
class Tally:
    """Every attempt and every logical write of a rehearsal, counted from any thread."""

    statuses: dict[str, Counter[str]] = field(default_factory=lambda: {r: Counter() for r in ROUTES})
    latencies: dict[str, list[float]] = field(default_factory=lambda: {r: [] for r in ROUTES})
    outcomes: dict[str, Counter[str]] = field(default_factory=lambda: {r: Counter() for r in ROUTES})
    failed_examples: dict[str, list[str]] = field(default_factory=lambda: {r: [] for r in ROUTES})
    retried_examples: dict[str, list[str]] = field(default_factory=lambda: {r: [] for r in ROUTES})
    retries: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ROUTES, 0))
    waited_s: dict[str, float] = field(default_factory=lambda: dict.fromkeys(ROUTES, 0.0))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attempt(self, route: str, kind: str, ms: float) -> None:
        """One request sent: `kind` its status ("200") or why none came ("timeout")."""
        with self._lock:
            self.statuses[route][kind] += 1
            self.latencies[route].append(ms)

    def retry(self, route: str, seconds: float) -> None:
        with self._lock:
            self.retries[route] += 1
            self.waited_s[route] += seconds

    def done(self, route: str, label: str, outcome: str, reason: str, retried: str) -> None:
        """A logical write finished; `retried`: the statuses sent again first ("HTTP 429 x2")."""
        with self._lock:
            self.outcomes[route][outcome] += 1
            if outcome == FAILED:
                kept, said = self.failed_examples[route], reason + (f" (after {retried})" if retried else "")
            else:
                kept, said = self.retried_examples[route], retried and f"{retried}, then 200"
            if said and len(kept) < EXAMPLES:
                kept.append(f"{label}: {said}")

    @property
    def failed(self) -> int:
        return sum(c[FAILED] for c in self.outcomes.values())


@dataclass(frozen=True)
class Scored:
    """A scored Search: its items' count and digest (None when it failed, with the reason) and
    its runner.score record (a failed Search scored as an empty answer, which is what the
    platform's reader would get)."""

    user_id: str
    qid: str
    items: int | None
    sha256: str | None
    record: dict[str, Any]
    failed: str = ""


@dataclass(frozen=True)
class Prompt:
    """A question picked for prompts/: its answer's contents, or None when its Search failed."""

    user_id: str
    qid: str
    question: str
    contents: tuple[str, ...] | None


def prompt(name: str, contents: Sequence[str], question: str) -> str:
    """The reader's prompt as the platform's LoCoMo/LongMemEval template renders it."""
    return f"Memories for user {name}:\n" + "\n".join(contents) + f"\n\nQuestion: {question}"


def pick(datasets: Sequence[str], question_counts: Sequence[int], n: int) -> list[tuple[int, int]]:
    """(conversation, question) indexes of the `n` questions to render: the first question of the
    first conversation of each data set in turn, then of their second conversations, and so on,
    then the second questions; the same for every run of the same data."""
    if n <= 0:
        return []
    by_set: dict[str, list[int]] = {}
    for ci, name in enumerate(datasets):
        by_set.setdefault(name, []).append(ci)
    picked: list[tuple[int, int]] = []
    for qi in range(max(question_counts, default=0)):
        for rank in range(max((len(c) for c in by_set.values()), default=0)):
            for members in by_set.values():
                if rank < len(members) and qi < question_counts[members[rank]]:
                    picked.append((members[rank], qi))
                    if len(picked) == n:
                        return picked
    return picked


# ---- report.json -----------------------------------------------------------------------------

def report(settings: dict[str, Any], url: str, seconds: float, tally: Tally, scored: Sequence[Scored],
           prompts: list[dict[str, Any]], sent: dict[str, Any], aborted: str = "",
           unsent: int = 0) -> dict[str, Any]:
    """The whole report. `sent`: what the data and the client's rules were (rehearsal.py says);
    `unsent`: logical writes an aborted run never sent, each one the platform would have failed."""
    out: dict[str, Any] = {"interface": INTERFACE, "url": url, "settings": settings,
                           "seconds": round(seconds, 3), **sent}
    if aborted:
        out["aborted"] = aborted
    out.update({
        "failed": tally.failed + unsent, "unsent": unsent,
        "requests": {r: dict(sorted(tally.statuses[r].items())) for r in ROUTES},
        "outcomes": {r: {OK: tally.outcomes[r][OK], OK_AFTER_RETRY: tally.outcomes[r][OK_AFTER_RETRY],
                         FAILED: tally.outcomes[r][FAILED], "failed_examples": tally.failed_examples[r],
                         "retried_examples": tally.retried_examples[r]} for r in ROUTES},
        "retries": dict(tally.retries),
        "retry_after_waited_s": {r: round(s, 3) for r, s in tally.waited_s.items()},
        "latency_ms": {r: latency(tally.latencies[r]) for r in ROUTES},
        "questions_scored": len(scored),
        "evidence": evidence([s.record for s in scored]),
        "prompts": {"template": "Memories for user {name}:\n{contents, one item a line}\n\n"
                                "Question: {question}", "name": NAME_NOTE, "files": prompts},
    })
    return out


def latency(values: Sequence[float]) -> dict[str, float | int]:
    """p50, p99 and max of the attempts' milliseconds (nearest rank, as metrics.percentiles)."""
    if not values:
        return {"attempts": 0}
    shown = {k: round(v, 2) for k, v in metrics.percentiles(values, (50, 99)).items()}
    return {"attempts": len(values), **shown, "max": round(max(values), 2)}


def evidence(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per data set (and `all` when there are several), the means over its answerable questions
    with evidence, as runner.summarise groups them (adversarial questions apart)."""
    groups = runner.summarise(records)["groups"] if records else {}
    out = {}
    for key, row in groups.items():
        if key == "all" or (key.startswith("suite:") and "/" not in key):
            figures = {k: _round(row.get(k)) for k in EVIDENCE_KEYS}
            counts = {metrics.applicable_count(k): row[metrics.applicable_count(k)]
                      for k in metrics.READER_KEYS}
            out[key.removeprefix("suite:")] = {"n": row["n"], **figures, **counts}
    if len(out) == 2:  # one data set: its row and `all` say the same
        out.pop("all")
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


# ---- files -----------------------------------------------------------------------------------

def write(out: Path, data: dict[str, Any], scored: Sequence[Scored]) -> Path:
    """report.json and answers.jsonl into `out` (made when missing); the report's path."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / ANSWERS).open("w", encoding="utf-8") as answers:
        for s in scored:
            line = {"user_id": s.user_id, "qid": s.qid, "items": s.items, "sha256": s.sha256}
            answers.write(json.dumps({**line, **({"failed": s.failed} if s.failed else {})},
                                     ensure_ascii=False) + "\n")
    path = out / REPORT
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return path


def write_prompts(out: Path, picked: Sequence[Prompt]) -> list[dict[str, Any]]:
    """prompts/<qid>.txt for each picked question whose Search was answered (the folder's earlier
    prompts removed first, so it holds this run's only); what the report says of each."""
    folder = out / PROMPTS
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.txt"):
        old.unlink()
    shown: list[dict[str, Any]] = []
    used: set[str] = set()
    for p in picked:
        if p.contents is None:
            shown.append({"qid": p.qid, "user_id": p.user_id, "file": None,
                          "reason": "its Search failed"})
            continue
        name = _file_name(p.qid, used)
        text = prompt(p.user_id, p.contents, p.question)
        (folder / name).write_text(text, encoding="utf-8")
        shown.append({"qid": p.qid, "user_id": p.user_id, "file": f"{PROMPTS}/{name}",
                      "characters": len(text), "estimated_tokens": estimate_tokens(text)})
    return shown


def _file_name(qid: str, used: set[str]) -> str:
    """`<qid>.txt`, any character a file name should not hold as `_`, unique in the folder."""
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", qid).lstrip(".") or "question"
    name, n = f"{stem}.txt", 1
    while name in used:
        n += 1
        name = f"{stem}-{n}.txt"
    used.add(name)
    return name


# ---- compare ---------------------------------------------------------------------------------

def read_answers(folder: Path) -> dict[tuple[str, str], str | None]:
    """(user_id, qid) -> digest (None for a failed Search) of a rehearsal's answers.jsonl;
    ValueError naming the file when it is missing or not one."""
    path = folder / ANSWERS
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    answers: dict[tuple[str, str], str | None] = {}
    for number, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
            answers[(str(row["user_id"]), str(row["qid"]))] = row.get("sha256")
        except (ValueError, KeyError, TypeError, AttributeError):
            raise ValueError(f"{path}: line {number} is not an answer line of a rehearsal") from None
    return answers


def compare(a: Path, b: Path) -> tuple[list[str], int]:
    """The questions answered differently by two rehearsals (a question failed or missing in
    either counts as different), and how many questions there were."""
    first, second = read_answers(a), read_answers(b)
    keys = sorted(first.keys() | second.keys())
    differ = [f"{user} {qid}" for user, qid in keys
              if first.get((user, qid)) is None or first.get((user, qid)) != second.get((user, qid))]
    return differ, len(keys)


# ---- the summary on stdout -------------------------------------------------------------------

def summary(data: dict[str, Any], path: Path) -> str:
    """A few lines: what failed, the requests by status, latency, the evidence figures."""
    outcomes, requests = data["outcomes"], data["requests"]
    lines = [f"rehearsal of {data['url']} ({INTERFACE}, "
             f"{'streaming' if data['settings']['streaming'] else 'non-streaming'}): "
             f"{sum(outcomes['add'][k] for k in (OK, OK_AFTER_RETRY, FAILED))} Adds, "
             f"{sum(outcomes['search'][k] for k in (OK, OK_AFTER_RETRY, FAILED))} Searches "
             f"in {data['seconds']:.1f} s",
             f"failed: {data['failed']}" + (" (the platform would fail nothing)" if not data["failed"]
                                            else " (the platform would fail this run)")]
    for route in ROUTES:
        statuses = ", ".join(f"{k} x{v}" for k, v in requests[route].items()) or "none"
        timing = data["latency_ms"][route]
        took = (f"; p50 {timing['p50']:.1f} ms, p99 {timing['p99']:.1f} ms, max {timing['max']:.1f} ms"
                if timing["attempts"] else "")
        lines.append(f"{route}: {statuses}; {outcomes[route][OK_AFTER_RETRY]} ok after retry, "
                     f"{outcomes[route][FAILED]} failed{took}")
        lines += [f"  {example}" for example in outcomes[route]["failed_examples"][:3]]
    waited = sum(data["retry_after_waited_s"].values())
    lines.append(f"retries: {sum(data['retries'].values())} ({waited:.1f} s waited on Retry-After)")
    for name, row in data["evidence"].items():
        figures = ", ".join(f"{k} {_figure(row[k])}" for k in EVIDENCE_KEYS[:3])
        for key in metrics.READER_KEYS:
            if row[metrics.applicable_count(key)]:
                figures += f", {key} {_figure(row[key])} (n {row[metrics.applicable_count(key)]})"
        lines.append(f"evidence {name} (n {row['n']}): {figures}")
    lines.append(f"report: {path} (answers.jsonl, {sum(1 for p in data['prompts']['files'] if p['file'])} "
                 f"prompts in prompts/)")
    return "\n".join(lines)


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
