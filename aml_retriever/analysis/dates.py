"""Dates in text: absolute ones read as written, relative ones resolved against the message time.

"last Saturday" in a message of Thursday 25 May 2023 is Saturday 20 May 2023, so a question about
"May 2023", or a "when" question, can find the message that never spelled the date out. Results are
ISO strings at the precision the text gives: "2023-05-20" (a day), "2023-05" (a month), "2023" (a
year). Pure functions; the table of cases is in tests/test_dates.py.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from typing import NamedTuple

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
                 "couple": 2, "a couple of": 2, "few": 3, "a few": 3, "several": 3}

_MONTH = (r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|"
          r"sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:19|20)\d{2})"
_COUNT = (r"(\d+|a couple of|a few|an|a|one|two|three|four|five|six|seven|eight|nine|ten|eleven|"
          r"twelve|couple|few|several)")

# A pattern runs only on text that holds what every match of it must hold: a digit, a year
# (19xx or 20xx), a month's name, a hyphen, or one of its cue words. Most messages hold no date,
# and long ones hold a digit somewhere: checking for a month's name and a year too spares most of
# the 14 patterns on a long message (2,000 messages of over 200 words from the public dev splits:
# 1.5-1.7 -> 0.74-0.89 ms each; every feature of a message 3.2-3.3 -> 2.2-2.6 ms), at the cost
# of a few substring checks. What the patterns find is unchanged (the same dates for all 194,856
# texts of the dev splits).
_ANY_DIGIT = re.compile(r"\d")
_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_CUES: dict[str, tuple[str, ...]] = {
    "yesterday": ("yesterday", "last night"),
    "today": ("today", "tonight", "this morning", "this afternoon", "this evening"),
    "tomorrow": ("tomorrow",),
    "weekday": ("day",),
    "ago": ("ago",),
    "ahead": ("day", "week", "month", "year"),
    "relative_unit": ("week", "month", "year"),
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
    **{kind: frozenset({kind}) for kind in _CUES},
}


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
    present = {kind for kind, cues in _CUES.items() if any(c in lowered for c in cues)}
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
    ("yesterday", re.compile(r"(yesterday|last night)\b")),
    ("today", re.compile(r"(today|tonight|this morning|this afternoon|this evening)\b")),
    ("tomorrow", re.compile(r"tomorrow\b")),
    ("weekday", re.compile(r"(last|this past|past|next|this|on)\s+"
                           r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b")),
    ("ago", re.compile(_COUNT + r"\s+(day|week|month|year)s?\s+ago\b")),
    ("ahead", re.compile(r"in\s+" + _COUNT + r"\s+(day|week|month|year)s?\b")),
    ("relative_unit", re.compile(r"(last|next|this|past)\s+(week|weekend|month|year)\b")),
    ("month_name", re.compile(r"(?:in|last|this|next|since|during)\s+" + _MONTH + r"\b")),
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


def _resolve(kind: str, m: re.Match[str], ref: dt.date) -> str | None:
    """The date a match names, or None when it names none a calendar holds ("tomorrow" said on
    31 December 9999, "in 99999999 days")."""
    try:
        return _resolved(kind, m, ref)
    except (OverflowError, ValueError):
        return None


def _resolved(kind: str, m: re.Match[str], ref: dt.date) -> str | None:
    g = m.groups()
    if kind == "iso":
        return _safe_date(int(g[0]), int(g[1]), int(g[2]))
    if kind == "day_month_year":
        return _safe_date(int(g[2]), _month(g[1]), int(g[0]))
    if kind == "month_day_year":
        return _safe_date(int(g[2]), _month(g[0]), int(g[1]))
    if kind == "month_year":
        return f"{int(g[1]):04d}-{_month(g[0]):02d}"
    if kind in ("day_month", "month_day"):
        day, month = (int(g[0]), _month(g[1])) if kind == "day_month" else (int(g[1]), _month(g[0]))
        return _safe_date(ref.year, month, day)
    if kind == "year":
        return g[0]
    if kind in ("yesterday", "today", "tomorrow"):
        return (ref + dt.timedelta(days={"yesterday": -1, "today": 0, "tomorrow": 1}[kind])).isoformat()
    if kind == "weekday":
        return _weekday(g[0], WEEKDAYS[g[1]], ref)
    if kind == "ago":
        return _ago(_count(g[0]), g[1], ref)
    if kind == "ahead":
        return _ago(-_count(g[0]), g[1], ref)
    if kind == "relative_unit":
        return _relative_unit(g[0], g[1], ref)
    if kind == "month_name":
        if m.group(0).startswith("this may"):  # "this may be": the verb, not the month
            return None
        month = _month(g[0])
        year = ref.year if month <= ref.month or "next" in m.group(0) else ref.year - 1
        return f"{year:04d}-{month:02d}"
    return None


def _weekday(modifier: str, weekday: int, ref: dt.date) -> str:
    """'last Saturday' is the most recent Saturday strictly before the reference day; 'next' the
    first one after it; 'this'/'on' the one in the reference week (Monday to Sunday)."""
    if modifier == "next":
        delta = (weekday - ref.weekday()) % 7 or 7
        return (ref + dt.timedelta(days=delta)).isoformat()
    delta = (ref.weekday() - weekday) % 7 or 7
    if modifier in ("this", "on") and weekday >= ref.weekday():
        delta = -(weekday - ref.weekday())
    return (ref - dt.timedelta(days=delta)).isoformat()


def _ago(count: int, unit: str, ref: dt.date) -> str:
    if unit == "day":
        return (ref - dt.timedelta(days=count)).isoformat()
    if unit == "week":
        return (ref - dt.timedelta(weeks=count)).isoformat()
    if unit == "month":
        return _shift_months(ref, -count).isoformat()[:7]
    return _year(ref.year - count)


def _year(year: int) -> str:
    """A year as the dates are written ("2023"); one the calendar does not hold is refused."""
    if not 1 <= year <= 9999:
        raise ValueError(f"year {year} is outside the calendar")
    return f"{year:04d}"


def _relative_unit(modifier: str, unit: str, ref: dt.date) -> str:
    step = {"last": -1, "past": -1, "this": 0, "next": 1}[modifier]
    if unit in ("week", "weekend"):
        return (ref + dt.timedelta(weeks=step)).isoformat()
    if unit == "month":
        return _shift_months(ref, step).isoformat()[:7]
    return _year(ref.year + step)


class DateMention(NamedTuple):
    """A date a text mentions: where (`start`, `end` in the text), how (`kind`, a name of
    _PATTERNS) and which (`value`, ISO at the precision the text gives)."""

    start: int
    end: int
    kind: str
    value: str


# Kinds read from the words alone, whatever the reference time ("13 March, 2023", "May 2023");
# the others are read against it ("yesterday", "last week", "in June").
ABSOLUTE_KINDS = frozenset({"iso", "day_month_year", "month_day_year", "month_year", "year"})
# Kinds whose day a reader of the text alone must be told (memory/reader_view.py): those relative
# to the day said ("today" is that day itself; a month named alone, "in June", may be the last
# one or the next, and is left as written), and a day named without its year.
TOLD_KINDS = frozenset({"yesterday", "tomorrow", "weekday", "ago", "ahead", "relative_unit",
                        "day_month", "month_day"})
# Kinds that name a time relative to the reference day.
RELATIVE_KINDS = frozenset({"yesterday", "today", "tomorrow", "weekday", "ago", "ahead",
                            "relative_unit", "month_name"})


def extract_dates(text: str, reference_ms: int | None,
                  words: frozenset[str] | None = None) -> list[str]:
    r"""Every date the text mentions, resolved against the message time (UTC), in text order,
    without repeats. Spans already read by a more specific pattern are not read again.
    `words`: an ASCII text's lowercase words (`\w` runs), when the caller has them."""
    return list(dict.fromkeys(m.value for m in date_mentions(text, reference_ms, words)))


def date_mentions(text: str, reference_ms: int | None,
                  words: frozenset[str] | None = None) -> list[DateMention]:
    """Every date the text mentions (`extract_dates`), with where and how, in text order."""
    ref = (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=reference_ms)).date() \
        if reference_ms is not None else dt.date.today()
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
            value = _resolve(kind, m, ref)
            if value:
                taken[m.start():m.end()] = b"\x01" * (m.end() - m.start())
                found.append(DateMention(m.start(), m.end(), kind, value))
    return sorted(found)


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


def period_span_ms(period: str) -> tuple[int, int] | None:
    """The first and last millisecond (UTC) of a period as extract_dates writes it; None for
    anything else."""
    end = period_end_ms(period)
    if end is None:
        return None
    year, month, day = (int(p) for p in [*period.split("-"), "1", "1"][:3])
    return (dt.date(year, month, day) - dt.date(1970, 1, 1)).days * 86_400_000, end


def period_end_ms(period: str) -> int | None:
    """The last millisecond (UTC) of a period as extract_dates writes it ("2021", "2021-03",
    "2021-03-05"); None for anything else."""
    parts = period.split("-")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        return None
    year, month, day = (int(p) for p in [*parts, "0", "0"][:3])
    try:
        if len(parts) == 1:
            after = dt.date(year + 1, 1, 1)
        elif len(parts) == 2:
            after = _shift_months(dt.date(year, month, 1), 1)
        else:
            after = dt.date(year, month, day) + dt.timedelta(days=1)
    except ValueError:
        return None
    return (after - dt.date(1970, 1, 1)).days * 86_400_000 - 1
