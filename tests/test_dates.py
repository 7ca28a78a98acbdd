"""Dates in text resolve against the message time, at the precision the text gives."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aml_retriever.analysis.dates import _PATTERNS, _at_word_starts, covers, extract_dates
from aml_retriever.engine.query import plan

THURSDAY_25_MAY_2023 = int(dt.datetime(2023, 5, 25, 14, 0, tzinfo=dt.UTC).timestamp() * 1000)


@pytest.mark.parametrize("text,expected", [
    ("I went hiking last Saturday", ["2023-05-20"]),
    ("we met yesterday", ["2023-05-24"]),
    ("last night was loud", ["2023-05-24"]),
    ("the party is tonight", ["2023-05-25"]),
    ("see you tomorrow", ["2023-05-26"]),
    ("two weeks ago we moved", ["2023-05-11"]),
    ("3 days ago", ["2023-05-22"]),
    ("a couple of days ago", ["2023-05-23"]),
    ("a month ago", ["2023-04"]),
    ("two years ago", ["2021"]),
    ("last week", ["2023-05-18"]),
    ("next week", ["2023-06-01"]),
    ("last month", ["2023-04"]),
    ("next month", ["2023-06"]),
    ("last year", ["2022"]),
    ("next Monday", ["2023-05-29"]),
    ("last Thursday", ["2023-05-18"]),
    ("on Tuesday", ["2023-05-23"]),
    ("on 7 May 2023", ["2023-05-07"]),
    ("May 7th, 2023", ["2023-05-07"]),
    ("the 3rd of June 2022", ["2022-06-03"]),
    ("2023-05-07", ["2023-05-07"]),
    ("in May 2023", ["2023-05"]),
    ("in 2019", ["2019"]),
    ("since March", ["2023-03"]),
    ("in December", ["2022-12"]),
    ("next December", ["2023-12"]),
    ("on 31 February 2023", ["2023-02"]),  # no such day: the month still stands
    ("this may be nothing", []),
    ("nothing temporal here", []),
    ("yesterday and last Saturday", ["2023-05-24", "2023-05-20"]),
])
def test_dates_resolve_against_the_message_time(text, expected):
    assert extract_dates(text, THURSDAY_25_MAY_2023) == expected


def test_a_specific_date_is_not_read_again_as_a_vaguer_one():
    assert extract_dates("on 7 May 2023", THURSDAY_25_MAY_2023) == ["2023-05-07"]


@pytest.mark.parametrize("period,date,expected", [
    ("2023-05", "2023-05-20", True), ("2023", "2023-05-20", True), ("2023-05-20", "2023-05", True),
    ("2023-06", "2023-05-20", False), ("2022", "2023", False),
])
def test_covers_compares_periods_of_any_precision(period, date, expected):
    assert covers(period, date) is expected


# Words the date patterns are made of, glued to letters, digits and marks in every way, so each
# pattern meets matches that start inside a word (which `\b` refuses) next to ones that do not.
_DATE_PIECES = ["in", "of", "2023", "1999", "may", "june", "3rd", "12", "last", "this", "past",
                "next", "monday", "week", "weekend", "ago", "a", "few", "yesterday", "today",
                "tomorrow", "since", "during", "year", "on", "sept", "2023-05-01", "x", "_", "é",
                "١٢", "-", ",", ".", " "]


@example(["x", "this", "past", "monday"], [""] + [" "] * 15)  # a refused start hides a match
@given(st.lists(st.sampled_from(_DATE_PIECES), max_size=16),
       st.lists(st.sampled_from(["", " ", "  ", "x", "\n"]), min_size=16, max_size=16))
@settings(max_examples=400, deadline=None)
def test_each_pattern_finds_what_it_finds_after_a_word_boundary(pieces, gaps):
    """The patterns search without a leading `\\b` (the search skips to their first letters at C
    speed) and `_at_word_starts` keeps the matches a `\\b` would: the same spans, in order."""
    text = "".join(piece + gap for piece, gap in zip(pieces, gaps, strict=False))
    for _, pattern in _PATTERNS:
        bounded = re.compile(r"\b" + pattern.pattern)
        assert [m.span() for m in _at_word_starts(pattern, text)] == \
            [m.span() for m in bounded.finditer(text)]


@pytest.mark.parametrize("text", ["see you tomorrow", "in two weeks", "next year", "in 99999999999 days",
                                  "99999999999 days ago", "next month"])
def test_a_date_past_the_calendar_is_no_date(text: str) -> None:
    """Said on the last day a timestamp may name (31 December 9999) or the first (1 January 1),
    a date beyond the calendar resolves to none instead of failing the Add."""
    last = int(dt.datetime(9999, 12, 31, 23, 59, tzinfo=dt.UTC).timestamp() * 1000)
    first = int(dt.datetime(1, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)
    for moment in (last, first):
        assert all(len(d) in (4, 7, 10) for d in extract_dates(text, moment))
    assert extract_dates("see you tomorrow", THURSDAY_25_MAY_2023) == ["2023-05-26"]  # control


MONDAY_13_MARCH_2023 = int(dt.datetime(2023, 3, 13, 10, 0, tzinfo=dt.UTC).timestamp() * 1000)


@pytest.mark.parametrize("text,expected", [
    # Keys that rank stay as they were where only the note changed (ranking unchanged).
    ("last week", ["2023-03-06"]), ("last weekend", ["2023-03-06"]), ("a few days ago", ["2023-03-10"]),
    ("two weeks ago", ["2023-02-27"]), ("a year ago", ["2022"]), ("the past week", ["2023-03-06"]),
    # Keys fixed with the note: a weekday by its tense, a day without its year by its nearness.
    ("I hosted a class on Friday.", ["2023-03-10"]), ("I'll host a class on Friday.", ["2023-03-17"]),
    # New keys: lengths of time up to now, seasons, days of the month, the other day.
    ("I've had it for 3 years now.", ["2020"]), ("I've known her for six months.", ["2022-09"]),
    ("last summer", ["2022"]), ("I met them on the 9th.", ["2023-03-09"]),
    ("the day before yesterday", ["2023-03-11"]), ("the other day", ["2023-03-13"]),
    # No longer dates: a length of time, a title, a verb.
    ("I read 52 books in a year.", []), ("We walked 20 km in two days.", []),
    ("Android 14 may ship soon.", []), ("the last week of April", []),
])
def test_the_keys_of_relative_dates(text: str, expected: list[str]) -> None:
    assert extract_dates(text, MONDAY_13_MARCH_2023) == expected


@pytest.mark.parametrize("text,said,expected", [
    ("On December 28 I went to the opera.", (2024, 1, 2), ["2023-12-28"]),
    ("On January 5 I fly out.", (2023, 12, 31), ["2024-01-05"]),
    ("The show is on 20 May.", (2023, 5, 8), ["2023-05-20"]),
])
def test_a_day_without_its_year_is_the_nearest_one(text: str, said: tuple[int, int, int],
                                                   expected: list[str]) -> None:
    moment = int(dt.datetime(*said, 12, tzinfo=dt.UTC).timestamp() * 1000)
    assert extract_dates(text, moment) == expected


@pytest.mark.parametrize("question", ["What did I do last summer?", "What did I do on the 15th?",
                                      "What have I done for 3 years now?", "Who did I see the other day?",
                                      "What happened the day before yesterday?"])
def test_a_question_s_new_relative_dates_name_no_period(question: str) -> None:
    """The kinds added are relative to the asking (dates.RELATIVE_KINDS): a question's plan
    names no period from them, as from "last week"."""
    assert plan(question, now_ms=MONDAY_13_MARCH_2023).dates == ()
    assert plan("What did I do on 9 March?", now_ms=MONDAY_13_MARCH_2023).dates == ("2023-03-09",)
