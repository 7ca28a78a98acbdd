"""What a message carries beyond its words, extracted once at Add time and stored with it:
speaker, named entities, numbers, resolved dates, and whether it states an update.

The same extractors read a query (see query.py), so a question and its evidence are compared in
one vocabulary. All pure functions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from aml_retriever.dates import extract_dates
from aml_retriever.stopwords import STOP_WORDS
from aml_retriever.tokenizer import normalize

# Roles that name a side of the conversation rather than a person; for these the speaker is read
# from a "Name: text" prefix of the content when there is one.
GENERIC_ROLES = frozenset({"user", "assistant", "system", "tool", "human", "ai", "bot", "model",
                           "function", "developer"})
_SPEAKER_PREFIX = re.compile(r"^\s*([A-Z][\w'’.-]*(?:\s+[A-Z][\w'’.-]*){0,2})\s*:\s")
_CAPITALISED = re.compile(r"\b[A-Z][\w'’-]*[^\W\d_](?:\s+[A-Z][\w'’-]*[^\W\d_])*")
_QUOTED = re.compile(r"[\"“”«»]([^\"“”«»]{2,80})[\"“”«»]")
_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])\d+(?:\.\d+)?")
NUMBER_WORDS = {w: str(i) for i, w in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
     "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
     "nineteen", "twenty"])}
# A number word standing alone among letters ("two", "twenty-one" -> 20 and 1, not "someone").
_NUMBER_WORD = re.compile(r"(?<![a-z])(" + "|".join(NUMBER_WORDS) + r")(?![a-z])")
_POSSESSIVE = re.compile(r"['’]s$")
# Words with which people state that something changed; a message holding one may supersede an
# older statement of the same thing.
_UPDATE = re.compile(r"\b(moved to|moving to|relocated|now|currently|changed|switched|no longer|"
                     r"any ?more|these days|started|quit|new job|became|instead|nowadays|"
                     r"not .{0,20} anymore)\b", re.IGNORECASE)


# The stored array's fields at their defaults (see Features.to_json).
_DEFAULTS: list[Any] = ["", [], [], [], 0]


@dataclass(frozen=True)
class Features:
    speaker: str = ""
    entities: tuple[str, ...] = ()
    numbers: tuple[str, ...] = ()
    dates: tuple[str, ...] = ()
    update: bool = False

    def to_json(self) -> str:
        """A JSON array in field order, `[speaker, entities, numbers, dates, update]`, without
        the trailing fields left at their defaults: it is stored with every message, and most
        messages have no dates, no update and no speaker, so most arrays are short."""
        fields = [self.speaker, list(self.entities), list(self.numbers), list(self.dates),
                  int(self.update)]
        while fields and not fields[-1]:
            fields.pop()
        return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Features:
        """Reads both the array and the object form (stores written before the array form keep
        their rows until a reindex)."""
        data = json.loads(text)
        if isinstance(data, dict):
            return cls(data.get("speaker", ""), tuple(data.get("entities", ())),
                       tuple(data.get("numbers", ())), tuple(data.get("dates", ())),
                       bool(data.get("update", False)))
        speaker, entities, numbers, dates, update = data + _DEFAULTS[len(data):]
        return cls(speaker, tuple(entities), tuple(numbers), tuple(dates), bool(update))


def speaker_of(role: str, content: str) -> tuple[str, str]:
    """The speaker's normalised name, and the content without a "Name: " prefix."""
    if role.strip().lower() not in GENERIC_ROLES:
        return normalize(role.strip()), content
    match = _SPEAKER_PREFIX.match(content)
    if match:
        return normalize(match.group(1)), content[match.end():]
    return "", content


def entities_of(text: str) -> tuple[str, ...]:
    """Capitalised names (each word, and multi-word names whole) and quoted titles, normalised;
    stop words ("The", "I", "What") are not names."""
    found: list[str] = []
    for match in _CAPITALISED.finditer(text):
        words = [w for w in (normalize(_strip_possessive(w)) for w in match.group(0).split())
                 if w not in STOP_WORDS]
        found += words
        if len(words) > 1:
            found.append(" ".join(words))
    found += [normalize(m.group(1).strip()) for m in _QUOTED.finditer(text)]
    return tuple(dict.fromkeys(found))


def _strip_possessive(word: str) -> str:
    return _POSSESSIVE.sub("", word)


def numbers_of(text: str) -> tuple[str, ...]:
    digits = [m.group(0).replace(",", "") for m in _NUMBER.finditer(text)]
    words = [NUMBER_WORDS[w] for w in _NUMBER_WORD.findall(text.lower())]
    return tuple(dict.fromkeys(digits + words))


def states_update(text: str) -> bool:
    return _UPDATE.search(text) is not None


def extract(role: str, content: str, timestamp_ms: int | None) -> Features:
    speaker, body = speaker_of(role, content)
    return Features(speaker=speaker, entities=entities_of(body), numbers=numbers_of(body),
                    dates=tuple(extract_dates(body, timestamp_ms)), update=states_update(body))
