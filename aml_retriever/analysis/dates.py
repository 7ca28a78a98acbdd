"""Dates in text: absolute ones read as written, relative ones resolved against the message time.

"last Saturday" in a message of Thursday 25 May 2023 is Saturday 20 May 2023, so a question about
"May 2023", or a "when" question, can find the message that never spelled the date out. Results are
ISO strings at the precision the text gives: "2023-05-20" (a day), "2023-05" (a month), "2023" (a
year). Pure functions; the table of cases is in tests/test_dates.py.

Each mention has two readings. Its `value` is a date key that ranks (features.Features.keys): one
ISO date, the best single guess, kept as it was for the kinds that already had one ("last week" is
the day a week back). Its `told` is what a reader is told (memory/reader_view.py), written only
when the phrase says it, exactly as precisely as the phrase says it (docs: "The reader's notes");
"" when nothing should be said. `told` is an ISO date, or one of these marks before one:

    "2023-05-06|2023-05-13"  either of the two (a phrase two readings fit: "next Saturday")
    "<2023-05-22"            some time before it, as long as the phrase says ("a few days ago")
    ">2023-05-22"            some time after it ("in a few weeks")
    "~2022-08"               around it ("a year ago", said in August 2023)
    "+2019", "+~2023-08"     since it (about it): "for 3 years now", "the past week"

A week is told as its Monday, a weekend as its Saturday, a season (kind "season") as the year it
starts in. Seasons are those of the northern hemisphere (winter is December to February).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator
from typing import NamedTuple

from aml_retriever.analysis.tense import IRREGULAR, PARTS, clause_bounds, lowered_words, tense_at
from aml_retriever.analysis.tokenizer import ASCII_WORD_GAPS

MONTHS = {name: i for i, name in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], 1)}
MONTHS.update({name[:3]: i for name, i in list(MONTHS.items())})
MONTHS["sept"] = 9
WEEKDAYS = {name: i for i, name in enumerate(
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"])}
SMALL_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
                 "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
                 "couple": 2, "a couple of": 2, "a couple": 2, "few": 3, "a few": 3, "several": 3}
# Counts that name no number: "a few days ago" is told as a span, never as one day.
VAGUE_COUNTS = frozenset({"couple", "a couple of", "a couple", "few", "a few", "several"})
# Seasons as the first month of each (northern hemisphere, meteorological: winter is December
# to February, told as the year it starts in).
SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}

_MONTH = (r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
          r"sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d{2})"
# A count of days, weeks, months or years: at most four digits ("in 9999 days" is a date, "in
# 99999999999 days" a number), or a word.
_COUNT = (r"(\d{1,4}|a couple of|a couple|a few|an|a|one|two|three|four|five|six|seven|eight|"
          r"nine|ten|eleven|twelve|couple|few|several)")
_UNIT = r"(day|week|month|year)s?"
# Words that make a count approximate ("for about four months now").
_HEDGE = r"(?:(about|around|almost|nearly|over|roughly|just under|just over|more than)\s+)?"
_WEEKDAY = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_SEASON = r"(summer|winter|spring|fall|autumn)"

# A pattern runs only on text that holds what every match of it must hold: a digit, a year
# (19xx or 20xx), a month's name, a hyphen, or one of its cue words. Most messages hold no date,
# and long ones hold a digit somewhere: checking for a month's name and a year too spares most of
# the patterns on a long message (2,000 messages of over 200 words from the public dev splits:
# 1.5-1.7 -> 0.74-0.89 ms each; every feature of a message 3.2-3.3 -> 2.2-2.6 ms), at the cost
# of a few substring checks. What the patterns find is unchanged.
_ANY_DIGIT = re.compile(r"\d")
_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_CUES: dict[str, tuple[str, ...]] = {
    "yesterday": ("yesterday", "last night"),
    "today": ("today", "tonight", "this morning", "this afternoon", "this evening"),
    "tomorrow": ("tomorrow",),
    "two_days": ("yesterday", "tomorrow"),
    "day": ("day",),
    "other_day": ("other day",),
    "weekday": ("day",),
    "ago": ("ago",),
    "ahead": ("day", "week", "month", "year"),
    "relative_unit": ("week", "month", "year"),
    "now": ("now",),
    "for": ("for",),
    "season": ("summer", "winter", "spring", "fall", "autumn"),
    "the": ("the",),
}
# What a kind's every match holds, as the names `_present` gives them.
_NEEDS: dict[str, frozenset[str]] = {
    "iso": frozenset({"year", "-"}),
    "day_month_year": frozenset({"month", "year"}),
    "month_day_year": frozenset({"month", "year"}),
    "month_year": frozenset({"month", "year"}),
    "day_month": frozenset({"month", "digit"}),
    "month_day": frozenset({"month", "digit"}),
    "year": frozenset({"year"}),
    "month_name": frozenset({"month"}),
    "since_now": frozenset({"now", "ahead", "unit_now"}),
    "since_for": frozenset({"for", "ahead"}),
    "day_of_month": frozenset({"the", "digit"}),
    "two_days": frozenset({"two_days", "day"}),
    "relative_unit": frozenset({"relative_unit", "near_unit"}),
    **{kind: frozenset({kind}) for kind in ("yesterday", "today", "tomorrow", "other_day",
                                            "weekday", "ago", "ahead", "season")},
}
# What every "for four months now" holds (a unit, then "now"), and every "(the) last week" (a
# unit after last, next, past or this): looked for only where their words stand in the text.
# Those patterns, and "the day before yesterday", start with an optional word, so Python's
# search tries them at every character: on bench_long's long messages they cost 87, 42 and 31 us
# a message where their words stood, and found nothing 997 times in 1,000 (dates 230 -> 105 us).
_UNIT_NOW = re.compile(_UNIT + r"\s+now\b")
_NEAR_UNIT = re.compile(r"(?:last|next|past|this)\s+(?:week|weekend|month|year)\b")


# In ASCII text, what must stand as a whole word where a pattern matches (every pattern bounds
# its month, weekday and unit words), looked for among the text's words: "may", "mar" or "dec"
# inside longer words, and "day" in "today", no longer run the patterns that need a month or a
# weekday. Long messages (BEAM dev, 150+ words): dates 1.07 -> 0.3 ms a message, the same dates.
_WHOLE_WORDS: dict[str, frozenset[str]] = {
    "month": frozenset({"jan", "january", "feb", "february", "mar", "march", "apr", "april", "may",
                        "jun", "june", "jul", "july", "aug", "august", "sep", "sept", "sepember",
                        "september", "oct", "october", "nov", "november", "dec", "december"}),
    "weekday": frozenset(WEEKDAYS),
    "relative_unit": frozenset({"week", "weekend", "month", "year"}),
    "ahead": frozenset({"day", "days", "week", "weeks", "month", "months", "year", "years"}),
    "season": frozenset(SEASONS),
    "now": frozenset({"now"}),
    "day": frozenset({"day"}),
    "for": frozenset({"for"}),
    "the": frozenset({"the"}),
}


def _holds_year(text: str) -> bool:
    r"""Whether the text holds 19 or 20 and two digits (`(?:19|20)\d\d`), found with str.find."""
    for century in ("19", "20"):
        at = text.find(century)
        while at >= 0:
            if text[at + 2:at + 4].isdecimal() and len(text[at + 2:at + 4]) == 2:
                return True
            at = text.find(century, at + 1)
    return False


def _present(lowered: str, words: frozenset[str] | None = None) -> frozenset[str]:
    """Which of the things date patterns need a text holds (see _NEEDS); `words`: an ASCII
    text's words, when the caller has them (features.extract reads them once for every
    feature)."""
    ascii_words = lowered.isascii()
    # In ASCII text a kind that `_WHOLE_WORDS` checks needs no scan for its cues: the check of
    # its whole words says all they would (BEAM dev's long messages: dates 20% faster).
    present = {kind for kind, cues in _CUES.items()
               if not (ascii_words and kind in _WHOLE_WORDS) and any(c in lowered for c in cues)}
    if ascii_words:
        present |= _WHOLE_WORDS.keys() & _CUES.keys()
    if _ANY_DIGIT.search(lowered):
        present.add("digit")
        if _holds_year(lowered):
            present.add("year")
    if "-" in lowered:
        present.add("-")
    if lowered.isascii():
        if words is None:
            words = frozenset(lowered.translate(ASCII_WORD_GAPS).split())
        present.add("month")
        present -= {kind for kind, names in _WHOLE_WORDS.items() if words.isdisjoint(names)}
    elif any(name in lowered for name in _MONTH_NAMES):
        present.add("month")
    if {"now", "ahead"} <= present and _UNIT_NOW.search(lowered):
        present.add("unit_now")
    if "relative_unit" in present and _NEAR_UNIT.search(lowered):
        present.add("near_unit")
    return frozenset(present)


# Kinds in order of precedence: a span read by an earlier kind is not read again. Each pattern
# starts at a word boundary (`_at_word_starts`); the `\b` that said so is left out of it, so the
# search skips to its first letters at C speed (a pattern that starts with `\b` is tried at every
# character): long messages (bench_long's, 2,160 characters) 240 -> 120 us of dates a message.
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("iso", re.compile(_YEAR + r"-(\d{2})-(\d{2})\b")),
    ("day_month_year", re.compile(_DAY + r"\s+(?:of\s+)?" + _MONTH + r",?\s+" + _YEAR + r"\b")),
    ("month_day_year", re.compile(_MONTH + r"\.?\s+" + _DAY + r",?\s+" + _YEAR + r"\b")),
    ("month_year", re.compile(_MONTH + r",?\s+(?:of\s+)?" + _YEAR + r"\b")),
    ("day_month", re.compile(_DAY + r"\s+(?:of\s+)?" + _MONTH + r"\b")),
    ("month_day", re.compile(_MONTH + r"\.?\s+" + _DAY + r"\b(?!\s*[:.]\d)")),
    ("year", re.compile(r"(?:in|of|since|during|year)\s+" + _YEAR + r"\b")),
    # Before "yesterday" and "tomorrow", which they hold.
    ("two_days", re.compile(r"(?:the\s+)?day\s+(before\s+yesterday|after\s+tomorrow)\b")),
    ("yesterday", re.compile(r"(yesterday|last night)\b")),
    ("today", re.compile(r"(today|tonight|this morning|this afternoon|this evening)\b")),
    ("tomorrow", re.compile(r"tomorrow\b")),
    ("other_day", re.compile(r"the\s+other\s+day\b")),
    ("weekday", re.compile(r"(this\s+past|last|past|next|this|on)\s+" + _WEEKDAY + r"\b")),
    ("since_now", re.compile(r"(?:for\s+)?" + _HEDGE + _COUNT + r"\s+" + _UNIT + r"\s+now\b")),
    ("since_for", re.compile(r"for\s+" + _HEDGE + _COUNT + r"\s+" + _UNIT + r"\b")),
    ("ago", re.compile(_COUNT + r"\s+" + _UNIT + r"\s+ago\b")),
    ("ahead", re.compile(r"in\s+" + _COUNT + r"\s+" + _UNIT + r"\b")),
    ("relative_unit", re.compile(r"(the\s+|)(this\s+past|last|next|this|past)\s+"
                                 r"(week|weekend|month|year)\b")),
    ("season", re.compile(r"(this\s+past|last|next|this|past)\s+" + _SEASON + r"\b")),
    ("month_name", re.compile(r"(in|last|this\s+past|this|next|since|during)\s+" + _MONTH + r"\b")),
    # "on the 15th": read from "the" (a literal start: the search skips to it at C speed), the
    # word before it checked by `_day_of_month`.
    ("day_of_month", re.compile(r"the\s+(\d{1,2})(?:st|nd|rd|th)\b"
                                r"(?:\s+of\s+(this|next|last)\s+month\b)?")),
]


def _count(word: str) -> int:
    return int(word) if word.isdigit() else SMALL_NUMBERS.get(word, 1)


def _month(word: str) -> int:
    return MONTHS[word.rstrip(".")[:4] if word.startswith("sept") else word.rstrip(".")[:3]]


def _shift_months(day: dt.date, months: int) -> dt.date:
    index = day.year * 12 + day.month - 1 + months
    return dt.date(index // 12, index % 12 + 1, 1)


def _safe_date(year: int, month: int, day: int) -> str | None:
    try:
        return dt.date(year, month, day).isoformat()
    except ValueError:
        return None


class _Said(NamedTuple):
    """What a mention is read against: the day it was said, and the text around it."""

    ref: dt.date
    lowered: str
    start: int
    end: int
    text: str  # as written: "May" is the month, "may" mostly the verb

    def tense(self) -> str:
        return tense_at(self.lowered, self.start, self.end)

    def before(self, words: int = 1) -> list[str]:
        """The words just before the mention."""
        return self.lowered[max(0, self.start - 40):self.start].translate(ASCII_WORD_GAPS) \
            .split()[-words:]

    def after(self) -> str:
        """The word just after the mention ('' at a mark or the end)."""
        rest = self.lowered[self.end:self.end + 40]
        words = rest.split(None, 1)
        return words[0].strip(".,;:!?)\"'") if words and rest[:1] == " " else ""


Resolved = tuple[str, str]  # (value, told)


def _resolve(kind: str, m: re.Match[str], said: _Said) -> Resolved | None:
    """The date a match names and what a reader is told of it, or None when it names none a
    calendar holds ("tomorrow" said on 31 December 9999, "in 9999 years")."""
    try:
        return _resolved(kind, m, said)
    except (OverflowError, ValueError):
        return None


def _resolved(kind: str, m: re.Match[str], said: _Said) -> Resolved | None:
    g, ref = m.groups(), said.ref
    if kind == "iso":
        return _untold(_safe_date(int(g[0]), int(g[1]), int(g[2])))
    if kind == "day_month_year":
        return _untold(_safe_date(int(g[2]), _month(g[1]), int(g[0])))
    if kind == "month_day_year":
        return _untold(_safe_date(int(g[2]), _month(g[0]), int(g[1])))
    if kind == "month_year":
        return _untold(f"{int(g[1]):04d}-{_month(g[0]):02d}")
    if kind in ("day_month", "month_day"):
        day, month = (int(g[0]), _month(g[1])) if kind == "day_month" else (int(g[1]), _month(g[0]))
        if _a_verb(said):
            return None  # "Android 14 may introduce", "3 may fail", "let's march 5 miles"
        return _day_of_year(month, day, said)
    if kind == "year":
        return _untold(g[0])
    if kind in ("yesterday", "tomorrow", "two_days"):
        step = {"yesterday": -1, "tomorrow": 1}.get(kind, -2 if "before" in m.group(0) else 2)
        nearby = (ref + dt.timedelta(days=step)).isoformat()
        if "like" in said.before(3) or said.before(2) == ["as", "if"]:
            return nearby, ""  # "it feels like just yesterday": no day
        return _told(nearby)
    if kind == "today":
        return ref.isoformat(), ""
    if kind == "other_day":
        return ref.isoformat(), "<" + ref.isoformat()
    if kind == "weekday":
        return _weekday(" ".join(g[0].split()), WEEKDAYS[g[1]], said)
    if kind in ("ago", "ahead"):
        return _ago(g[0], g[1], said, ahead=kind == "ahead")
    if kind in ("since_now", "since_for"):
        return _since(g[0], g[1], g[2], said, kind == "since_now")
    if kind == "relative_unit":
        return _relative_unit(bool(g[0]), " ".join(g[1].split()), g[2], said)
    if kind == "season":
        return _season(" ".join(g[0].split()), g[1], said)
    if kind == "month_name":
        return _month_name(" ".join(g[0].split()), _month(g[1]), m.group(0), said)
    if kind == "day_of_month":
        return _day_of_month(int(g[0]), g[1], said)
    return None


def _untold(value: str | None) -> Resolved | None:
    return (value, "") if value else None


def _told(value: str | None) -> Resolved | None:
    return (value, value) if value else None


# Words after a lowercase "may" that make it the month ("on 14 may we flew").
_AFTER_THE_MONTH = frozenset({"i", "we", "he", "she", "they", "you", "and", "to", "at", "in", "on",
                              "for", "the", "this", "next", "last", "was", "is", "but", "or", ""})


def _a_verb(said: _Said) -> bool:
    """Whether the month of "5 may" or "march 5" is a verb: written lowercase, and a word
    follows that does not follow a date ("3 may fail", "march 5 miles")."""
    written = said.text[said.start:said.end]
    return any(verb in written for verb in ("may", "march")) and said.after() not in _AFTER_THE_MONTH


def _day_of_year(month: int, day: int, said: _Said) -> Resolved | None:
    """A day named without its year: the one of the year said within half a year of the day
    said ("on 20 May"), else one within a quarter across the year's turn ("on December 28",
    said on 2 January; "on January 5", said on 31 December), else none is told. Nor when the
    sentence's tense puts it more than a month on the other side of the day said ("we married on
    12 August", said in June: some August before, not which; a past sentence may name a day to
    come, "I declined the shift on April 10", said on 7 April), nor of a birth. The key is the
    one told, else the one of the year said, as it always was."""
    ref = said.ref
    same, last, following = (_date_or_none(ref.year + step, month, day) for step in (0, -1, 1))
    key = same or last or following
    if key is None:
        return None
    options = [d for d, limit in ((same, 183), (last, 92), (following, 92))
               if d and abs((d - ref).days) <= limit]
    chosen = min(options, key=lambda d: abs((d - ref).days)) if options else None
    if chosen is None:
        return key.isoformat(), ""
    tense = said.tense() if abs((chosen - ref).days) > 31 else ""
    before, after = _around(said)
    if (tense == "past" and chosen > ref) or (tense == "future" and chosen < ref) \
            or "born" in lowered_words(before) + lowered_words(after):
        return key.isoformat(), ""
    return _told(chosen.isoformat())


def _date_or_none(year: int, month: int, day: int) -> dt.date | None:
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def _weekday(modifier: str, weekday: int, said: _Said) -> Resolved | None:
    """A weekday by its modifier and the sentence's tense.

    'last' and 'this past' are the most recent one strictly before the day said (five of six
    "last <weekday>" answers of LoCoMo dev whose most recent one fell in the same week chose it).
    'next' is the first one after it; when that one falls in the week said (Monday to Sunday, or
    Sunday to Saturday), "next" may also mean the one a week later, and both are told. 'this' is
    the one of the week said, the coming one if it is earlier in the week and the sentence
    speaks of the future. 'on' follows the tense: the one before in a past sentence ("I hosted
    a class on Friday", said on a Monday), the one after in a future one ("I'll call on
    Monday", said on a Saturday), and nothing is told when the tense is not clear."""
    if said.before() == ["the"] or said.after() in ("of", "nights", "mornings", "afternoons",
                                                    "evenings"):
        return None  # "the next Sunday dinner", "the last Friday of the month", "on Friday nights"
    ref = said.ref
    back = (ref.weekday() - weekday) % 7 or 7  # days to the most recent one before
    ahead = (weekday - ref.weekday()) % 7 or 7  # days to the first one after
    before, after = ref - dt.timedelta(days=back), ref + dt.timedelta(days=ahead)
    in_week = ref + dt.timedelta(days=weekday - ref.weekday())  # the one of the week said
    if modifier in ("last", "past", "this past"):
        return _told(before.isoformat())
    if modifier == "next":
        sunday_first = (weekday + 1) % 7 > (ref.weekday() + 1) % 7
        if weekday > ref.weekday() or sunday_first:
            return after.isoformat(), f"{after.isoformat()}|{after + dt.timedelta(days=7)}"
        return _told(after.isoformat())
    if modifier == "this" and weekday >= ref.weekday():
        return _told(in_week.isoformat())
    if _habitual(said):
        return in_week.isoformat(), ""
    tense = said.tense()
    if modifier == "this":
        told = {"past": in_week, "future": after}.get(tense)
    else:
        told = {"past": before, "future": after}.get(tense)
    # Without a tense, the key is the one of the week said, as it always was.
    return _told(told.isoformat()) if told else (in_week.isoformat(), "")


# Words of a sentence that makes a weekday any of them ("I swim on Monday, Wednesday and Friday",
# "- **Weekly**: write a note on Monday"): the BEAM dev chats' plans and routines.
_HABITUAL = frozenset({"every", "each", "weekly", "usually", "always", "often", "regularly",
                       "regular", "routine", "sometimes", "typically", "normally", "generally",
                       "whenever", "weeks", "mondays", "tuesdays", "wednesdays", "thursdays",
                       "fridays", "saturdays", "sundays", "weekends"})


def _habitual(said: _Said) -> bool:
    """Whether the sentence speaks of a habit, or the weekday stands in a list of them."""
    before, after = _around(said)
    if not _HABITUAL.isdisjoint(lowered_words(before) + lowered_words(after)):
        return True
    listed = re.match(r"\s*(?:,|and|or|&|/|-)\s*(?:(?:and|or)\s+)?" + _WEEKDAY, after)
    return listed is not None or re.search(_WEEKDAY + r"\s*(?:,|and|or|&|/)\s*(?:on\s+)?$",
                                           before) is not None


def _unit_day(ref: dt.date, count: int, unit: str) -> dt.date:
    """The day `count` units from `ref` (a month or a year as its first day)."""
    if unit == "day":
        return ref + dt.timedelta(days=count)
    if unit == "week":
        return ref + dt.timedelta(weeks=count)
    if unit == "month":
        return _shift_months(ref, count)
    return dt.date(ref.year + count, 1, 1)


def _at_unit(day: dt.date, unit: str) -> str:
    """A day at a unit's precision: a week as its Monday, a month, a year."""
    if unit == "week":
        return _monday(day).isoformat()
    return day.isoformat()[:{"day": 10, "month": 7, "year": 4}[unit]]


def _monday(day: dt.date) -> dt.date:
    return day - dt.timedelta(days=day.weekday())


def _ago(count_word: str, unit: str, said: _Said, ahead: bool) -> Resolved | None:
    """'3 days ago' is that day; 'two weeks ago' that week ('From July 24 to July 30' is how
    LoCoMo-Refined answers "two weeks ago" said on 11 August 2023); 'a year ago' the month a year
    back ('Around August 2022', said on 3 August 2023), 'five years ago' the year. A vague count
    ('a few days ago') is told as the span it names. 'in two weeks' is ahead, but only as a
    time to come: not in a past, negated or perfect sentence ("I read it in two days", "we
    haven't talked in a few days"), not of one unit ("52 books in a year"), not with other
    numbers or a purpose ("5,000 words in three days", "to finish it in 28 days"), not before
    'before', 'after', 'from' or 'or' ("a week before the event", "in a day or two")."""
    count, vague, ref = _count(count_word), count_word in VAGUE_COUNTS, said.ref
    if ahead and not _ahead_is_a_date(count_word, said):
        return None
    sign = 1 if ahead else -1
    day = _unit_day(ref, sign * count, unit)
    value = day.isoformat() if unit in ("day", "week") else _at_unit(day, unit)
    if vague:
        anchor = ref.isoformat() if unit in ("day", "week") else _at_unit(ref, unit)
        return value, (">" if ahead else "<") + anchor
    if unit == "year" and count == 1:
        return value, "~" + _shift_months(ref, 12 * sign).isoformat()[:7]
    return value, _at_unit(day, unit)


_NUMBER_WORDS = frozenset({"one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
                           "ten", "eleven", "twelve", "twenty", "thirty", "hundred", "thousand"})
# Words that make "in N days" a length of time rather than a time to come.
_WITHIN = frozenset({"not", "never", "per", "each", "every", "if", "only", "first", "than"})


def _ahead_is_a_date(count_word: str, said: _Said) -> bool:
    if count_word in ("a", "an", "one", "1"):
        return False
    if said.after() in ("before", "after", "from", "or", "earlier", "later", "of"):
        return False
    before, after = _around(said)
    words = lowered_words(before) + lowered_words(after)
    if any(w.endswith("n't") for w in words) or not _WITHIN.isdisjoint(words) \
            or _perfect(words) or not _NUMBER_WORDS.isdisjoint(words):
        return False
    if _ANY_DIGIT.search(before) or _ANY_DIGIT.search(after):
        return False  # a rate or an amount: "5,000 words in three days"
    if re.match(r"\s*(?:in order )?to\s", before):
        return False  # a purpose: "To finish the book in 28 days, ..."
    return said.tense() != "past"


def _since(hedge: str | None, count_word: str, unit: str, said: _Said, now: bool) -> Resolved | None:
    """'for 3 years now', 'seven years now', 'I've known them for 4 years': since the day said
    less that much, at the unit's precision (a year of one count as its month, "since about
    August 2022"); without 'for ... now', only in a present perfect sentence ("I've had them
    for 3 years"), never a past one ("he was with us for 10 years" ended we are not told
    when). A vague count ("for a few weeks now") is not a date."""
    if count_word in VAGUE_COUNTS:
        return None
    before, after = _around(said)
    if not now:  # the perfect of the clause the mention is in ("I've known them for 4 years")
        before, after = PARTS.split(before)[-1], PARTS.split(after)[0]
    words = lowered_words(before) + lowered_words(after)
    if not (now and said.lowered[said.start:said.start + 4] == "for ") and not _perfect(words):
        return None
    if "was" in words or "were" in words:
        return None
    count, ref = _count(count_word), said.ref
    if unit == "year" and count == 1:
        start = _shift_months(ref, -12).isoformat()[:7]
        return start, "+~" + start
    start = _at_unit(_unit_day(ref, -count, unit), unit)
    return start, ("+~" if hedge else "+") + start


_HAVE = frozenset({"have", "has", "i've", "we've", "you've", "they've", "haven't", "hasn't"})
_HAS = frozenset({"he's", "she's", "it's", "that's", "there's"})  # 's: has only before "been"


def _perfect(words: list[str]) -> bool:
    """Whether the words hold a present perfect: a form of 'have' and a participle after it
    ("I've had", "have been working", "has known"); not "I have a plan", not "have to"."""
    for i, word in enumerate(words[:-1]):
        if word in _HAS and words[i + 1] == "been":
            return True
        if word in _HAVE:
            for nxt in words[i + 1:i + 3]:  # a participle, perhaps after an adverb
                if nxt in ("been", "had") or nxt in IRREGULAR or (nxt.endswith("ed") and len(nxt) > 3):
                    return True
                if not (nxt.endswith("ly") or nxt in _ADVERBS):
                    break
    return False


_ADVERBS = frozenset({"just", "already", "only", "never", "ever", "not", "always", "since", "now",
                      "also", "still", "even", "all"})


def _around(said: _Said) -> tuple[str, str]:
    """The mention's sentence before and after it."""
    begin, stop = clause_bounds(said.lowered, said.start, said.end)
    return said.lowered[begin:said.start], said.lowered[said.end:stop]


def _relative_unit(the: bool, modifier: str, unit: str, said: _Said) -> Resolved | None:
    """Calendar weeks (Monday to Sunday: LoCoMo-Refined's answers to "last week" said on a
    Sunday are the week before the one that Sunday ends), weekends, months and years, each one
    step from the one said in. "last weekend" is the weekend of the week before the one said
    in, even on a Saturday or a Sunday; "this weekend" that of the week said in (on a Sunday, a
    weekend to come may also be the next, and both are told; with no tense, none); "next
    weekend" said Monday to Thursday may be the coming one or the one after, and both are told.
    A span from the day said ("the past week", "over the next month", "this past year") is told
    by its other end (`_span`); a part of another period ("the last week of July") is no
    date."""
    ref = said.ref
    if said.after() == "of":
        return None
    step = {"last": -1, "past": -1, "this past": -1, "this": 0, "next": 1}[modifier]
    old = _old_relative_unit(step, unit, ref)  # the key, as it always was
    spans = the or modifier in ("past", "this past")
    if unit == "weekend":
        monday = _monday(ref)
        if modifier in ("past", "this past"):
            told = ref - dt.timedelta(days=(ref.weekday() - 5) % 7 or 7)
            return old, told.isoformat()
        if the:
            return old, ""
        saturday = monday + dt.timedelta(days=5 + 7 * step)
        if step == 1 and ref.weekday() < 4:
            return old, f"{monday + dt.timedelta(days=5)}|{saturday}"
        if step == 0 and ref.weekday() == 6:  # on a Sunday, a weekend to come may be the next
            tense = said.tense()
            if tense != "past":
                later = saturday + dt.timedelta(days=7)
                return old, f"{saturday}|{later}" if tense == "future" else ""
        return old, saturday.isoformat()
    if spans:
        return old, _span(step, unit, said)
    if unit == "week":
        return old, (_monday(ref) + dt.timedelta(weeks=step)).isoformat()
    return old, old


def _span(step: int, unit: str, said: _Said) -> str:
    """'the past week' is the seven days to the day said, told as since the day a week back;
    'the last month' (or 'this past month') about the month to it, since about the month before
    ("so much has happened in the last month", said on 16 July 2023: LoCoMo dev's answer is June
    2023). 'the next week' is told nothing: in the BEAM dev chats it is as often the calendar
    week after ("plan for the next week") as the seven days to come, and in a past sentence it
    is of another time."""
    if step >= 0:
        return ""  # "plan for the next week" is as often the week after as the days to come
    if said.after() in ("before", "after", "or", "and", "to"):
        return ""
    if unit == "week":
        return "+" + (said.ref - dt.timedelta(weeks=1)).isoformat()
    return "+~" + _shift_months(said.ref, -1 if unit == "month" else -12).isoformat()[:7]


def _old_relative_unit(step: int, unit: str, ref: dt.date) -> str:
    if unit in ("week", "weekend"):
        return (ref + dt.timedelta(weeks=step)).isoformat()
    if unit == "month":
        return _shift_months(ref, step).isoformat()[:7]
    return _year(ref.year + step)


def _year(year: int) -> str:
    """A year as the dates are written ("2023"); one the calendar does not hold is refused."""
    if not 1 <= year <= 9999:
        raise ValueError(f"year {year} is outside the calendar")
    return f"{year:04d}"


def _season(modifier: str, season: str, said: _Said) -> Resolved | None:
    """'last summer' is the latest summer over before the day said (said on 11 August 2023,
    summer 2022; on 26 December 2023, summer 2023: LoCoMo dev's answers to both), but said in
    the season right after it ("last summer", said in September) it may be the one before, and
    both are told; 'next summer' the first to start after the day said, and said in the season
    right before it (in spring) the one after that too; 'this summer' the one going on, else by
    the tense the latest over or the first to come, else nothing."""
    if said.before() == ["the"]:
        return None
    ref, first = said.ref, SEASONS[season]
    spans = [span for span in (_season_span(year, first)
                               for year in range(ref.year - 2, ref.year + 2)) if span]
    current = next((s for s, end in spans if s <= ref < end), None)
    ended = [(s, end) for s, end in spans if end <= ref]
    coming = [s for s, _ in spans if s > ref]
    if modifier in ("last", "past", "this past"):
        if not ended:
            return None
        latest, end = ended[-1]
        if ref < _shift_months(end, 3) and len(ended) > 1 and modifier == "last":
            return _year(latest.year), f"{_year(latest.year)}|{_year(ended[-2][0].year)}"
        return _told(_year(latest.year))
    if modifier == "next":
        if not coming:
            return None
        upcoming = coming[0]
        if current is None and ref >= _shift_months(upcoming, -3) and len(coming) > 1:
            return _year(upcoming.year), f"{_year(upcoming.year)}|{_year(coming[1].year)}"
        return _told(_year(upcoming.year))
    if current is not None:
        return _told(_year(current.year))
    this_year = [s for s, _ in spans if s.year == ref.year]
    tense = said.tense()
    if tense == "past" and ended:
        return _told(_year(ended[-1][0].year))
    if tense == "future" and coming:
        return _told(_year(coming[0].year))
    return (_year(this_year[0].year), "") if this_year else None


def _season_span(year: int, first_month: int) -> tuple[dt.date, dt.date] | None:
    """A season's first day and the day after its last, or None past the calendar."""
    try:
        start = dt.date(year, first_month, 1)
        return start, _shift_months(start, 3)
    except ValueError:
        return None


# Words after "may" that make it the verb.
_VERBS = frozenset({"be", "have", "not", "need", "want", "also", "still", "never", "take", "help",
                    "seem", "feel", "find", "get", "make", "look", "come", "go", "well", "just"})


def _month_name(modifier: str, month: int, phrase: str, said: _Said) -> Resolved | None:
    """'in June' may be the last June or the next, and is not told; its key is the latest June
    up to the month said in (as a question's "in June" is read). 'last June' is the latest
    before the month said in ("Last August", said on 8 December 2023: LoCoMo dev's answer is
    August 2023), 'next June' the first after it, 'this June' the one of the year said in:
    those are told. Of the month just before or after the one said in ("last April" said in
    May, where "last month" would do), the year before or after may be meant, and both are."""
    ref = said.ref
    if phrase.startswith("this may") or (phrase.endswith(" may") and said.after() in _VERBS):
        return None  # "this may be", "the last may have": the verb, not the month
    if modifier in ("last", "this past"):
        year = ref.year if month < ref.month else ref.year - 1
        told = f"{_year(year)}-{month:02d}"
        if month == _shift_months(ref, -1).month and modifier == "last":
            told += f"|{_year(year - 1)}-{month:02d}"
        return f"{_year(year)}-{month:02d}", told
    if modifier == "next":
        year = ref.year if month > ref.month else ref.year + 1
        told = f"{_year(year)}-{month:02d}"
        if month == _shift_months(ref, 1).month:
            told += f"|{_year(year + 1)}-{month:02d}"
        return f"{_year(year)}-{month:02d}", told
    if modifier == "this":
        return _told(f"{_year(ref.year)}-{month:02d}")
    year = ref.year if month <= ref.month else ref.year - 1
    return f"{_year(year)}-{month:02d}", ""


def _day_of_month(day: int, which: str | None, said: _Said) -> Resolved | None:
    """'on the 15th' said on 17 August in a past sentence is 15 August; in a future one, the
    next 15th; 'of next month' says which. Nothing when the tense does not say, or when the word
    after it makes it something else ("the 15th floor", "until the 23rd person")."""
    if said.before() not in _BEFORE_A_DAY or (which is None and said.after() not in _AFTER_A_DAY):
        return None
    ref = said.ref
    if which is not None:
        month = _shift_months(ref, {"this": 0, "next": 1, "last": -1}[which])
        return _told(_safe_date(month.year, month.month, day))
    tense = said.tense()
    if tense == "past":
        month = ref if day <= ref.day else _shift_months(ref, -1)
    elif tense == "future":
        month = ref if day >= ref.day else _shift_months(ref, 1)
    else:
        return None
    return _told(_safe_date(month.year, month.month, day))


# The word before a day of the month named alone, and the words that may follow it ("on the
# 15th after my trip"; not "the 15th floor", "until the 23rd person").
_BEFORE_A_DAY = [[word] for word in ("on", "by", "until", "till", "before", "after", "since", "from")]
_AFTER_A_DAY = frozenset({"", "after", "and", "at", "before", "but", "for", "in", "or", "so",
                          "then", "to", "until", "when", "while", "with", "because", "i", "we",
                          "he", "she", "they", "you", "it", "which", "as", "this", "that"})


# ---- the kinds -----------------------------------------------------------------------------------

class DateMention(NamedTuple):
    """A date a text mentions: where (`start`, `end` in the text), how (`kind`, a name of
    _PATTERNS), which (`value`, ISO at the precision the text gives: a date key) and what a
    reader is told of it (`told`, in the form the module's docstring gives; '' for nothing)."""

    start: int
    end: int
    kind: str
    value: str
    told: str = ""


# Kinds read from the words alone, whatever the reference time ("13 March, 2023", "May 2023");
# the others are read against it ("yesterday", "last week", "in June").
ABSOLUTE_KINDS = frozenset({"iso", "day_month_year", "month_day_year", "month_year", "year"})
# Kinds whose day a reader of the text alone may be told (memory/reader_view.py), when the
# mention's `told` says something: those relative to the day said ("today" is that day itself; a
# month named alone, "in June", may be the last one or the next, and is left as written), and a
# day named without its year.
TOLD_KINDS = frozenset({"yesterday", "tomorrow", "two_days", "other_day", "weekday", "ago",
                        "ahead", "since_now", "since_for", "relative_unit", "season", "month_name",
                        "day_of_month", "day_month", "month_day"})
# Kinds that name a time relative to the reference day.
RELATIVE_KINDS = frozenset({"yesterday", "today", "tomorrow", "two_days", "other_day", "weekday",
                            "ago", "ahead", "since_now", "since_for", "relative_unit", "season",
                            "month_name", "day_of_month"})


def extract_dates(text: str, reference_ms: int | None,
                  words: frozenset[str] | None = None) -> list[str]:
    r"""Every date the text mentions, resolved against the message time (UTC), in text order,
    without repeats. Spans already read by a more specific pattern are not read again.
    `words`: an ASCII text's lowercase words (`\w` runs), when the caller has them."""
    return list(dict.fromkeys(m.value for m in date_mentions(text, reference_ms, words)))


def date_mentions(text: str, reference_ms: int | None,
                  words: frozenset[str] | None = None) -> list[DateMention]:
    """Every date the text mentions (`extract_dates`), with where and how, in text order. A
    relative date inside double quotes is told nothing: its "tomorrow" is of when the quote was
    said, which the message does not say (the BEAM dev chats quote drafts and scripts to be sent
    some other day: 'Example: "Let's check in again tomorrow"'); a day named without its year is
    told there too."""
    ref = reference_day(reference_ms)
    if ref is None:
        return []
    lowered = text.lower()
    # One flag per character read by a pattern: checking a match costs its own length, so the
    # work stays linear in the text however many dates it holds.
    taken = bytearray(len(lowered))
    found: list[DateMention] = []
    present = _present(lowered, words)
    for kind, pattern in _PATTERNS:
        if not _NEEDS[kind] <= present:
            continue
        for m in _at_word_starts(pattern, lowered):
            if any(taken[m.start():m.end()]):
                continue
            resolved = _resolve(kind, m, _Said(ref, lowered, m.start(), m.end(), text))
            if resolved:
                taken[m.start():m.end()] = b"\x01" * (m.end() - m.start())
                found.append(DateMention(m.start(), m.end(), kind, *resolved))
    found = [m._replace(told="") if m.told and m.kind in RELATIVE_KINDS and _a_title(text, m)
             else m for m in found]
    if any(m.told for m in found) and ('"' in text or "\u201c" in text):
        quoted = _quoted(text)
        found = [m._replace(told="") if m.kind in RELATIVE_KINDS and quoted(m.start) else m
                 for m in found]
    return sorted(found)


def _a_title(text: str, mention: DateMention) -> bool:
    """Whether a relative date is written as a name's words, capitalised after a lowercase word
    ("a book called Next Year in Havana"), rather than as a time."""
    words = text[mention.start:mention.end].split()
    before = text[max(0, mention.start - 30):mention.start].rstrip()
    return all(w[:1].isupper() for w in words) and before[-1:].isalpha() and before[-1:].islower()


def reference_day(reference_ms: int | None) -> dt.date | None:
    """The UTC day of a time in milliseconds (today when None); None outside the calendar."""
    if reference_ms is None:
        return dt.date.today()
    days = reference_ms // 86_400_000
    ordinal = _EPOCH_ORDINAL + days
    return dt.date.fromordinal(ordinal) if 1 <= ordinal <= _LAST_ORDINAL else None


_QUOTE_MARKS = re.compile('["\u201c\u201d\n]')


def _quoted(text: str) -> Callable[[int], bool]:
    """Whether a place in the text is inside double quotes ("..." or curly), paired in order
    within a line; an unpaired mark opens nothing."""
    spans: list[tuple[int, int]] = []
    opened = -1
    for mark in _QUOTE_MARKS.finditer(text):
        at, char = mark.start(), mark.group()
        if char == "\n":
            opened = -1
        elif char == "\u201c" or (char == '"' and opened < 0):
            opened = at
        elif opened >= 0:
            spans.append((opened, at))
            opened = -1
    return lambda place: any(s < place < e for s, e in spans)


def _at_word_starts(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    r"""The matches `\b` + pattern would find: the pattern's every match starts with a word
    character, so it starts at a word boundary when no word character comes before it; a match
    that does not is passed over one character on, as the `\b` would have been."""
    at = 0
    while (m := pattern.search(text, at)) is not None:
        start = m.start()
        if start and (text[start - 1].isalnum() or text[start - 1] == "_"):
            at = start + 1
            continue
        yield m
        at = m.end()


def covers(period: str, date: str) -> bool:
    """True when a date ('2023-05-20', '2023-05' or '2023') falls within a period of any precision,
    or the period within it: '2023-05' covers '2023-05-20', and '2023-05-20' meets '2023-05'."""
    return date.startswith(period) or period.startswith(date)


def iso_utc(ms: int) -> str:
    """ISO 8601 in UTC with a Z; milliseconds only when there are any (every time in an answer)."""
    moment = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)
    return moment.isoformat(timespec="milliseconds" if ms % 1000 else "seconds") + "Z"


_DAY_MS = 86_400_000
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_LAST_ORDINAL = dt.date.max.toordinal()


def period_span_ms(period: str) -> tuple[int, int] | None:
    """The first and last millisecond (UTC) of a period as extract_dates writes it ("2021",
    "2021-03", "2021-03-05"); None for anything else. Day numbers, not dates, carry the sums, so
    31 December 9999 has its last millisecond too."""
    days = _period_days(period)
    if days is None:
        return None
    first, last = days
    return (first - _EPOCH_ORDINAL) * _DAY_MS, (last + 1 - _EPOCH_ORDINAL) * _DAY_MS - 1


def period_end_ms(period: str) -> int | None:
    """The last millisecond (UTC) of a period as extract_dates writes it; None for anything
    else."""
    span = period_span_ms(period)
    return span[1] if span else None


def _period_days(period: str) -> tuple[int, int] | None:
    """The first and last day (proleptic ordinals) of a period, or None."""
    parts = period.split("-")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() and p.isascii() for p in parts):
        return None
    numbers = [int(p) for p in parts]
    try:
        if len(numbers) == 1:
            return dt.date(numbers[0], 1, 1).toordinal(), dt.date(numbers[0], 12, 31).toordinal()
        first = dt.date(numbers[0], numbers[1], numbers[2] if len(numbers) == 3 else 1)
    except (ValueError, OverflowError):
        return None
    if len(numbers) == 3:
        return first.toordinal(), first.toordinal()
    if numbers[1] == 12:
        return first.toordinal(), dt.date(numbers[0], 12, 31).toordinal()
    return first.toordinal(), dt.date(numbers[0], numbers[1] + 1, 1).toordinal() - 1
