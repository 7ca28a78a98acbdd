"""What a message carries beyond its words, extracted once at Add time: speaker, named entities,
numbers, resolved dates, and whether it states an update. An Add stores them as a Search reads
them, beside the message: its marks (bits), its signal keys and the dates a reader is told.

The same extractors read a query (see query.py), so a question and its evidence are compared in
one vocabulary. All pure functions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from aml_retriever.analysis.dates import TOLD_KINDS, DateMention, date_mentions
from aml_retriever.analysis.speakers import Mention, mentions
from aml_retriever.analysis.stopwords import STOP_WORDS
from aml_retriever.analysis.tokenizer import ASCII_WORD_GAPS, normalize

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

# ASCII text, nearly every English message, takes faster paths that find exactly what the
# patterns above find: Python's regular expressions cost about 30 ns a character a pattern, and
# a long message paid for six of them (BEAM dev messages of 150+ words, 3,700 characters on
# average: every feature 2.4 ms a message, entities 0.55, numbers 0.79, dates 0.75, update 0.42).
# On ASCII text, `\w` is [A-Za-z0-9_] and IGNORECASE is matching the lowered text.
_BETWEEN_LETTERS = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalpha()})
# The same names in ASCII text, the non-word character before each read as part of the match
# instead of `\b`, and the text read after a space: the search skips whole words at C speed and
# findall makes no match object a name (3x faster). `\s` also holds \x1c-\x1f, as without re.ASCII.
_ASCII_CAPITALISED = re.compile(r"\W([A-Z][\w'-]*[A-Za-z](?:[\s\x1c-\x1f]+[A-Z][\w'-]*[A-Za-z])*)",
                                re.ASCII)
# A number preceded by what is neither a word character nor a point, that character read as
# part of the match instead of looked behind, and the text read after a space (so a number may
# start it): the search skips from gap to gap at C speed (numbers of long ASCII messages 3x faster).
_ASCII_NUMBER = re.compile(r"[^\w.](\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)", re.ASCII)
# The update cues that are one word, and the literal text each cue of several words holds.
_UPDATE_WORDS = frozenset({"relocated", "now", "currently", "changed", "switched", "anymore", "started",
                           "quit", "became", "instead", "nowadays"})
_UPDATE_PHRASES = ("moved to", "moving to", "no longer", "any more", "these days", "new job")


# The fields of the JSON array schemas 1 to 13 stored with each message, at their defaults
# (`from_json`: migrations 7 and 11 read them; migration 14 dropped the column).
_DEFAULTS: list[Any] = ["", [], [], [], 0]
# How each kind of signal key begins (Features.keys). A message's keys are stored with it, each
# between newlines (`keys_text`), and a Search looks the question's keys up in them (`needle`).
ENTITY_KEY, NUMBER_KEY, DATE_KEY, SPEAKER_KEY = "e:", "n:", "d:", "s:"
KEY_END = "\n"
# The bits of a message's marks (Features.marks), read with its row.
MARK_UPDATE, MARK_DATED = 1, 2


# Most dates a message keeps to be told to a reader (`Features.told`): bounded work and words.
MOST_TOLD = 8


@dataclass(frozen=True)
class Features:
    speaker: str = ""
    entities: tuple[str, ...] = ()
    numbers: tuple[str, ...] = ()
    dates: tuple[str, ...] = ()
    update: bool = False
    # The dates whose day a reader must be told (dates.TOLD_KINDS), as (written, kind, date):
    # stored apart from the rest (`told_json`), for the reader's view; not in the JSON schemas up
    # to 13 stored, nor compared (features read back from that JSON equal those extracted).
    told: tuple[tuple[str, str, str], ...] = field(default=(), compare=False)
    # The names it gives the other side or its own speaker (speakers.mentions): stored apart,
    # by the speakers' tables (storage/speakers.py).
    mentions: tuple[Mention, ...] = field(default=(), compare=False)

    def keys(self) -> list[str]:
        """Its signal keys, each once: its names, numbers and dates, and its speaker."""
        keys = [ENTITY_KEY + e for e in self.entities] + [NUMBER_KEY + n for n in self.numbers]
        keys += [DATE_KEY + d for d in self.dates]
        if self.speaker:
            keys.append(SPEAKER_KEY + self.speaker)
        return list(dict.fromkeys(keys))

    def keys_text(self) -> str:
        """Its keys as stored: each between newlines, so `needle(key)` finds a whole key."""
        keys = self.keys()
        return KEY_END + KEY_END.join(map(_one_line, keys)) + KEY_END if keys else ""

    def told_json(self) -> str:
        """`told` as stored (messages.told): a JSON array, or '' when there is none."""
        return json.dumps([list(t) for t in self.told], ensure_ascii=False) if self.told else ""

    @property
    def marks(self) -> int:
        """Whether it states an update and whether it states a date, as bits (MARK_*)."""
        return (MARK_UPDATE if self.update else 0) | (MARK_DATED if self.dates else 0)

    @classmethod
    def from_json(cls, text: str) -> Features:
        """Features as schemas up to 13 stored them, for the migrations that derive from them: a
        JSON array in field order, `[speaker, entities, numbers, dates, update]`, without the
        trailing fields at their defaults, or the JSON object of stores older still."""
        data = json.loads(text)
        if isinstance(data, dict):
            return cls(data.get("speaker", ""), tuple(data.get("entities", ())),
                       tuple(data.get("numbers", ())), tuple(data.get("dates", ())),
                       bool(data.get("update", False)))
        speaker, entities, numbers, dates, update = data + _DEFAULTS[len(data):]
        return cls(speaker, tuple(entities), tuple(numbers), tuple(dates), bool(update))


def needle(key: str) -> str:
    """What a whole key is found by in a message's stored keys (Features.keys_text)."""
    return KEY_END + _one_line(key) + KEY_END


def _one_line(key: str) -> str:
    """A key as stored: a newline within it (a quoted title may hold one) read as a space."""
    return key.replace(KEY_END, " ")


def speaker_of(role: str, content: str) -> tuple[str, str]:
    """The speaker's normalised name, and the content without a "Name: " prefix."""
    if role.strip().lower() not in GENERIC_ROLES:
        return normalize(role.strip()), content
    match = _SPEAKER_PREFIX.match(content)
    if match:
        return normalize(match.group(1)), content[match.end():]
    return "", content


def unnamed_turn(role: str, signal_keys: str) -> bool:
    """Whether a stored message, by its role and stored keys (`Features.keys_text`), names no
    speaker in its own text: a generic role with no "Name: " prefix, or a role that is a name."""
    return role.strip().lower() not in GENERIC_ROLES or KEY_END + SPEAKER_KEY not in signal_keys


def speaker_in_keys(signal_keys: str) -> str:
    """The speaker a stored message's text names (its "Name: " prefix, the `s:` key
    `Features.keys_text` writes), or ""."""
    at = signal_keys.find(KEY_END + SPEAKER_KEY)
    if at < 0:
        return ""
    start = at + len(KEY_END + SPEAKER_KEY)
    end = signal_keys.find(KEY_END, start)
    return signal_keys[start:end if end >= 0 else len(signal_keys)]


def entities_of(text: str) -> tuple[str, ...]:
    """Capitalised names (each word, and multi-word names whole) and quoted titles, normalised;
    stop words ("The", "I", "What") are not names."""
    found: list[str] = []
    for name in (_ascii_names(text) if text.isascii() else _names(text)):
        found += _entities_of_name(name)
    found += [normalize(m.group(1).strip()) for m in _QUOTED.finditer(text)]
    return tuple(dict.fromkeys(found))


@lru_cache(maxsize=8192)
def _entities_of_name(name: str) -> tuple[str, ...]:
    """A capitalised name's entities: each word normalised, without a possessive and not a stop
    word, then the words together when there are several. Remembered: the same names start
    sentences and name the same people message after message."""
    words = [w for w in (normalize(_POSSESSIVE.sub("", w)) for w in name.split()) if w not in STOP_WORDS]
    return (*words, " ".join(words)) if len(words) > 1 else tuple(words)


def _names(text: str) -> list[str]:
    return [m.group(0) for m in _CAPITALISED.finditer(text)]


def _ascii_names(text: str) -> list[str]:
    """`_names` of ASCII text, faster (tests hold the two equal)."""
    found: list[str] = _ASCII_CAPITALISED.findall(f" {text}")
    return found


def numbers_of(text: str, lowered: str | None = None) -> tuple[str, ...]:
    """Numbers written in digits (1,000 -> 1000) then in words up to twenty, in text order.
    `lowered`: the text in lowercase, when the caller has it."""
    if text.isascii():
        return tuple(dict.fromkeys(_ascii_digits(text) + _ascii_number_words(
            text.lower() if lowered is None else lowered)))
    return tuple(dict.fromkeys(_digits(text) + _number_words(text.lower())))


def _digits(text: str) -> list[str]:
    return [m.group(0).replace(",", "") for m in _NUMBER.finditer(text)]


def _ascii_digits(text: str) -> list[str]:
    """`_digits` of ASCII text, faster (tests hold the two equal)."""
    return [m.replace(",", "") for m in _ASCII_NUMBER.findall(f" {text}")]


def _number_words(lowered: str) -> list[str]:
    return [NUMBER_WORDS[w] for w in _NUMBER_WORD.findall(lowered)]


def _ascii_number_words(lowered: str) -> list[str]:
    """`_number_words` of lowercase ASCII text: its runs of letters that are number words, the
    runs cut at C speed (word by word in Python, 118 us of a BEAM dev message's 430)."""
    return [NUMBER_WORDS[run] for run in lowered.translate(_BETWEEN_LETTERS).split()
            if run in NUMBER_WORDS]


def states_update(text: str) -> bool:
    if text.isascii():
        lowered = text.lower()
        return _ascii_states_update(text, lowered, ascii_words(lowered))
    return _UPDATE.search(text) is not None


def _ascii_states_update(text: str, lowered: str, words: list[str]) -> bool:
    r"""`states_update` of ASCII text: a one-word cue is a whole word (`\b(now)\b` finds it);
    the pattern runs only on text holding a cue of several words."""
    if not _UPDATE_WORDS.isdisjoint(words):
        return True
    return any(p in lowered for p in _UPDATE_PHRASES) and _UPDATE.search(text) is not None


def ascii_words(lowered: str) -> list[str]:
    r"""The words of lowercase ASCII text as `\b...\b` sees them (`\w` runs), in order."""
    return lowered.translate(ASCII_WORD_GAPS).split()


def extract(role: str, content: str, timestamp_ms: int | None) -> Features:
    """Every feature of a message. An ASCII text's lowercase words are read once for the
    numbers, dates, update cues and names (each read them apart: on bench_long's long messages, 2,160
    characters, 40 us a reading of 290 us of features)."""
    speaker, body = speaker_of(role, content)
    if not body.isascii():
        dated = date_mentions(body, timestamp_ms)
        return Features(speaker=speaker, entities=entities_of(body), numbers=numbers_of(body),
                        dates=_values(dated), update=states_update(body),
                        told=told_of(body, dated), mentions=mentions(body))
    lowered = body.lower()
    words = ascii_words(lowered)
    distinct = frozenset(words)
    dated = date_mentions(body, timestamp_ms, distinct)
    return Features(speaker=speaker, entities=entities_of(body), numbers=numbers_of(body, lowered),
                    dates=_values(dated), update=_ascii_states_update(body, lowered, words),
                    told=told_of(body, dated), mentions=mentions(body, distinct))


def _values(mentions: list[DateMention]) -> tuple[str, ...]:
    """The dates mentioned, in text order, each once (dates.extract_dates)."""
    return tuple(dict.fromkeys(m.value for m in mentions))


def told_of(text: str, mentions: list[DateMention]) -> tuple[tuple[str, str, str], ...]:
    """The mentions a reader must be told of, as (written, kind, told), at most MOST_TOLD:
    those of dates.TOLD_KINDS whose `told` says something (dates.py writes none where the phrase
    gives no date, or two readings fit it and neither is told)."""
    return tuple((" ".join(text[m.start:m.end].split()), m.kind, m.told)
                 for m in mentions if m.told and m.kind in TOLD_KINDS)[:MOST_TOLD]
