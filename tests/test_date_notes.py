"""The reader's notes (memory/reader_view.py, from analysis/dates.py): a reader believes every
note, so each is exactly as precise as its phrase or is not written.

What must hold: the view writes exactly the notes of the judged fixture (tests/data/
judged_notes.json: sentences written for it, each note judged by hand), none of them judged
wrong and at most 2% too precise; each rule below holds on its own table; and no date said on
any day of the calendar, nor a question naming one, makes a Search fail.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from conftest import Client
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aml_retriever.analysis.dates import date_mentions, period_end_ms, period_span_ms
from aml_retriever.analysis.features import MOST_TOLD, told_of
from aml_retriever.analysis.tokens import pieces
from aml_retriever.memory.reader_view import (
    UNKNOWN_NOTES_PIECES,
    Said,
    _date,
    _notes_of,
    render,
    written_out,
)

FIXTURE = json.loads((Path(__file__).parent / "data" / "judged_notes.json").read_text("utf-8"))


def ms(year: int, month: int, day: int, hour: int = 12, minute: int = 0) -> int:
    return int(dt.datetime(year, month, day, hour, minute, tzinfo=dt.UTC).timestamp() * 1000)


def said_ms(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def notes(text: str, at: int) -> dict[str, str]:
    return {phrase.lower(): date for phrase, date in written_out(text, at)}


# ---- the judged fixture --------------------------------------------------------------------

@pytest.mark.parametrize("case", FIXTURE["notes"], ids=lambda case: case["text"][:48])
def test_the_view_writes_the_judged_notes(case: dict) -> None:
    """Each sentence gets exactly the notes judged (a changed note needs a new judgment)."""
    judged = [(note["phrase"], note["note"]) for note in case["notes"]]
    assert list(written_out(case["text"], said_ms(case["said"]))) == judged


def test_no_judged_note_is_wrong_and_few_are_too_precise() -> None:
    judgments = [note["judgment"] for case in FIXTURE["notes"] for note in case["notes"]]
    assert len(judgments) >= 300
    assert judgments.count("wrong") == 0
    assert judgments.count("too precise") <= 0.02 * len(judgments)
    # The control: the notes the view wrote before these rules were judged with the same hand.
    before = [note["judgment"] for case in FIXTURE["notes"] for note in case["before"]]
    assert before.count("wrong") > 0 and before.count("too precise") > 0


def test_the_notes_of_a_message_are_bounded() -> None:
    """At most MOST_TOLD notes a message, whatever it holds (bounded work and words)."""
    assert len(told_of("yesterday. " * 1000, date_mentions("yesterday. " * 1000, MONDAY))) == MOST_TOLD
    assert len(written_out("Last week and last year. " * 1000, MONDAY)) <= MOST_TOLD


def test_every_judgment_that_is_not_right_says_what_should_be() -> None:
    for case in FIXTURE["notes"]:
        for note in case["notes"] + case["before"]:
            assert note["judgment"] in ("right", "wrong", "too precise"), case["text"]
            assert (note["judgment"] == "right") == ("should" not in note), case["text"]


# ---- the rules, each on its own table --------------------------------------------------------

MONDAY = ms(2023, 3, 13, 10)  # Monday 13 March 2023
SATURDAY = ms(2023, 3, 11, 15)  # Saturday 11 March 2023
SUNDAY = ms(2023, 9, 10, 18)  # Sunday 10 September 2023
WEDNESDAY = ms(2023, 6, 14)  # Wednesday 14 June 2023


@pytest.mark.parametrize(("text", "at", "expected"), [
    ("I hosted a class for them on Friday.", MONDAY, "Fri 10 March 2023"),  # past: the one before
    ("I'll host a class for them on Friday.", MONDAY, "Fri 17 March 2023"),  # future: the one after
    ("maybe I'll call on Monday", SATURDAY, "Mon 13 March 2023"),
    ("I finished it on Monday.", SATURDAY, "Mon 6 March 2023"),
    ("I swim on Monday.", SATURDAY, None),  # no tense: neither
    ("I usually swim on Monday.", SATURDAY, None),  # a habit
    ("We met on Monday, Wednesday and Friday.", WEDNESDAY, None),  # a list of them
    ("This Saturday was the best day.", SUNDAY, "Sat 9 September 2023"),
    ("How about we celebrate this Saturday?", SUNDAY, "Sat 16 September 2023"),
    ("Last Friday I quit.", MONDAY, "Fri 10 March 2023"),
    ("Next Friday is the deadline.", MONDAY, "Fri 17 or Fri 24 March 2023"),  # both fit
    ("Next Thursday I fly.", SATURDAY, "Thu 16 March 2023"),  # the coming one is next week's
    ("Next Monday I start.", MONDAY, "Mon 20 March 2023"),
    ("the next Sunday dinner", MONDAY, None),
    ("the last Friday of the month", MONDAY, None),
])
def test_a_weekday_follows_the_tense_and_its_modifier(text: str, at: int, expected: str | None) -> None:
    assert next(iter(notes(text, at).values()), None) == expected


@pytest.mark.parametrize(("text", "at", "expected"), [
    ("Last weekend we went skiing.", SUNDAY, "the weekend of Sat 2 September 2023"),
    ("Last weekend we went skiing.", SATURDAY, "the weekend of Sat 4 March 2023"),
    ("Last weekend we went skiing.", MONDAY, "the weekend of Sat 11 March 2023"),
    ("This weekend was relaxing.", SUNDAY, "the weekend of Sat 9 September 2023"),
    ("This weekend we'll paint.", SUNDAY, "the weekend of Sat 9 or of Sat 16 September 2023"),
    ("This weekend I'm visiting.", MONDAY, "the weekend of Sat 18 March 2023"),
    ("Next weekend is the festival.", SUNDAY, "the weekend of Sat 16 September 2023"),
    ("Next weekend works.", MONDAY, "the weekend of Sat 18 or of Sat 25 March 2023"),
    ("This past weekend we drove.", ms(2023, 10, 20), "the weekend of Sat 14 October 2023"),
])
def test_a_weekend_is_the_one_the_words_name_on_any_day(text: str, at: int, expected: str) -> None:
    assert list(notes(text, at).values()) == [expected]


@pytest.mark.parametrize(("text", "expected"), [
    ("A few days ago he called.", "a few days before Mon 13 March 2023"),
    ("A couple of weeks ago I fell.", "a couple of weeks before Mon 13 March 2023"),
    ("Several months ago I quit coffee.", "several months before March 2023"),
    ("A few years ago I lived in Osaka.", "a few years before 2023"),
    ("I'll be back in a few weeks.", "a few weeks after Mon 13 March 2023"),
    ("I saw her the other day.", "some days before Mon 13 March 2023"),
    ("Two weeks ago I fell.", "the week of Mon 27 February 2023"),  # weeks as weeks
    ("In two weeks we move.", "the week of Mon 27 March 2023"),
    ("Three days ago it rained.", "Fri 10 March 2023"),
    ("A year ago I moved.", "around March 2022"),
    ("Five years ago I moved.", "2018"),
])
def test_a_note_is_as_precise_as_its_phrase(text: str, expected: str) -> None:
    assert list(notes(text, MONDAY).values()) == [expected]


@pytest.mark.parametrize("text", [
    "I want to read 52 books in a year.", "There are 52 weeks in a year.",
    "I read the whole series in two weeks.", "We haven't spoken in three months.",
    "We walked 20 km in two days.", "To finish the book in 28 days, read 10 pages a day.",
    "Rome wasn't built in a day.", "I'll get back to you in a day or two.",
    "Let's check in a few days before the event.", "It feels like yesterday we graduated.",
    'She said "see you tomorrow" and left.', "I need a plan for the next month.",
    "The last week of April is booked.", "I'm reading Next Year in Havana.",
    "Android 14 may introduce new settings.", "Let's march 5 miles.",
    "I was born on December 30.", "He was part of our family for 10 years.",
    "I've been in this band for a few years now.", "She reads a whole novel in a week.",
    "I've heard he was sick for two weeks.",
])
def test_what_names_no_date_is_told_nothing(text: str) -> None:
    assert written_out(text, MONDAY) == ()
    assert written_out("We met last week.", MONDAY) != ()  # the control


@pytest.mark.parametrize(("text", "at", "expected"), [
    ("I've had them for 3 years now.", ms(2022, 1, 23), "since 2019"),
    ("Seven years now, and I've finally found my muse.", ms(2023, 9, 13), "since 2016"),
    ("I've known these friends for 4 years.", ms(2023, 6, 9), "since 2019"),
    ("I've been playing for about four months now.", ms(2023, 12, 6), "since about August 2023"),
    ("I've been here for just under a year now.", ms(2023, 12, 6), "since about December 2022"),
    ("So much has happened in the last month.", ms(2023, 7, 16), "since about June 2023"),
    ("The past week has been long.", MONDAY, "since Mon 6 March 2023"),
    ("Max and I went camping last summer.", ms(2023, 8, 11), "summer 2022"),  # in summer
    ("We ran a camp last summer.", ms(2023, 12, 26), "summer 2023"),
    ("We went on a trip last summer.", ms(2023, 9, 20), "summer 2023 or summer 2022"),
    ("Last winter the pipes froze.", ms(2023, 6, 14), "winter 2022-2023"),
    ("Next summer we go to Japan.", ms(2023, 4, 2), "summer 2023 or summer 2024"),
    ("I met my teammates on the 15th after my trip.", ms(2023, 8, 17), "Tue 15 August 2023"),
    ("I'm flying home on the 15th.", ms(2023, 8, 17), "Fri 15 September 2023"),
    ("Last August I told you about it.", ms(2023, 12, 8), "August 2023"),
    ("On December 28 I went to the opera.", ms(2024, 1, 2), "Thu 28 December 2023"),
    ("On January 5 I fly out.", ms(2023, 12, 31), "Fri 5 January 2024"),
    ("The day before yesterday I found it.", MONDAY, "Sat 11 March 2023"),
    ("The day after tomorrow is the day.", MONDAY, "Wed 15 March 2023"),
])
def test_durations_seasons_spans_and_days_without_a_month_are_told(text: str, at: int,
                                                                    expected: str) -> None:
    assert list(notes(text, at).values()) == [expected]


@pytest.mark.parametrize(("text", "expected"), [
    ("I have an exam tomorrow.", "Sat 20 May 2023"),
    ("Yesterday I signed the contract.", "Thu 18 May 2023"),
    ("Last night's show was great.", "Thu 18 May 2023"),
])
def test_in_the_small_hours_the_day_is_the_calendar_s(text: str, expected: str) -> None:
    """Said at 00:15 on Friday 19 May: the LoCoMo dev answers to the two day-relative words
    said between midnight and 05:00 ("yesterday" at 00:06, "today" at 00:48) both name the
    calendar day of the message, as its conversation's own dates do."""
    assert list(notes(text, ms(2023, 5, 19, 0, 15)).values()) == [expected]


# ---- the calendar's ends -----------------------------------------------------------------------

# A phrase of every kind of told date (dates.TOLD_KINDS), and a few more.
EVERY_KIND = ("yesterday", "tomorrow", "last night", "the day before yesterday",
              "the day after tomorrow", "the other day", "last Friday", "next Friday", "this Friday",
              "on Friday", "I went on Friday", "I'll go on Friday", "two days ago", "a few weeks ago",
              "a year ago", "ten years ago", "in three days", "in a few months", "in two weeks we go",
              "I've had it for 3 years now", "I've known her for 2 months", "last week", "next week",
              "this week", "last weekend", "this weekend", "next weekend", "this past weekend",
              "last month", "next month", "last year", "next year", "the past week",
              "the last month", "the past year", "last summer", "next winter", "this spring",
              "last December", "next January", "this June", "I met him on the 30th",
              "I'll see him on the 2nd", "on the 15th of next month", "on 31 December",
              "on January 1", "in June", "since March")
EDGE_DAYS = ([dt.date(1, 1, 1) + dt.timedelta(days=i) for i in range(14)]
             + [dt.date(9999, 12, 31) - dt.timedelta(days=i) for i in range(14)])


@settings(max_examples=400, deadline=None)
@given(st.dates(min_value=dt.date(1, 1, 1), max_value=dt.date(9999, 12, 31)),
       st.integers(0, 86_399_999), st.lists(st.sampled_from(EVERY_KIND), min_size=1, max_size=12))
@example(dt.date(9999, 12, 31), 43_200_000, ["this weekend", "next week", "tomorrow"])
@example(dt.date(1, 1, 1), 0, ["last week", "yesterday", "last summer"])
def test_no_date_said_on_any_day_fails_or_overflows_its_count(day: dt.date, at_ms: int,
                                                              phrases: list[str]) -> None:
    """Every note written on any day from 1 January 1 to 31 December 9999 renders, and the
    notes of a row stored before its dates were fit the UNKNOWN_NOTES_PIECES the window counts
    for them (a stored row's notes are counted as rendered: `added_pieces`, `line_pieces`)."""
    moment = (day.toordinal() - dt.date(1970, 1, 1).toordinal()) * 86_400_000 + at_ms
    text = ". ".join(phrases) + "."
    written = written_out(text, moment)
    assert pieces(_notes_of(written)) <= UNKNOWN_NOTES_PIECES
    for phrase, kind, value in told_of(text, date_mentions(text, moment)):
        assert isinstance(_date(value, kind, phrase), str)
    shown = [Said(1, text, moment, "user", "Ana", "conversation", written)]
    assert render(shown).endswith(text + _notes_of(written))  # the count's own pieces, rendered
    for mention in date_mentions(text, moment):
        assert period_span_ms(mention.value) is not None or len(mention.value) not in (4, 7, 10)


@pytest.mark.parametrize("value", ["9999-12-31", "9999-12", "9999", "0001-01-01", "0001-01",
                                   "0001", "9999-12-30|9999-12-31", "<9999-12-31", "+~9999-12",
                                   "^0001-01-01", "~9999-12", "2023-02-30", "0000", "10000-01-01",
                                   "x", "", "|", "+", "2023-13", "-1"])
@pytest.mark.parametrize("kind", ["relative_unit", "ago", "season", "weekday", "since_now", "?"])
def test_any_stored_value_is_written_or_left_out_never_raised(value: str, kind: str) -> None:
    """A note stored by any version (or at the calendar's end) is written or left out; a
    weekend stored on 31 December 9999 by an older version (its Saturday is past the calendar)
    is left out rather than failing the Search."""
    assert isinstance(_date(value, kind, "this weekend"), str)
    assert _date("9999-12-31", "relative_unit", "this weekend") == ""


def test_a_period_at_the_calendar_s_end_has_its_last_millisecond() -> None:
    last = 253_402_300_799_999
    assert period_end_ms("9999-12-31") == last
    assert period_end_ms("9999-12") == last
    assert period_end_ms("9999") == last
    assert period_span_ms("0001-01-01") == (-62_135_596_800_000, -62_135_596_800_000 + 86_400_000 - 1)
    assert period_span_ms("2023-02-29") is None and period_span_ms("0000") is None
    assert period_end_ms("2023-05") == ms(2023, 6, 1, 0) - 1  # the control


def _each_day_s_messages(days: list[dt.date]) -> list[dict]:
    return [{"role": "user" if i % 2 else "assistant", "content": f"{phrase.capitalize()}, we met.",
             "timestamp": f"{day.isoformat()}T{10 + i % 12:02d}:00:00Z"}
            for day in days for i, phrase in enumerate(EVERY_KIND)]


@pytest.mark.parametrize("view", [True, False])
def test_every_told_date_and_every_day_asked_at_the_calendar_s_ends_answers_200(make_app,
                                                                                view: bool) -> None:
    """Every kind of told date said on each of the first and last 14 days of the calendar, then
    a question naming each of those days, window and view on (the leaderboard's server) and
    off: every Search answers 200 ("this weekend" said on Friday 31 December 9999 overflowed the
    view's arithmetic; "What did I do on 31 December?" the span of the day asked)."""
    app = make_app(answer_window_tokens=117_760 if view else 0, reader_view=view)
    client = Client(app.port)
    for user, days in (("first", EDGE_DAYS[:14]), ("last", EDGE_DAYS[14:])):
        messages = _each_day_s_messages(days)
        for start in range(0, len(messages), 100):
            response = client.post("/add", {"user_id": user, "request_id": f"r{start}",
                                            "session_id": f"s{start}",
                                            "messages": messages[start:start + 100]})
            assert response.status == 200, response.body
        for day in days:
            month = day.strftime("%B")
            for question in (f"What did I do on {day.day} {month}?",
                             f"What happened on {month} {day.day}?", "What did I do last weekend?"):
                response = client.search(user, question, top_k=100)
                assert response.status == 200, (question, response.body)
                assert response.body["data"]
