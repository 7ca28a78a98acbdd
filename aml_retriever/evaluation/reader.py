"""What a reader of the results sees beside the evidence: the date a temporal question asks for,
and who spoke. Pure functions over the returned items' text, no I/O.

A leaderboard's reader reads the text of the returned items, in order, and nothing else: no
`created_at`, no `role`, no `session_id`. "When did Caroline go to the support group?" (gold
"7 May 2023") is answerable only when that text writes the date, since the evidence itself says
"yesterday" and its date lives in the message's timestamp; a question that names a person is
answerable only when the text says who spoke.

  date visible     questions flagged temporal (LoCoMo's category 2) whose gold answer names a
                   date: 1 when the result holding the first evidence turn found (in the
                   question's evidence order) writes that date at the answer's granularity (day,
                   month or year), anywhere before the end of the evidence's line, in a usual
                   rendering (2023-05-07, "7 May 2023", "May 7th, 2023", "Sun, 7 May 2023", ...)
  speaker visible  questions naming the speaker of one of their evidence turns (the speaker's
                   first name, as a whole word): 1 when the result holding the first such turn
                   found names the speaker on that turn's own line, before the turn or inside it

Both are None where they do not apply (no temporal flag, no date in the answer, no speaker
known or named) and 0 when the evidence is not returned. They are the measures of the shared
evaluation kit (`reader.py` beside its `metrics.py`), written again here so that a run needs
nothing outside the package.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

# (year, month or None, day or None): a date at the granularity it was written.
Date = tuple[int, int | None, int | None]

_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december")
MONTH_NUMBERS: dict[str, int] = ({name: i for i, name in enumerate(_MONTHS, 1)}
                                 | {name[:3]: i for i, name in enumerate(_MONTHS, 1)} | {"sept": 9})
# One capturing group, the month's name; an abbreviation may end with a full stop ("Sept.").
_MONTH = (r"(january|february|march|april|may|june|july|august|september|october|november|december|"
          r"jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?")
_ORDINAL = r"(?:st|nd|rd|th)?"
# A bare year counts only in the range a conversation's dates fall in, so that "1200 steps" or
# "4815" is not read as a year.
_YEAR = r"\b(1[89]\d\d|20\d\d)\b"


def _day_month_year(m: re.Match[str]) -> Date:
    return int(m.group(3)), MONTH_NUMBERS[m.group(2)], int(m.group(1))


def _month_day_year(m: re.Match[str]) -> Date:
    return int(m.group(3)), MONTH_NUMBERS[m.group(1)], int(m.group(2))


def _iso(m: re.Match[str]) -> Date:
    return int(m.group(1)), int(m.group(2)), int(m.group(3)) if m.group(3) else None


def _month_year(m: re.Match[str]) -> Date:
    return int(m.group(2)), MONTH_NUMBERS[m.group(1)], None


def _year(m: re.Match[str]) -> Date:
    return int(m.group(1)), None, None


_Reading = tuple[re.Pattern[str], Callable[[re.Match[str]], Date]]
# How a gold answer names its date, tried in this order (the finest first): the first that
# matches decides the answer's date and its granularity. Commas are spaces by then.
_ANSWER_DATES: tuple[_Reading, ...] = (
    (re.compile(rf"\b(\d{{1,2}}){_ORDINAL}\s+{_MONTH}\s+(\d{{4}})\b"), _day_month_year),
    (re.compile(rf"\b{_MONTH}\s+(\d{{1,2}}){_ORDINAL}\s+(\d{{4}})\b"), _month_day_year),
    (re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b"), _iso),
    (re.compile(rf"\b{_MONTH}\s+(\d{{4}})\b"), _month_year),
    (re.compile(_YEAR), _year),
)
# Every way a result's text may write a date; all of them are read (a day also writes its month
# and year, so a coarser answer finds them too).
_TEXT_DATES: tuple[_Reading, ...] = (
    (re.compile(r"\b(\d{4})-(\d{2})(?:-(\d{2}))?\b"), _iso),
    (re.compile(rf"\b(\d{{1,2}}){_ORDINAL}\s+{_MONTH},?\s+(\d{{4}})\b"), _day_month_year),
    (re.compile(rf"\b{_MONTH}\s+(\d{{1,2}}){_ORDINAL},?\s+(\d{{4}})\b"), _month_day_year),
    (re.compile(rf"\b{_MONTH},?\s+(\d{{4}})\b"), _month_year),
    (re.compile(_YEAR), _year),
)


def gold_date(answer: str) -> Date | None:
    """The first date an answer names, at the granularity it names it, or None."""
    text = answer.lower().replace(",", " ")
    for pattern, read in _ANSWER_DATES:
        m = pattern.search(text)
        if m:
            return read(m)
    return None


def dates_written(text: str) -> set[Date]:
    """Every date a text writes, in any of the usual renderings."""
    lowered = text.lower()
    return {read(m) for pattern, read in _TEXT_DATES for m in pattern.finditer(lowered)}


def shows_date(text: str, gold: Date) -> bool:
    """Whether the text writes the gold date at the gold's granularity: its year, and its month
    and day when the gold has them."""
    year, month, day = gold
    return any(y == year and (month is None or (m == month and (day is None or d == day)))
               for y, m, d in dates_written(text))


def _normalise_lines(text: str) -> str:
    """Whitespace runs as one space within each line; the lines themselves are kept, since both
    measures read the evidence's own line."""
    return "\n".join(" ".join(line.split()) for line in text.split("\n"))


def locate(evidence: str, contents: Sequence[str]) -> tuple[str, int, int] | None:
    """(text, start, end) of the evidence in the first returned item that holds it, the item's
    lines kept (whitespace runs inside them as one space); None when no item holds it."""
    needle = " ".join(evidence.split())
    if not needle:
        return None
    for content in contents:
        text = _normalise_lines(content)
        at = text.find(needle)
        if at >= 0:
            return text, at, at + len(needle)
        if needle in " ".join(text.split()):
            # The item holds the evidence across a line break: found, and the whole item counts
            # as its line.
            return text, 0, len(text)
    return None


def date_visible(temporal: bool, answer: str, evidence: Sequence[str],
                 contents: Sequence[str]) -> float | None:
    """1/0 for a temporal question whose answer names a date, else None."""
    gold = gold_date(answer) if temporal else None
    if gold is None:
        return None
    for text in evidence:
        found = locate(text, contents)
        if found:
            item, _, end = found
            line_end = item.find("\n", end)
            return float(shows_date(item if line_end < 0 else item[:line_end], gold))
    return 0.0


def _first_name(speaker: str) -> str:
    words = speaker.split()
    return words[0] if words else ""


def _names(name: str, text: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", text) is not None


def speaker_visible(question: str, evidence: Sequence[tuple[str, str]],
                    contents: Sequence[str]) -> float | None:
    """evidence: (content, speaker's name or "") of each evidence turn. 1/0 when the question
    names the speaker of one of them, else None."""
    named = [(text, _first_name(speaker)) for text, speaker in evidence
             if _first_name(speaker) and _names(_first_name(speaker), question)]
    if not named:
        return None
    for text, name in named:
        found = locate(text, contents)
        if found:
            item, start, end = found
            line_start = item.rfind("\n", 0, start) + 1
            return float(_names(name, item[line_start:end]))
    return 0.0
