"""The one shape every evaluation reads: conversations of Adds, and questions with gold evidence.

Three file formats load into it:

- a **dataset** (`{"format": "aml-eval/1", "conversations": [...]}`), what the synthetic
  generator writes: each conversation has `user_id`, `adds` (the /add request bodies, in order)
  and `questions`, each question's evidence given as `{"request_id", "position", "content"}`
  (the Add that carried it, the message's index in that Add, and its exact text);
- a **replay file** (one conversation: `user_id`, `adds`, `dia` mapping a turn id to
  `{"content", "add", ...}`, and `questions` whose `evidence` lists turn ids), what
  `scripts/prepare_public_data.py` writes from LoCoMo and LongMemEval; a LoCoMo turn's `speaker`
  is kept with its evidence and a LoCoMo question of category 2 is flagged temporal, for the
  measures of what a reader sees (reader.py);
- a **conversation with evidence texts** (`user_id`, `adds`, and `questions` whose `evidence`
  lists the exact contents of the evidence messages; optional `conv` naming the set, such as
  `beam-100K-1`), the shape of converted BEAM and MemDaily development files. A question without
  evidence is one whose answer is not in memory (an abstention).

A question's answer choices, where the data has them, are kept as its `options` (what a Search
may send): a question's own `options` in any of the three shapes, else, in a conversation with
evidence texts, its entry in `stats.choices` (MemDaily's lettered choices, in letter order).

Gold evidence is matched to results by its exact text (see metrics.py): message ids are opaque
and assigned by the server, so the text is the one identifier every server shares.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

FORMAT = "aml-eval/1"
# LoCoMo's numbered categories; 5 is its adversarial class (see docs/EVAL.md).
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop",
                     5: "adversarial"}


@dataclass(frozen=True)
class Evidence:
    request_id: str
    position: int
    content: str
    speaker: str = ""  # who said it, where the data names people (LoCoMo's turns); else ""


@dataclass(frozen=True)
class Question:
    qid: str
    question: str
    suite: str
    category: str
    evidence: tuple[Evidence, ...]
    answer: str
    adversarial: bool = False
    difficulty: str = ""
    # LoCoMo's category 2: a question about when something happened (reader.py's date visible).
    temporal: bool = False
    # Answer choices where the data gives them (multiple-choice questions); () elsewhere.
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class Conversation:
    user_id: str
    adds: tuple[dict[str, Any], ...]
    questions: tuple[Question, ...]

    @property
    def message_count(self) -> int:
        return sum(len(add["messages"]) for add in self.adds)


# ---- dataset files ---------------------------------------------------------------------------

def question_to_json(q: Question) -> dict[str, Any]:
    """A question as a dataset file keeps it (an evidence's speaker and the temporal flag only
    when set, so files without them are written as before)."""
    out = {"qid": q.qid, "question": q.question, "suite": q.suite, "category": q.category,
           "difficulty": q.difficulty, "adversarial": q.adversarial, "answer": q.answer,
           "evidence": [{"request_id": e.request_id, "position": e.position, "content": e.content,
                         **({"speaker": e.speaker} if e.speaker else {})} for e in q.evidence]}
    if q.temporal:
        out["temporal"] = True
    if q.options:
        out["options"] = list(q.options)
    return out


def question_from_json(data: Mapping[str, Any]) -> Question:
    evidence = tuple(Evidence(e["request_id"], int(e["position"]), e["content"],
                              str(e.get("speaker", "")))
                     for e in data.get("evidence", []))
    return Question(data["qid"], data["question"], data.get("suite", ""), str(data["category"]),
                    evidence, str(data.get("answer", "")), bool(data.get("adversarial", False)),
                    data.get("difficulty", ""), bool(data.get("temporal", False)),
                    options_of(data.get("options")))


def options_of(raw: Any) -> tuple[str, ...]:
    """Answer choices as a file gives them: a list of texts, or a mapping of labels to texts
    (taken in label order: A, B, C, ...); anything else, or no choices, is ()."""
    if isinstance(raw, Mapping):
        raw = [raw[label] for label in sorted(raw, key=str)]
    if not isinstance(raw, list):
        return ()
    return tuple(choice for choice in raw if isinstance(choice, str) and choice)


def conversation_to_json(c: Conversation) -> dict[str, Any]:
    return {"user_id": c.user_id, "adds": list(c.adds),
            "questions": [question_to_json(q) for q in c.questions]}


def dataset_to_json(conversations: Iterable[Conversation], meta: Mapping[str, Any]) -> dict[str, Any]:
    return {"format": FORMAT, **meta,
            "conversations": [conversation_to_json(c) for c in conversations]}


def dumps(data: Any) -> str:
    """The one serialisation of generated files: fixed separators and key order, so the same
    seed gives byte-identical files."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


# ---- replay files ----------------------------------------------------------------------------

def from_replay(data: Mapping[str, Any], suite: str | None = None) -> Conversation:
    """A replay file (LoCoMo or LongMemEval converted) as a Conversation. Evidence turn ids that
    the file does not define are dropped (the converter reports them); the position of a turn in
    its Add is found by its exact content."""
    adds = tuple(data["adds"])
    dia = data["dia"]
    name = suite or data.get("source", "locomo")
    questions = []
    for raw in data["questions"]:
        evidence = []
        for turn_id in raw.get("evidence", []):
            turn = dia.get(turn_id)
            if turn is None:
                continue
            evidence.append(_locate_turn(adds, turn))
        category = raw.get("category")
        numbered = isinstance(category, int) and name == "locomo"
        label = LOCOMO_CATEGORIES.get(category, str(category)) if numbered else str(category)
        # LoCoMo's category 5 is adversarial even where an answer was annotated.
        adversarial = bool(raw.get("adversarial", False)) or (numbered and category == 5)
        questions.append(Question(raw["qid"], raw["question"], name, label, tuple(evidence),
                                  str(raw.get("answer", "")), adversarial,
                                  temporal=numbered and category == 2,
                                  options=options_of(raw.get("options"))))
    return Conversation(data["user_id"], adds, tuple(questions))


def from_texts(data: Mapping[str, Any]) -> Conversation:
    """A conversation whose questions give their evidence as exact message contents. Each text
    is located in the Adds (its first occurrence); one the Adds lack is still scored by its text."""
    adds = tuple(data["adds"])
    where = {}
    for add in reversed(adds):
        for position, message in reversed(list(enumerate(add["messages"]))):
            where[message["content"]] = (add["request_id"], position)
    suite = str(data.get("conv", "")).split("-", 1)[0] or "replay"
    stats = data.get("stats")
    choices = stats.get("choices") if isinstance(stats, Mapping) else None
    questions = []
    for raw in data["questions"]:
        evidence = tuple(Evidence(*where.get(text, ("", -1)), text) for text in raw.get("evidence", []))
        offered = raw.get("options") or (choices.get(raw["qid"]) if isinstance(choices, Mapping) else None)
        questions.append(Question(raw["qid"], raw["question"], suite, str(raw.get("category", "")),
                                  evidence, str(raw.get("answer", "")),
                                  bool(raw.get("adversarial", False)) or not evidence,
                                  options=options_of(offered)))
    return Conversation(data["user_id"], adds, tuple(questions))


def _locate_turn(adds: tuple[dict[str, Any], ...], turn: Mapping[str, Any]) -> Evidence:
    add = adds[turn["add"]]
    for position, message in enumerate(add["messages"]):
        if message["content"] == turn["content"]:
            return Evidence(add["request_id"], position, turn["content"],
                            str(turn.get("speaker") or ""))
    raise ValueError(f"turn content not found in Add {add['request_id']}")


# ---- loading ---------------------------------------------------------------------------------

def load(path: str | Path) -> list[Conversation]:
    """Every conversation in a dataset file or a replay file."""
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    if isinstance(data, dict) and data.get("format") == FORMAT:
        return [Conversation(c["user_id"], tuple(c["adds"]),
                             tuple(question_from_json(q) for q in c["questions"]))
                for c in data["conversations"]]
    if isinstance(data, dict) and {"adds", "dia", "questions"} <= data.keys():
        return [from_replay(data)]
    if isinstance(data, dict) and {"user_id", "adds", "questions"} <= data.keys():
        return [from_texts(data)]
    raise ValueError(f"{path}: neither an {FORMAT} dataset, a replay file nor a conversation "
                     "with evidence texts")


def load_many(paths: Iterable[str | Path]) -> list[Conversation]:
    """Conversations of several files; a directory stands for its *.json files, in name order."""
    out: list[Conversation] = []
    for path in files(paths):
        out.extend(load(path))
    return out


# What a missing or empty --replay path is told to run first.
MAKE_FILES = ("write some with `python3 scripts/run_eval.py --suite mixed --scale small --seeds 1 "
              "--write-data DIR` (synthetic) or `python3 scripts/prepare_public_data.py --locomo "
              "PATH --out DIR` (public data)")


def files(paths: Iterable[str | Path]) -> Iterator[Path]:
    """The files `load_many` reads, in its order: each path given, a directory as its *.json files
    in name order; ValueError for a path that does not exist or a directory without them."""
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise ValueError(f"{raw}: no such file or directory; {MAKE_FILES}")
        if path.is_dir():
            found = sorted(path.glob("*.json"))
            if not found:
                raise ValueError(f"{raw}: no *.json replay or dataset files in it; {MAKE_FILES}")
            yield from found
        else:
            yield path


def with_prefix(c: Conversation, prefix: str) -> Conversation:
    """The same conversation under a prefixed user id and request ids, so a rerun against a server
    that already holds it writes fresh users instead of replaying (or conflicting with) old Adds."""
    if not prefix:
        return c
    adds = tuple({**add, "user_id": prefix + add["user_id"],
                  "request_id": prefix + add["request_id"]} for add in c.adds)
    questions = tuple(replace(q, evidence=tuple(replace(e, request_id=prefix + e.request_id)
                                                for e in q.evidence))
                      for q in c.questions)
    return Conversation(prefix + c.user_id, adds, questions)
