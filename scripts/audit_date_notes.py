#!/usr/bin/env python3
"""Print every note the reader's view writes on the shared dev conversations, with its sentence,
for a person to audit (docs/ARCHITECTURE.md, "The reader's notes").

    python3 scripts/audit_date_notes.py                  # every note, one a line
    python3 scripts/audit_date_notes.py --kind weekday   # the notes of one kind
    python3 scripts/audit_date_notes.py --summary        # how many of each kind

Each line: the day and time the message was said (UTC), the kind, the note as the reader reads it
("[phrase: date]"), and the sentence around the phrase. It reads the dev data where the shared
evaluation kit keeps it (../shared/eval, or --data) and writes nothing; the dev data is licensed
for evaluation only, so what it prints stays out of the project. Without the kit it says so and
exits 0. A few seconds.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aml_retriever.analysis.dates import date_mentions
from aml_retriever.analysis.features import told_of
from aml_retriever.memory.reader_view import _date

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "eval"
# The dev conversations: LoCoMo in the leaderboard's format (the same texts as replay/, without
# the speakers' names), and BEAM's.
SETS = ("replay_platform/*.json", "external/data/beam/100K/*.json", "external/data/beam/500K/*.json")
_SENTENCE_ENDS = ".!?\n"


def messages(data: Path) -> Iterator[tuple[str, str, int]]:
    """(file, content, timestamp) of every message of the dev sets under `data`."""
    for pattern in SETS:
        for path in sorted(data.glob(pattern)):
            conversation = json.loads(path.read_text(encoding="utf-8"))
            for add in conversation.get("adds", []):
                for message in add.get("messages", []):
                    if isinstance(message.get("timestamp"), int):
                        yield path.name, str(message.get("content", "")), message["timestamp"]


def sentence(text: str, start: int, end: int, width: int = 200) -> str:
    """The sentence around text[start:end], on one line, at most `width` characters."""
    low = max((text.rfind(mark, 0, start) for mark in _SENTENCE_ENDS), default=-1) + 1
    ends = [at for at in (text.find(mark, end) for mark in _SENTENCE_ENDS) if at >= 0]
    high = min(ends) + 1 if ends else len(text)
    low, high = max(low, start - width // 2), min(high, end + width // 2)
    return " ".join(text[low:high].split())


def notes(content: str, timestamp_ms: int) -> Iterator[tuple[str, str, str, str]]:
    """(kind, phrase, note, sentence) of each note the view writes on a message."""
    mentions = date_mentions(content, timestamp_ms)
    told = told_of(content, mentions)
    places = [m for m in mentions if m.told]
    for (phrase, kind, value), mention in zip(told, places, strict=False):
        note = _date(value, kind, phrase)
        if note:
            yield kind, phrase, note, sentence(content, mention.start, mention.end)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="the shared evaluation kit (default: ../shared/eval)")
    parser.add_argument("--kind", help="only the notes of this kind (dates.TOLD_KINDS)")
    parser.add_argument("--summary", action="store_true", help="only how many of each kind")
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"skipped: no shared evaluation kit at {args.data} (the dev conversations are not "
              "here; pass --data)")
        return 0
    counts: collections.Counter[str] = collections.Counter()
    for name, content, timestamp_ms in messages(args.data):
        said = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=timestamp_ms)
        for kind, phrase, note, text in notes(content, timestamp_ms):
            if args.kind and kind != args.kind:
                continue
            counts[kind] += 1
            if not args.summary:
                print(f"{name}\t{said:%a %d %b %Y %H:%M}\t{kind}\t[{phrase}: {note}]\t{text}")
    print(f"notes: {sum(counts.values())} "
          + ", ".join(f"{kind} {n}" for kind, n in counts.most_common()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
