"""LoCoMo and LongMemEval, as published, into replay files (dataset.py reads them).

A replay file is one conversation, i.e. one user:

  conv, source, user_id, speaker_a, speaker_b
  adds       /add bodies in chronological order: each session cut into the fewest Adds of at
             most 20 messages, 2,000 words and 900 kB, as even in length as those limits allow
             (a single longer message travels alone); every message has its speaker's role and a
             timestamp (the session's time plus one second per turn, so turns keep their order)
  dia        turn id -> {"content": the exact message sent, "session", "idx", "add"}, plus
             "speaker" (the speaker's name) for LoCoMo
  questions  qid, question, category, answer, adversarial, evidence (turn ids), evidence_raw,
             evidence_dropped (annotated ids that name no turn)
  stats      counts, for the converter's report

LoCoMo (`locomo10.json`, a list of samples, or one sample per file): speaker A is role `user`,
speaker B `assistant`, content is `"<Speaker>: <text>"` plus `" [shares a photo: <caption>]"`
when the turn shared an image; evidence ids (`D3:12`) are read leniently (`D:3:12`, `D3:012`,
several ids in one string). LongMemEval (`longmemeval_s.json`, `longmemeval_oracle.json`): one
user per question (each question has its own haystack), roles and contents as given, evidence
= the turns marked `has_answer`; a question id ending in `_abs` is an abstention (adversarial).

Standard library only; nothing here downloads anything, and no benchmark data ships with the
project.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

MAX_MESSAGES = 20
MAX_WORDS = 2000
# Under the server's default 1 MiB body limit with room for JSON escaping and the envelope.
MAX_BYTES = 900_000
LOCOMO_TIME = r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*"
MONTHS = {m: i for i, m in enumerate(("january", "february", "march", "april", "may", "june", "july",
                                      "august", "september", "october", "november", "december"), 1)}


class ConversionError(ValueError):
    """The input does not have the shape of the benchmark it was given as."""


def _epoch_ms(moment: dt.datetime) -> int:
    return int(moment.replace(tzinfo=dt.UTC).timestamp() * 1000)


def locomo_time(text: str) -> int:
    """'1:56 pm on 8 May, 2023' -> ms since the epoch (taken as UTC); no locale involved."""
    found = re.fullmatch(LOCOMO_TIME, text, re.IGNORECASE)
    if not found or found.group(5).lower() not in MONTHS:
        raise ConversionError(f"unreadable LoCoMo session time {text!r}")
    hour, minute, half, day, month, year = found.groups()
    hour24 = int(hour) % 12 + (12 if half.lower() == "p" else 0)
    return _epoch_ms(dt.datetime(int(year), MONTHS[month.lower()], int(day), hour24, int(minute)))


def longmemeval_time(text: str) -> int:
    """'2023/05/20 (Sat) 02:21' -> ms since the epoch (taken as UTC)."""
    found = re.fullmatch(r"\s*(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\(\w+\))?\s*(\d{1,2}):(\d{2})\s*", text)
    if not found:
        raise ConversionError(f"unreadable LongMemEval date {text!r}")
    year, month, day, hour, minute = (int(g) for g in found.groups())
    return _epoch_ms(dt.datetime(year, month, day, hour, minute))


def add_sizes(messages: Sequence[dict[str, Any]], max_messages: int = MAX_MESSAGES,
              max_words: int = MAX_WORDS, max_bytes: int = MAX_BYTES) -> list[int]:
    """How many consecutive messages each Add of a session carries: the fewest Adds whose sizes
    differ by at most one and that respect every limit (a lone message may exceed the word and
    byte limits: it cannot be cut)."""
    words = [len(m["content"].split()) for m in messages]
    sizes_bytes = [len(m["content"].encode("utf-8")) for m in messages]
    total = len(messages)
    for parts in range(max(1, math.ceil(total / max_messages)), total + 1):
        small, extra = divmod(total, parts)
        sizes = [small + 1] * extra + [small] * (parts - extra)
        start, fits = 0, True
        for size in sizes:
            end = start + size
            if size > 1 and (sum(words[start:end]) > max_words or sum(sizes_bytes[start:end]) > max_bytes):
                fits = False
                break
            start = end
        if fits:
            return sizes
    return [1] * total


def evidence_ids(raw: Any) -> list[str]:
    """Turn ids in one annotated evidence entry, normalised ('D:11:26' and 'D11:026' -> 'D11:26';
    'D8:6; D9:17' -> both)."""
    return [f"D{int(s)}:{int(t)}" for s, t in re.findall(r"D:?\s*(\d+)\s*:\s*(\d+)", str(raw))]


class _Builder:
    """Collects one user's sessions into Adds and a turn table."""

    def __init__(self, conv: str, source: str, user_id: str) -> None:
        self.conv, self.source, self.user_id = conv, source, user_id
        self.adds: list[dict[str, Any]] = []
        self.dia: dict[str, dict[str, Any]] = {}
        self.sessions = 0
        self.skipped_empty = 0

    def session(self, session_id: str, number: Any, turns: Sequence[tuple[str, str, str]],
                start_ms: int) -> None:
        """turns: (turn id, role, content) in order."""
        messages, ids = [], []
        for idx, (turn_id, role, content) in enumerate(turns):
            if not content.strip():
                self.skipped_empty += 1  # the contract refuses empty content
                continue
            if turn_id in self.dia:
                raise ConversionError(f"{self.conv}: turn id {turn_id} appears twice")
            messages.append({"role": role, "content": content, "timestamp": start_ms + 1000 * idx})
            ids.append(turn_id)
            self.dia[turn_id] = {"content": content, "session": number, "idx": idx, "add": None}
        self.sessions += 1
        start = 0
        for part, size in enumerate(add_sizes(messages)):
            for turn_id in ids[start:start + size]:
                self.dia[turn_id]["add"] = len(self.adds)
            self.adds.append({"request_id": f"{self.user_id}-{session_id}-{part}",
                              "user_id": self.user_id, "session_id": f"{self.conv}-{session_id}",
                              "messages": messages[start:start + size]})
            start += size

    def replay(self, speakers: tuple[str, str], questions: list[dict[str, Any]]) -> dict[str, Any]:
        stats = {"sessions": self.sessions, "turns": len(self.dia), "adds": len(self.adds),
                 "words": sum(len(m["content"].split()) for a in self.adds for m in a["messages"]),
                 "questions": len(questions),
                 "questions_without_evidence": sum(1 for q in questions if not q["evidence"]),
                 "evidence_dropped": sum(len(q["evidence_dropped"]) for q in questions),
                 "empty_turns_skipped": self.skipped_empty}
        return {"conv": self.conv, "source": self.source, "user_id": self.user_id,
                "speaker_a": speakers[0], "speaker_b": speakers[1], "adds": self.adds, "dia": self.dia,
                "questions": questions, "stats": stats}


# ---- LoCoMo ----------------------------------------------------------------------------------

def locomo_samples(data: Any, name: str) -> Iterator[tuple[str, dict[str, Any], list[Any]]]:
    """(conversation id, conversation, qa) of every sample in a LoCoMo file: the published list,
    one sample, or one flattened conversation with its qa (named after the file)."""
    items = data if isinstance(data, list) else [data]
    for item in items:
        if not isinstance(item, dict):
            raise ConversionError(f"{name}: a LoCoMo sample must be an object")
        conversation = item.get("conversation", item)
        if not isinstance(conversation, dict) or "speaker_a" not in conversation:
            raise ConversionError(f"{name}: no LoCoMo conversation (speaker_a, session_N) found")
        conv = str(item.get("sample_id", name)).removeprefix("conv-")
        yield conv, conversation, list(item.get("qa", []))


def convert_locomo(conv: str, conversation: dict[str, Any], qa: Sequence[dict[str, Any]]) -> dict[str, Any]:
    speaker_a, speaker_b = conversation["speaker_a"], conversation["speaker_b"]
    user_id = f"locomo-{conv}"
    numbers = [int(k.split("_")[1]) for k, v in conversation.items()
               if re.fullmatch(r"session_\d+", k) and v]
    numbers.sort(key=lambda n: (locomo_time(conversation[f"session_{n}_date_time"]), n))
    build = _Builder(conv, "locomo", user_id)
    spoken_by: dict[str, str] = {}
    for n in numbers:
        turns = []
        for turn in conversation[f"session_{n}"]:
            speaker = turn["speaker"]
            if speaker not in (speaker_a, speaker_b):
                raise ConversionError(f"{conv}: speaker {speaker!r} is neither speaker_a nor speaker_b")
            content = f"{speaker}: {turn['text']}"
            if turn.get("blip_caption"):
                content += f" [shares a photo: {turn['blip_caption']}]"
            turn_id = (evidence_ids(turn["dia_id"]) or [str(turn["dia_id"])])[0]
            turns.append((turn_id, "user" if speaker == speaker_a else "assistant", content))
            spoken_by[turn_id] = speaker
        build.session(f"s{n}", n, turns, locomo_time(conversation[f"session_{n}_date_time"]))
    for turn_id, turn in build.dia.items():  # who spoke each turn: what `speaker visible` asks
        turn["speaker"] = spoken_by[turn_id]
    questions = []
    for i, item in enumerate(qa):
        found, dropped = [], []
        for raw in item.get("evidence", []):
            ids = evidence_ids(raw)
            if not ids:
                dropped.append(str(raw))
            for turn_id in ids:
                if turn_id not in build.dia:
                    dropped.append(turn_id)
                elif turn_id not in found:
                    found.append(turn_id)
        category = int(item["category"])
        questions.append({"qid": f"{conv}-q{i}", "question": item["question"], "category": category,
                          "answer": item.get("answer", item.get("adversarial_answer")),
                          "adversarial": "answer" not in item or category == 5, "evidence": found,
                          "evidence_raw": item.get("evidence", []), "evidence_dropped": dropped})
    return build.replay((speaker_a, speaker_b), questions)


# ---- LongMemEval -----------------------------------------------------------------------------

def convert_longmemeval(item: dict[str, Any]) -> dict[str, Any]:
    qid = str(item["question_id"])
    build = _Builder(qid, "longmemeval", f"longmemeval-{qid}")
    sessions = list(zip(item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"],
                        strict=True))
    order = sorted(range(len(sessions)), key=lambda i: (longmemeval_time(sessions[i][1]), i))
    evidence: list[str] = []
    seen_ids: set[str] = set()
    for index in order:
        session_id, date, turns = sessions[index]
        name = str(session_id) if str(session_id) not in seen_ids else f"{session_id}~{index}"
        seen_ids.add(name)
        rows = []
        for i, turn in enumerate(turns):
            turn_id = f"{name}:{i + 1}"
            rows.append((turn_id, str(turn["role"]), str(turn["content"])))
            if turn.get("has_answer") and str(turn["content"]).strip():
                evidence.append(turn_id)
        build.session(name, index, rows, longmemeval_time(date))
    question = {"qid": qid, "question": item["question"], "category": item["question_type"],
                "answer": item.get("answer"), "adversarial": qid.endswith("_abs"), "evidence": evidence,
                "evidence_raw": list(item.get("answer_session_ids", [])), "evidence_dropped": [],
                "question_date": item.get("question_date")}
    return build.replay(("user", "assistant"), [question])


# ---- files -----------------------------------------------------------------------------------

def _read(path: Path) -> Any:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _files(paths: Sequence[str | Path]) -> Iterator[Path]:
    for raw in paths:
        path = Path(raw)
        yield from (sorted(path.glob("*.json")) if path.is_dir() else [path])


def locomo_files(paths: Sequence[str | Path]) -> Iterator[dict[str, Any]]:
    for path in _files(paths):
        for conv, conversation, qa in locomo_samples(_read(path), path.stem):
            yield convert_locomo(conv, conversation, qa)


def longmemeval_files(paths: Sequence[str | Path], limit: int | None = None) -> Iterator[dict[str, Any]]:
    count = 0
    for path in _files(paths):
        data = _read(path)
        if not isinstance(data, list):
            raise ConversionError(f"{path}: a LongMemEval file is a list of questions")
        for item in data:
            if limit is not None and count >= limit:
                return
            count += 1
            yield convert_longmemeval(item)


def write_replay(replay: dict[str, Any], out_dir: str | Path) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{replay['source']}-{replay['conv']}")
    path = out / f"{safe}.json"
    path.write_text(json.dumps(replay, ensure_ascii=False), encoding="utf-8")
    return path
