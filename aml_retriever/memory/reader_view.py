"""The reader's view of an answer (the `reader_view` setting): each message an item returns is
shown with the day and time it was said and who said it, and each date it gives relative to that
day is written out after it.

A reader that reads only the items' text (the leaderboard's: no `created_at`, no `role`) cannot
otherwise tell when "yesterday" was or who said "I went to a support group": of LoCoMo dev's
temporal questions whose answer is a date, the item holding the evidence showed that date in
none; of the questions that name a speaker, none showed who spoke. So an item reads

    [Mon 8 May 2023, 13:56 UTC] Caroline (user): I went yesterday. [yesterday: Sun 7 May 2023]

and a run of several messages opens with its day and gives each message its time:

    [Mon 8 May 2023]
    13:56 Caroline (user): I went yesterday. [yesterday: Sun 7 May 2023]
    13:56 Melanie (assistant): That's great!

The message's own text stays as it was sent, whole and in one piece (a reader, and the check of
evidence in results, find it unchanged); what is added goes on its first line before it and on
its last line after it. The dates written out are those of dates.TOLD_KINDS, found at Add
(features.Features.told) and resolved as analysis/dates.py resolves them for the date signal.
The speaker is the name the conversation gives the message's role
(storage/speakers.py: its longest name, the full one where "Mel" and "Melanie" are both used),
the role itself when it is a name, and no name when the text opens with one ("(user) Caroline:
...").
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from aml_retriever.analysis.dates import date_mentions, iso_utc
from aml_retriever.analysis.features import GENERIC_ROLES, MARK_DATED, told_of, unnamed_turn
from aml_retriever.analysis.speakers import Speakers
from aml_retriever.analysis.tokens import pieces
from aml_retriever.engine.window import GAP_LINE
from aml_retriever.storage import speakers as stored

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December")
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")  # not the locale's (strftime)
_DAY_MS = 86_400_000
# The most a day and time take ("[Wed 30 September 2023, 23:59 UTC] "), in pieces
# (analysis/tokens.pieces); and a time of day as a run's line opens with it ("23:59 ").
DAY_TIME_PIECES = max(pieces(f"[{day} 30 {month} 2023, 23:59 UTC] ")
                      for day in _WEEKDAYS for month in _MONTHS)
TIME_PIECES = pieces("23:59 ")
# What the dates a message gives add at most when the row does not say which they are (stored
# before migration 9, until `reindex`): MOST_TOLD notes of a long phrase and a date each.
UNKNOWN_NOTES_PIECES = 100


@dataclass(frozen=True)
class Said:
    """One message as the view shows it."""

    id: int
    content: str
    timestamp_ms: int
    role: str
    speaker: str  # the name shown ("" when none is known, or the text names it)
    source: str  # where the name comes from: 'conversation', 'role', 'text' or ''
    dates: tuple[tuple[str, str], ...]  # (as written, the date it is), in text order

    @property
    def day(self) -> str:
        """The day it was said, as a reader reads it ("Mon 8 May 2023")."""
        return _day(self.timestamp_ms // _DAY_MS)

    @property
    def time(self) -> str:
        """The time of day it was said, UTC ("13:56")."""
        hours, minutes = divmod(self.timestamp_ms // 60_000 % 1440, 60)
        return f"{hours:02d}:{minutes:02d}"


class ReaderView:
    """Renders the messages of one user's answer, with the names that user's conversation gives
    its roles."""

    def __init__(self, speakers: Speakers) -> None:
        self.speakers = speakers
        self._by_role: dict[str, tuple[str, str]] = {}  # a role's speaker, once worked out

    @classmethod
    def read(cls, conn: sqlite3.Connection) -> ReaderView:
        return cls(stored.read(conn))

    def said(self, message_id: int, content: str, timestamp_ms: int, role: str,
             signal_keys: str, marks: int, told: str | None) -> Said:
        """A stored message (with its stored keys, marks and the dates it was found at Add to
        give relative to its day) as the view shows it. A row stored before those dates were
        (NULL, until `reindex`) is read again, when marked as stating a date."""
        speaker, source = self._speaker(role, signal_keys)
        if told is None:
            dates = written_out(content, timestamp_ms) if marks & MARK_DATED else ()
        else:
            dates = tuple((phrase, _date(value, kind, phrase))
                          for phrase, kind, value in (json.loads(told) if told else ()))
        return Said(message_id, content, timestamp_ms, role, speaker, source, dates)

    def results(self, members: Sequence[int], rows: dict[int, Any]) -> list[Said]:
        """A ranked result's messages (engine/rows.MessageRow) as the view shows them."""
        return [self.said(m, rows[m].content, rows[m].timestamp_ms, rows[m].role,
                          rows[m].signal_keys, rows[m].marks, rows[m].told) for m in members]

    def line_pieces(self, role: str, marks: int, told: str | None) -> int:
        """At most what the view adds to the line of a message of `role` in a run, besides its
        day (a run's day line, a single message's day and time: `DAY_TIME_PIECES` a day): its
        time, who said it (the longest form: a name and the role) and the dates it gives."""
        speaker, source = self._speaker_of(role)
        notes = 0
        if told:
            notes = _pieces(_notes_of(tuple((phrase, _date(value, kind, phrase))
                                            for phrase, kind, value in json.loads(told))))
        elif told is None and marks & MARK_DATED:
            notes = UNKNOWN_NOTES_PIECES
        who = max(_pieces(_who_of(role, speaker, source)), _pieces(_who_of(role, "", "text")))
        return TIME_PIECES + who + 1 + notes  # 1: a text that opens with a digit, after a space

    def _speaker(self, role: str, signal_keys: str) -> tuple[str, str]:
        if not unnamed_turn(role, signal_keys):
            return "", "text"
        if role not in self._by_role:
            self._by_role[role] = self._speaker_of(role)
        return self._by_role[role]

    def _speaker_of(self, role: str) -> tuple[str, str]:
        """Who said a message of `role` that names no speaker in its text."""
        if role.strip().lower() not in GENERIC_ROLES:
            return _one_line(role), "role"
        names = self.speakers.names.get(role, ())
        if not names:
            return "", ""
        longest = max(names, key=lambda name: (len(name), name))
        return self.speakers.written.get(longest, longest.title()), "conversation"


def view_bytes(_: ReaderView) -> int:
    """What a view held for a user's next Searches costs (memory/reads.py): its names attached
    to roles, at most MOST_NAMES with their evidence (storage/speakers.py), and its roles'."""
    return 64 * 1024


def written_out(content: str, timestamp_ms: int) -> tuple[tuple[str, str], ...]:
    """The dates a message gives relative to its day, as written and as the day they are
    (features.told_of, which an Add stores)."""
    return tuple((phrase, _date(value, kind, phrase))
                 for phrase, kind, value in told_of(content, date_mentions(content, timestamp_ms)))


def render(messages: Sequence[Said], gaps: frozenset[int] = frozenset()) -> str:
    """An item's text in the reader's view: one message on its own, or several of one session,
    a GAP_LINE before each of `gaps` (the indexes of those after messages left out)."""
    if len(messages) == 1:
        return f"{_prefix(messages[0])}{messages[0].content}{_notes(messages[0])}"
    lines, day = [], ""
    for i, message in enumerate(messages):
        if i in gaps:
            lines.append(GAP_LINE)
        if message.day != day:
            day = message.day
            lines.append(f"[{day}]")
        lines.append(f"{message.time} {_who(message)}{message.content}{_notes(message)}")
    return "\n".join(lines)


def _prefix(message: Said) -> str:
    """What goes before a message's text: its day and time as a single message shows them
    (a run's lines show less), and who said it."""
    return f"[{message.day}, {message.time} UTC] {_who(message)}"


def _notes(message: Said) -> str:
    """What goes after a message's text: the dates it gives, written out."""
    return _notes_of(message.dates)


def _notes_of(dates: Sequence[tuple[str, str]]) -> str:
    notes = "; ".join(f"{phrase}: {date}" for phrase, date in dates)
    return f" [{notes}]" if notes else ""


def added_pieces(messages: Sequence[Said]) -> int:
    """The pieces (analysis/tokens.pieces) of what `render` adds to the messages' own texts,
    counted piece by piece (never less than within the whole): a run's day lines, each message's
    day and time (at most a single message's: DAY_TIME_PIECES), who said it, the dates written
    out. Not its gap lines (window.GAP_PIECES each)."""
    headers = (len({m.day for m in messages}) * (DAY_TIME_PIECES + 1)) if len(messages) > 1 else 0
    return headers + sum(DAY_TIME_PIECES + _pieces(_who(m)) + 1  # 1: see line_pieces
                         + (_pieces(_notes(m)) if m.dates else 0) for m in messages)


def added(messages: Sequence[Said]) -> list[dict[str, Any]]:
    """What the view added to each message, for `explain`."""
    return [{"message_id": f"m{m.id}", "said_at": iso_utc(m.timestamp_ms), "role": m.role,
             "speaker": m.speaker or None, "speaker_from": m.source or None,
             "dates": [{"written": phrase, "date": date} for phrase, date in m.dates]}
            for m in messages]


def _who(message: Said) -> str:
    return _who_of(message.role, message.speaker, message.source)


@lru_cache(maxsize=1024)
def _who_of(role: str, speaker: str, source: str) -> str:
    """Who said a message, as its line opens (the same few for every message of a user)."""
    role = _one_line(role)
    if source == "text":
        return f"({role}) "
    if source == "role":
        return f"{speaker}: "
    if speaker:
        return f"{speaker} ({role}): "
    return f"{role}: "


def _date(value: str, kind: str, phrase: str) -> str:
    """A resolved date as a reader reads it: a day with its weekday, a month, a year; a week
    ("last week") as the week of its Monday, a weekend as the weekend of its Saturday."""
    parts = [int(p) for p in value.split("-")]
    if len(parts) == 1:
        return str(parts[0])
    if len(parts) == 2:
        return f"{_MONTHS[parts[1] - 1]} {parts[0]}"
    day = dt.date(*parts)
    if kind == "relative_unit" and "weekend" in phrase.lower():
        return f"the weekend of {_weekday(day + dt.timedelta(days=(5 - day.weekday()) % 7))}"
    if kind == "relative_unit" and "week" in phrase.lower():
        return f"the week of {_weekday(day - dt.timedelta(days=day.weekday()))}"
    return _weekday(day)


def _weekday(day: dt.date) -> str:
    return f"{_WEEKDAYS[day.weekday()]} {day.day} {_MONTHS[day.month - 1]} {day.year}"


@lru_cache(maxsize=4096)
def _day(days: int) -> str:
    """A day since 1 January 1970 as a reader reads it (an answer's messages share few days)."""
    return _weekday(dt.date(1970, 1, 1) + dt.timedelta(days=days))


@lru_cache(maxsize=4096)
def _pieces(text: str) -> int:
    """The pieces of what the view adds (the same names and roles come again and again)."""
    return pieces(text)


def _one_line(text: str) -> str:
    """A role or a phrase on one line, its whitespace runs as single spaces."""
    return " ".join(text.split())
