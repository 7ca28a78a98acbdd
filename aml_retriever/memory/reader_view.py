"""The reader's view of an answer (the `reader_view` setting): each message an item returns is
shown with the day and time it was said and who said it, and each date it gives relative to that
day is written out after it.

A reader that reads only the items' text (the leaderboard's: no `created_at`, no `role`) cannot
otherwise tell when "yesterday" was or who said "I went to a support group": of LoCoMo dev's
temporal questions whose answer is a date, the item holding the evidence showed that date in
none; of the questions that name a speaker, none showed who spoke. So an item reads

    [Mon 8 May 2023, 13:56 UTC, turn 4] Caroline (user): I went yesterday. [yesterday: Sun 7 May 2023]

and a run of several messages opens with its day and gives each message its time:

    [Mon 8 May 2023]
    13:56 turn 4 Caroline (user): I went yesterday. [yesterday: Sun 7 May 2023]
    13:56 Melanie (assistant): That's great!
    … partly shown above
    13:57 turn 9 Caroline (user): See you on Sunday.

A message says its place in its session's conversation (`turn`, from 1: storage/views.
session_places), so that the pieces of one session an answer returns, ranked items and context
items in relevance order, can be put back in order, also where a session's messages share one
time (LoCoMo gives a whole session one time, and shows it to the minute): a single message and
the first line of a run say it, and so does the line after a gap (the lines between follow one
another). A gap's line `…` says whether the turns it stands for are shown in an item above, left
out, or partly shown above. On each line, the turn cost the window 6 pieces: BEAM dev's fills
skip most replies, and in window fell from .959 to .953; said only where the order is not
already plain, it costs a run 6 pieces and a gap 12 with its line (2 before): .957.

The message's own text stays as it was sent, whole and in one piece (a reader, and the check of
evidence in results, find it unchanged); what is added goes on its first line before it and on
its last line after it. The dates written out are those of dates.TOLD_KINDS, found at Add
(features.Features.told) and resolved as analysis/dates.py resolves them for the date signal.
The speaker is the name the conversation gives the message's role
(storage/speakers.py: its person's longest name, the full one where "Mel" and "Melanie" are both
used), the role itself when it is a name ("Caroline: ..."; a role that is no plain name is
quoted, `"Caroline (user)": ...`, so that no role reads as a name and a role), and no name when
the text opens with the role's own name ("(user) Caroline: ..."); a text that opens with another
"Word: " ("Update: I got the job") is no speaker's name, and the role's name is shown before it.

No line of a message's text can pass for a message's first line: every line of a text after its
first starts with a space (`_indented`), where every line the view writes starts with a day,
a time or `…`. A text holding "\n[Tue 9 May 2023, 10:00 UTC] Caroline (user): ..." reads as
a line of that text, not as Caroline's. The space costs the reader's estimate nothing
(analysis/tokens.pieces: a line break and a space are one whitespace piece; where a run of
whitespace would cost one more, one of its characters gives way to the space), so the window
counts every item as before.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
import sqlite3
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from aml_retriever.analysis.dates import date_mentions, iso_utc
from aml_retriever.analysis.features import (
    GENERIC_ROLES,
    MARK_DATED,
    speaker_in_keys,
    told_of,
    unnamed_turn,
)
from aml_retriever.analysis.speakers import Speakers
from aml_retriever.analysis.tokens import pieces
from aml_retriever.engine.held import Held, content_bytes, text_bytes
from aml_retriever.engine.window import GAP_LINE
from aml_retriever.storage import speakers as stored
from aml_retriever.storage import views

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December")
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")  # not the locale's (strftime)
_DAY_MS = 86_400_000
# The largest place in a session the estimates allow for: a session of ten million messages.
_MOST_PLACE = 9_999_999
# What a gap's line says of the turns it stands for: all of them in an item above, none, some.
_GAP_WORDS = ("shown above", "left out", "partly shown above")
# The most a day and time take ("[Wed 30 September 2023, 23:59 UTC] "), in pieces
# (analysis/tokens.pieces); and a time of day as a run's line opens with it ("23:59 ").
DAY_TIME_PIECES = max(pieces(f"[{day} 30 {month} 2023, 23:59 UTC, turn {_MOST_PLACE}] ")
                      for day in _WEEKDAYS for month in _MONTHS)
TIME_PIECES = pieces("23:59 ")
# A turn as the first line of a run and the line after a gap say it ("turn 12 "), at most.
TURN_PIECES = pieces(f"turn {_MOST_PLACE} ")
# What a gap's line costs at most with the newline before it (`_gap_line`), and the turn of the
# line after it.
GAP_PIECES = max(pieces(f"{GAP_LINE} {where}") for where in _GAP_WORDS) + 1 + TURN_PIECES
# What the dates a message gives add at most when the row does not say which they are (stored
# before migration 9, until `reindex`): MOST_TOLD notes of a long phrase and a date each.
UNKNOWN_NOTES_PIECES = 100
# What a held `Said` costs besides its strings: the object, its dict of ten fields and its
# timestamp (tracemalloc, 10,000 of them: 204 bytes each).
SAID_BYTES = 128


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
    names: tuple[str, ...] = ()  # every name the conversation gives its role, as written
    turn: int = 0  # its place in its session's conversation, from 1 (0: not known)
    # Its text as shown with its notes after it, as its line ends (`_body`), and what its line
    # in a run opens with (its time, its turn where the line says it, who said it): worked out
    # when the view makes it (`ReaderView.said`), which `held_said` holds for the next Searches.
    body: str = ""
    run_head: str = ""
    turn_head: str = ""

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
        self._by_role = {role: self._speaker_of(role) for role in sorted(GENERIC_ROLES)}
        written = speakers.written
        self._names_by_role = {role: tuple(written.get(name, name.title()) for name in names)
                               for role, names in speakers.names.items()}

    @classmethod
    def read(cls, conn: sqlite3.Connection) -> ReaderView:
        return cls(stored.read(conn))

    def said(self, message_id: int, content: str, timestamp_ms: int, role: str,
             signal_keys: str, marks: int, told: str | None, turn: int = 0) -> Said:
        """A stored message (with its stored keys, marks, the dates it was found at Add to give
        relative to its day, and its place in its session) as the view shows it. A row stored
        before those dates were (NULL, until `reindex`) is read again, when marked as stating a
        date."""
        speaker, source = self._speaker(role, signal_keys)
        if told is None:
            dates = written_out(content, timestamp_ms) if marks & MARK_DATED else ()
        else:
            dates = tuple((phrase, _date(value, kind, phrase))
                          for phrase, kind, value in (json.loads(told) if told else ()))
        names = self._names(role) if source == "conversation" else ()
        made = Said(message_id, content, timestamp_ms, role, speaker, source, dates, names, turn)
        return dataclasses.replace(made, body=_body_of(content, dates),
                                   run_head=_run_head(made, ""), turn_head=_run_head(made, _turn(made)))

    def line_pieces(self, role: str, marks: int, told: str | None) -> int:
        """At most what the view adds to the line of a message of `role` in a run, besides its
        day (a run's day line, a single message's day and time: `DAY_TIME_PIECES` a day): its
        time, who said it (the longest form: the role's name and the role, the role alone, or
        the role in brackets) and the dates it gives. The space that starts each line of its
        text after the first costs nothing (`_indented`)."""
        speaker, source = self._speaker_held(role)
        notes = 0
        if told:
            notes = _told_pieces(told)
        elif told is None and marks & MARK_DATED:
            notes = UNKNOWN_NOTES_PIECES
        return TIME_PIECES + _who_pieces(role, speaker, source) + 1 + notes  # 1: a text that
        # opens with a digit, after a space

    def line_cost(self) -> Callable[[Any], int]:
        """`line_pieces` of a line of the fill's outline (engine/window.Line), for one Search: the
        fill asks it of every line it offers (773 a windowed BEAM Search), so what a role's line
        costs without notes is worked out once a role."""
        by_role: dict[str, int] = {}

        def cost(line: Any) -> int:
            plain = by_role.get(line.role)
            if plain is None:
                plain = by_role[line.role] = self.line_pieces(line.role, 0, "")
            if line.told:
                return plain + _told_pieces(line.told)
            return plain + (UNKNOWN_NOTES_PIECES if line.told is None and line.marks & MARK_DATED
                            else 0)
        return cost

    def _speaker(self, role: str, signal_keys: str) -> tuple[str, str]:
        """Who said a message, and how that is known. A text that opens with "Name: " names its
        speaker only when that is its role's name in the conversation ("Caroline: ..." in
        Caroline's turn): "Update: I got the job" in it is text, and her name is shown before
        it; in a role the conversation does not name, the role is shown before it."""
        if unnamed_turn(role, signal_keys):
            return self._speaker_held(role)
        written = speaker_in_keys(signal_keys)
        if written and self.speakers.role_of(written) == role:
            return "", "text"
        return self._speaker_held(role)

    def _speaker_held(self, role: str) -> tuple[str, str]:
        """`_speaker_of`, worked out once for the generic roles as written ("user"), whose
        speaker comes from the names; any other role is worked out each time (shown as itself,
        or a generic role written otherwise), so a held view never grows, whatever roles its
        user's messages have."""
        speaker = self._by_role.get(role)
        return speaker if speaker is not None else self._speaker_of(role)

    def _speaker_of(self, role: str) -> tuple[str, str]:
        """Who said a message of `role` that names no speaker in its text."""
        if role.strip().lower() not in GENERIC_ROLES:
            return _one_line(role), "role"
        shown = self.speakers.shown_for(role)
        return (shown, "conversation") if shown else ("", "")

    def _names(self, role: str) -> tuple[str, ...]:
        """Every name the conversation gives a role, as written (explain shows them)."""
        return self._names_by_role.get(role, ())


def held_said(held: Held, view: ReaderView, rows: Mapping[int, Any],
              places: Mapping[str, Mapping[int, int]], ids: Iterable[int]) -> dict[int, Said]:
    """These messages (engine/rows.MessageRow) as the view shows them, with their places in
    their sessions (`turn_places`), held for the next Searches: a Search with the window shows
    thousands of messages, mostly the same each question, and making each again (its dates
    read, its text indented, its line's end joined) took a fifth of a windowed BEAM Search."""
    return held.many("view lines", ids, lambda unread: {m: view.said(
        m, rows[m].content, rows[m].timestamp_ms, rows[m].role, rows[m].signal_keys,
        rows[m].marks, rows[m].told, places[rows[m].session_id].get(m, 0)) for m in unread},
        _said_bytes)


def _said_bytes(said: Said) -> int:
    """What a held `Said` costs besides its text, which its row holds (engine/rows.py): the
    object, its dict of fields (SAID_BYTES), its line's end when it is not its text, its line's
    openings, its dates; its role, speaker and names are the row's and the view's."""
    return (SAID_BYTES + (text_bytes(said.body) if said.body is not said.content else 0)
            + text_bytes(said.run_head) + text_bytes(said.turn_head)
            + sum(text_bytes(phrase) + text_bytes(date) + 56 for phrase, date in said.dates))


def turn_places(conn: sqlite3.Connection, held: Held,
                sessions: Iterable[str]) -> dict[str, dict[int, int]]:
    """The places of the messages of these sessions in their conversations (`Said.turn`): held
    for the next Searches, read for those not held (a session's ids, one pass of its index)."""
    return held.many("turn places", sorted(set(sessions)), lambda unread: {
        session: views.session_places(conn, session) for session in unread}, _places_bytes)


def _places_bytes(places: dict[int, int]) -> int:
    """A session's places: the dict, and each entry's id and place (ints, 32 bytes each)."""
    return sys.getsizeof(places) + 64 * len(places)


def view_bytes(view: ReaderView) -> int:
    """What a view held for a user's next Searches costs (memory/reads.py), measured: its names
    attached to roles, at most MOST_NAMES with their evidence (storage/speakers.py), and the
    speakers of the generic roles (nothing is added to it once held)."""
    return content_bytes(view)


def written_out(content: str, timestamp_ms: int) -> tuple[tuple[str, str], ...]:
    """The dates a message gives relative to its day, as written and as the day they are
    (features.told_of, which an Add stores); a date that cannot be written is left out. Read
    again for a row stored before its dates were (told NULL), whose notes the window counts as
    UNKNOWN_NOTES_PIECES before it reads them: the notes kept are those that fit in it."""
    kept: list[tuple[str, str]] = []
    for phrase, kind, value in told_of(content, date_mentions(content, timestamp_ms)):
        date = _date(value, kind, phrase)
        if date and _pieces(_notes_of([*kept, (phrase, date)])) <= UNKNOWN_NOTES_PIECES:
            kept.append((phrase, date))
    return tuple(kept)


def render(messages: Sequence[Said], gaps: frozenset[int] = frozenset(),
           above: frozenset[int] = frozenset()) -> str:
    """An item's text in the reader's view: one message on its own, or several of one session,
    a gap's line before each of `gaps` (the indexes of those after messages left out), which
    says whether the turns it stands for are shown above (`above`: the places of the session's
    messages in the items before); a run's first line and the line after a gap say their turn."""
    if len(messages) == 1:
        return _line(_prefix(messages[0]), messages[0])
    lines, day = [], ""
    for i, message in enumerate(messages):
        if i in gaps:
            lines.append(_gap_line(messages[i - 1].turn, message.turn, above))
        if message.day != day:
            day = message.day
            lines.append(f"[{day}]")
        if i == 0 or i in gaps:
            head = message.turn_head or _run_head(message, _turn(message))
        else:
            head = message.run_head or _run_head(message, "")
        lines.append(_line(head, message))
    return "\n".join(lines)


def _line(head: str, message: Said) -> str:
    """A message's line: what the view writes before its text (`head`: no line break), then
    its text as shown and its notes (`Said.body`, else worked out). A text that opens with
    whitespace is indented with the head's last space, as one line."""
    if message.content[:1].isspace():
        return _indented(f"{head}{message.content}{_notes(message)}")
    return head + (message.body or _body(message))


def _body(message: Said) -> str:
    return _body_of(message.content, message.dates)


def _body_of(content: str, dates: Sequence[tuple[str, str]]) -> str:
    """A message's text as shown (`_indented`: indenting a BEAM message's 30 lines costs 30
    us) with the notes of its dates after it; its very text when it holds no line break and
    gives no date."""
    text = _indented(content)
    notes = _indented(_notes_of(dates))
    return text + notes if notes else text


def _run_head(message: Said, turn: str) -> str:
    """What a message's line in a run opens with: its time, its `turn` ("" where the line does
    not say it), who said it."""
    return f"{message.time} {turn}{_who(message)}"


def _turn(message: Said) -> str:
    return f"turn {message.turn} " if message.turn else ""


def _gap_line(before: int, after: int, above: frozenset[int]) -> str:
    """The line of a gap between the turns at places `before` and `after` of a session: whether
    an item above shows the turns it stands for (all, none or some); their count is read from
    the turns either side."""
    if not 0 < before < after - 1:
        return GAP_LINE
    shown = sum(before < place < after for place in above)
    if shown == 0:
        return f"{GAP_LINE} {_GAP_WORDS[1]}"
    return f"{GAP_LINE} {_GAP_WORDS[0] if shown == after - before - 1 else _GAP_WORDS[2]}"


# Every character that ends a line (str.splitlines), each a whitespace character; and one
# before text: where a line of a message's text would start.
_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
_LINE_START = re.compile(rf"[{_BREAKS}](?=\S)")


def _indented(line: str) -> str:
    """A message's line with each line of its text after the first starting with a space, so
    that none can take the form of a line the view writes (a day, a time, `…`, all at the
    start of their line). A text holding no line break is unchanged. Each line start is found
    by its line break alone and its run of whitespace walked back from it: one pattern of
    `\\s*` before the break, tried at every character, took 75 us a BEAM message of 2.7 kB (31
    us so), and a Search with the window shows thousands (`held_said` holds them)."""
    if line.isprintable():
        return line
    parts, done = [], 0
    for found in _LINE_START.finditer(line):
        end = found.end()
        start = found.start()
        while start > done and line[start - 1].isspace():
            start -= 1
        parts += [line[done:start], _indent(line[start:end])]
        done = end
    parts.append(line[done:])
    return "".join(parts)


def _indent(run: str) -> str:
    """A run of whitespace ending in a line break, ending in a space instead of before the
    text. The reader's estimate costs a run of whitespace by its length (tokens.pieces: one
    piece up to 2 characters, one more each 4 after), so the space is added where that costs
    nothing, and otherwise takes the place of the run's last character but one (the line break
    before the text is kept): "\n" -> "\n ", "\n\n" -> "\n "."""
    if len(run) % 4 == 2:
        return run[:-2] + run[-1] + " "
    return run + " "


def _prefix(message: Said) -> str:
    """What goes before a message's text: its day and time as a single message shows them
    (a run's lines show less), and who said it."""
    turn = f", turn {message.turn}" if message.turn else ""
    return f"[{message.day}, {message.time} UTC{turn}] {_who(message)}"


def _notes(message: Said) -> str:
    """What goes after a message's text: the dates it gives, written out."""
    return _notes_of(message.dates)


def _notes_of(dates: Sequence[tuple[str, str]]) -> str:
    """The notes of the dates given, those that can be written ("" when `_date` writes none)."""
    notes = "; ".join(f"{phrase}: {date}" for phrase, date in dates if date)
    return f" [{notes}]" if notes else ""


def added_pieces(messages: Sequence[Said]) -> int:
    """The pieces (analysis/tokens.pieces) of what `render` adds to the messages' own texts,
    counted piece by piece (never less than within the whole): a single message's header, or a
    run's day lines and each line's time, turn and speaker; the dates written out. Not its gap
    lines (GAP_PIECES each). Counted as written, the turn's digits included: counted at their
    most (DAY_TIME_PIECES a message), a ranked front of long messages left no room for context
    in a window of 12,000 tokens (Hindi chat)."""
    if len(messages) == 1:
        heads = [_pieces(_prefix(messages[0]))]
    else:
        days = [m.day for m in messages]
        heads = [_pieces(f"[{day}]") + 1 for i, day in enumerate(days) if i == 0 or day != days[i - 1]]
        heads += [_pieces(f"{m.time} {_turn(m)}{_who(m)}") for m in messages]
    return sum(heads) + sum(1 + (_pieces(_notes(m)) if m.dates else 0)  # 1: see line_pieces
                            for m in messages)


def added(messages: Sequence[Said]) -> list[dict[str, Any]]:
    """What the view added to each message, for `explain`: its speaker, where the name comes
    from, and every name the conversation gives its role (`speaker` the one shown of them)."""
    return [{"message_id": f"m{m.id}", "said_at": iso_utc(m.timestamp_ms), "turn": m.turn or None,
             "role": m.role,
             "speaker": m.speaker or None, "speaker_from": m.source or None,
             "speaker_names": list(m.names),
             "dates": [{"written": phrase, "date": date} for phrase, date in m.dates]}
            for m in messages]


def _who(message: Said) -> str:
    return _who_of(message.role, message.speaker, message.source)


@lru_cache(maxsize=1024)
def _who_of(role: str, speaker: str, source: str) -> str:
    """Who said a message, as its line opens (the same few for every message of a user): a
    generic role with its name ("Caroline (user): "), alone ("user: ") or in brackets before a
    text that names its speaker ("(user) "); a role that is a person's name as it is
    ("Caroline: "), any other role quoted (`"Caroline (user)": `): a form no name and generic
    role produce."""
    role = _one_line(role)
    if source == "text":
        return f"({role}) "
    if source == "role":
        return f"{role}: " if _PLAIN_ROLE.fullmatch(role) else f"{json.dumps(role, ensure_ascii=False)}: "
    if speaker:
        return f"{speaker} ({role}): "
    return f"{role}: "


# A role that reads as a person's name: words of letters and digits, the first starting with a
# letter, joined by spaces, apostrophes, hyphens or points ("Caroline", "Ana Lee", "Dr. O'Brien").
# No bracket, colon or quote: it cannot end in "(user)", open with "(user)" or hold a line's form.
_PLAIN_ROLE = re.compile(r"[^\W\d_][^\W_]*(?:[ '’.-]+[^\W_]+)*\.?")


@lru_cache(maxsize=4096)
def _date(value: str, kind: str, phrase: str) -> str:
    """A told date (dates.DateMention.told, as stored) as a reader reads it: a day with its
    weekday, a month, a year; a week as the week of its Monday, a weekend as that of its
    Saturday, a season with its year; either of two ("Sat 2 or Sat 9 November 2024"), a span
    ("a few days before Mon 22 May 2023"), around a month, since a date. '' when the value
    cannot be written (a row stored by another version, a day past the calendar's end): a note
    is left out rather than an answer failed."""
    try:
        return _written(value, kind, phrase.lower())
    except (ValueError, OverflowError, IndexError, KeyError):
        return ""


# The kinds whose day is told as a week or a weekend when their phrase names one.
_WEEK_KINDS = frozenset({"relative_unit", "ago", "ahead", "since_now", "since_for"})
_SEASON_NAMES = ("summer", "winter", "spring", "autumn", "fall")


def _written(value: str, kind: str, phrase: str) -> str:
    """A told value's text: either of two, or one, each with at most one mark before it."""
    if "|" in value:
        first, second = (_marked(part, kind, phrase) for part in value.split("|", 1))
        shared = _shared_end(first, second)
        for opening in ("the weekend ", "the week "):  # "the weekend of Sat 10 or of Sat 17 June"
            if first.startswith(opening) and second.startswith(opening):
                second = second[len(opening):]
        return f"{first[:len(first) - len(shared)]} or {second}"
    return _marked(value, kind, phrase)


def _marked(value: str, kind: str, phrase: str) -> str:
    if value.startswith("+~"):
        return "since about " + _plain(value[2:], kind, phrase)
    if value.startswith("+"):
        # A span's start is a day ("the past week": since Sun 10 April), a length's its unit's.
        return "since " + _plain(value[1:], "" if kind == "relative_unit" else kind, phrase)
    if value.startswith("~"):
        return "around " + _plain(value[1:], kind, "")
    if value[:1] in ("<", ">"):
        span = phrase.removeprefix("in ").removesuffix(" ago")
        if "other day" in span or not span:
            span = "some days"
        return f"{span} {'before' if value[0] == '<' else 'after'} {_plain(value[1:], '', '')}"
    return _plain(value, kind, phrase)


def _plain(value: str, kind: str, phrase: str) -> str:
    """An ISO date, month or year as a reader reads it (ValueError for anything else)."""
    parts = [int(p) for p in value.split("-")]
    if not (1 <= len(parts) <= 3 and 1 <= parts[0] <= 9999
            and (len(parts) == 1 or 1 <= parts[1] <= 12)):
        raise ValueError(f"not a date: {value!r}")
    if len(parts) == 1:
        season = next((name for name in _SEASON_NAMES if name in phrase), "") if kind == "season" else ""
        if season == "winter":
            return f"winter {_year(parts[0])}-{_year(parts[0] + 1)}"
        return f"{season} {_year(parts[0])}" if season else _year(parts[0])
    if len(parts) == 2:
        return f"{_MONTHS[parts[1] - 1]} {_year(parts[0])}"
    day = dt.date(*parts)
    if kind in _WEEK_KINDS and "weekend" in phrase:
        return f"the weekend of {_weekday(day + dt.timedelta(days=(5 - day.weekday()) % 7))}"
    if kind in _WEEK_KINDS and "week" in phrase:
        return f"the week of {_weekday(day - dt.timedelta(days=day.weekday()))}"
    return _weekday(day)


def _shared_end(first: str, second: str) -> str:
    """The words both end with, from a space ("Sat 2 November 2024" and "Sat 9 November 2024"
    share " November 2024"), that the first of two may leave to the second."""
    shared = ""
    for a, b in zip(reversed(first.split(" ")), reversed(second.split(" ")), strict=False):
        if a != b or not (a.isdigit() or a in _MONTHS):
            break
        shared = f" {a}{shared}"
    return shared if len(shared) < len(first) else ""


def _weekday(day: dt.date) -> str:
    return f"{_WEEKDAYS[day.weekday()]} {day.day} {_MONTHS[day.month - 1]} {_year(day.year)}"


def _year(year: int) -> str:
    """A year as written: with four digits before 1000, so that "February 0001" is no day."""
    return f"{year:04d}"


@lru_cache(maxsize=4096)
def _day(days: int) -> str:
    """A day since 1 January 1970 as a reader reads it (an answer's messages share few days)."""
    return _weekday(dt.date(1970, 1, 1) + dt.timedelta(days=days))


@lru_cache(maxsize=1024)
def _who_pieces(role: str, speaker: str, source: str) -> int:
    """The most pieces who said a message of `role` may take (the role's name and the role, the
    role alone, or the role in brackets): asked for every line the fill offers."""
    return max(_pieces(_who_of(role, speaker, source)), _pieces(_who_of(role, "", "text")),
               _pieces(_who_of(role, "", "")))


@lru_cache(maxsize=4096)
def _told_pieces(told: str) -> int:
    """The pieces of the notes of the dates a message gives (as stored, `told`): asked for every
    line the fill offers, thousands a windowed Search, mostly the same messages each question."""
    return _pieces(_notes_of(tuple((phrase, _date(value, kind, phrase))
                                   for phrase, kind, value in json.loads(told))))


@lru_cache(maxsize=4096)
def _pieces(text: str) -> int:
    """The pieces of what the view adds (the same names and roles come again and again)."""
    return pieces(text)


def _one_line(text: str) -> str:
    """A role or a phrase on one line, its whitespace runs as single spaces."""
    return " ".join(text.split())
