"""A question that names a date finds what was said that day: a message's own day counts as a
date written in it (engine/hits.py, `_said_in`), and a day or month named without its year is
read as of the memory's last message, never as of the day the Search runs (engine/query.py)."""

from __future__ import annotations

import datetime as dt
from contextlib import closing
from pathlib import Path

import pytest

from aml_retriever.analysis.dates import date_mentions, extract_dates, period_span_ms
from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.engine.query import plan
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import parse_add, parse_search


def ms(year: int, month: int, day: int, hour: int = 12) -> int:
    return int(dt.datetime(year, month, day, hour, tzinfo=dt.UTC).timestamp() * 1000)


# Three evenings of chat; what Nate cooked on 9 November is said that day without the date, and
# shares no word with the question.
DAYS = {
    "s1": (ms(2022, 11, 2), ["The tournament moved to next week.", "I trained all day again.",
                             "My cat knocked over a plant."]),
    "s2": (ms(2022, 11, 9), ["What a wild week! I tried out some cooking.",
                             "Look at this homemade coconut ice cream!", "The sprinkles melted."]),
    "s3": (ms(2022, 11, 16), ["The team won the final.", "We celebrated at the arcade.",
                              "I bought a new keyboard."]),
}


def store(svc: MemoryService) -> None:
    for session, (start, texts) in DAYS.items():
        svc.add(parse_add({"user_id": "u", "request_id": session, "session_id": session,
                           "messages": [{"role": "user", "content": text, "timestamp": start + i}
                                        for i, text in enumerate(texts)]}, 200))


def top(svc: MemoryService, query: str, k: int = 3) -> list[str]:
    return [item["content"] for item in svc.search(parse_search(
        {"user_id": "u", "query": query, "top_k": k}))["data"]]


@pytest.fixture
def svc(tmp_path: Path):
    with closing(MemoryService.open(str(tmp_path / "aml.db"), synchronous="NORMAL")) as service:
        store(service)
        yield service


def said_on(results: list[str], session: str) -> bool:
    return bool(results) and all(any(text in r for text in DAYS[session][1]) for r in results[:1])


def test_a_question_naming_a_day_finds_what_was_said_that_day(svc: MemoryService) -> None:
    assert said_on(top(svc, "What dish did I make on 9 November, 2022?"), "s2")
    assert said_on(top(svc, "What dish did I make on November 16, 2022?"), "s3")
    # The control: the same question naming no day finds nothing said on one.
    assert not said_on(top(svc, "What dish did I make?"), "s2")


def test_the_date_signal_off_reads_no_day(tmp_path: Path) -> None:
    config = RetrievalConfig().without("date")
    with closing(MemoryService.open(str(tmp_path / "aml.db"), synchronous="NORMAL",
                                    retrieval=config)) as service:
        store(service)
        assert not said_on(top(service, "What dish did I make on 9 November, 2022?"), "s2")


def test_a_day_without_its_year_is_read_as_of_the_memory(svc: MemoryService) -> None:
    """"on 9 November" is the latest 9 November before the memory's last message (2022), not
    the one before today; the same store and question rank alike on any day they are asked."""
    assert said_on(top(svc, "What dish did I make on 9 November?"), "s2")
    assert plan("What did I make on 9 November?", now_ms=ms(2022, 11, 16)).dates == ("2022-11-09",)
    assert plan("What did I make in June?", now_ms=ms(2022, 11, 16)).dates == ("2022-06",)
    assert plan("What did I make in December?", now_ms=ms(2022, 11, 16)).dates == ("2021-12",)


@pytest.mark.parametrize("question", ["What did I do last week?", "What did I cook yesterday?",
                                      "What happened two days ago?", "What is on this week?"])
def test_a_date_relative_to_the_asking_names_no_period(question: str) -> None:
    assert plan(question, now_ms=ms(2022, 11, 16)).dates == ()


def test_date_mentions_are_the_dates_extracted_with_their_place() -> None:
    text = "We met yesterday, and on 13 March, 2023 too; next month is busy."
    found = date_mentions(text, ms(2023, 5, 8))
    assert [m.value for m in found] == extract_dates(text, ms(2023, 5, 8))
    assert [(text[m.start:m.end], m.kind) for m in found] == [
        ("yesterday", "yesterday"), ("13 March, 2023", "day_month_year"),
        ("next month", "relative_unit")]


def test_a_period_spans_its_whole_days() -> None:
    assert period_span_ms("2022-11-09") == (ms(2022, 11, 9, 0), ms(2022, 11, 10, 0) - 1)
    assert period_span_ms("2022-11") == (ms(2022, 11, 1, 0), ms(2022, 12, 1, 0) - 1)
    assert period_span_ms("2022") == (ms(2022, 1, 1, 0), ms(2023, 1, 1, 0) - 1)
    assert period_span_ms("soon") is None


def test_a_day_is_also_found_in_what_is_said_of_it_later(tmp_path: Path) -> None:
    """"Three days ago" said on the 12th is of the 9th; "yesterday" said on the 9th is not."""
    with closing(MemoryService.open(str(tmp_path / "aml.db"), synchronous="NORMAL")) as svc:
        turns = {"a": (ms(2022, 11, 9), ["Yesterday I repaired the bike.", "A quiet evening."]),
                 "b": (ms(2022, 11, 12), ["Three days ago I baked a lemon tart.", "Rain all day."]),
                 "c": (ms(2022, 11, 20), ["I repaired the fence today.", "I baked bread today."])}
        for session, (start, texts) in turns.items():
            svc.add(parse_add({"user_id": "u", "request_id": session, "session_id": session,
                               "messages": [{"role": "user", "content": text, "timestamp": start + i}
                                            for i, text in enumerate(texts)]}, 200))
        assert top(svc, "What did I bake on 9 November, 2022?")[0] == turns["b"][1][0]
        assert top(svc, "What did I repair on 9 November, 2022?")[0] != turns["a"][1][0]
        # The control: another day finds what was said of that one.
        assert top(svc, "What did I bake on 20 November, 2022?")[0] == turns["c"][1][1]
        assert top(svc, "What did I repair on 8 November, 2022?")[0] == turns["a"][1][0]
