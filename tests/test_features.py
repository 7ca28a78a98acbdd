"""Add-time features: what is extracted, and how schemas up to 13 stored it with each message."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from old_schema import features_json

from aml_retriever.analysis import dates, features
from aml_retriever.analysis.features import Features, extract


@pytest.mark.parametrize("features", [
    Features(),
    Features(speaker="ann"),
    Features(entities=("lena", "berlin")),
    Features(numbers=("2",), dates=("2023-05-20",), update=True),
    Features("max", ("max",), ("12",), ("2023-05",), False),
])
def test_stored_form_reads_back_the_same(features: Features) -> None:
    assert Features.from_json(features_json(features)) == features


def test_stored_form_drops_trailing_defaults() -> None:
    assert features_json(Features()) == "[]"
    assert features_json(Features(entities=("lena",))) == '["",["lena"]]'
    # control: a set field after empty ones keeps the empty ones in place
    assert features_json(Features(update=True)) == '["",[],[],[],1]'


def test_rows_written_in_the_object_form_still_read() -> None:
    legacy = '{"speaker":"","entities":["jonas"],"numbers":[],"dates":["2023-01-02"],"update":true}'
    assert Features.from_json(legacy) == Features(entities=("jonas",), dates=("2023-01-02",),
                                                  update=True)
    assert Features.from_json('{"entities":["amara"]}') == Features(entities=("amara",))


def test_extracted_features_survive_storage() -> None:
    # 25 May 2023, 12:00 UTC: "last Saturday" is 20 May 2023
    features = extract("user", "Lena moved to Berlin last Saturday with 2 cats", 1_685_016_000_000)
    assert features.update and "lena" in features.entities and "2" in features.numbers
    assert features.dates == ("2023-05-20",)
    assert Features.from_json(features_json(features)) == features


# ASCII text takes faster paths (features.py): they must find exactly what the general patterns
# find, on text made of the words and characters the patterns care about.
_PIECES = ("now", "not", "anymore", "any more", "no longer", "moved to", "these days", "new job",
           "Now", "NOW", "Mary", "McDonald's", "O'Brien", "iPhone", "New York", "The", "A", "x_Y",
           "1,000", "1,00", "2.5", "3.4.5", "x1", "_7", ".5", "12,345,67", "one", "someone",
           "Seventeen", "twenty-one", "2two", "May", "march", "5th", "2023", "in 1999", "today",
           "last Monday", "next week", "2 days ago", "this morning", "sept", "2021-03-04", "in", "on",
           "of", "last", "next", "this", "4", "4th", "day", "weeks", "months now", "the day",
           "before yesterday", "after tomorrow", "past year", "for", "about",
           *dates.MONTHS, *map(str.title, dates.WEEKDAYS))
_GLUE = (" ", "  ", ", ", ". ", "\n", "-", "_", "'", "(", ")", ":", "\x1c", "")
ascii_texts = st.lists(st.one_of(st.sampled_from(_PIECES), st.sampled_from(_GLUE),
                                 st.text(alphabet=st.characters(max_codepoint=127), max_size=6)),
                       max_size=24).map("".join)


@settings(max_examples=400, deadline=None)
@given(ascii_texts)
def test_ascii_paths_find_what_the_general_patterns_find(text: str) -> None:
    assert features._ascii_names(text) == features._names(text)
    assert features._ascii_digits(text) == features._digits(text)
    lowered = text.lower()
    assert features._ascii_number_words(lowered) == features._number_words(lowered)
    assert features._ascii_states_update(text, lowered, features.ascii_words(lowered)) == (
        features._UPDATE.search(text) is not None)


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=4).map(" ".join) | ascii_texts)
def test_date_patterns_skipped_by_the_guards_would_have_found_nothing(text: str) -> None:
    everything = frozenset(k for kinds in dates._NEEDS.values() for k in kinds)
    guarded = dates.extract_dates(text, 1685000000000)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dates, "_present", lambda lowered, words=None: everything)
        assert guarded == dates.extract_dates(text, 1685000000000)


def test_every_word_a_date_guard_looks_for_still_finds_its_dates() -> None:
    words = [*dates.MONTHS, "july", "sepember", *dates.WEEKDAYS, "week", "weekend", "month", "year"]
    templates = ("{} 4", "4 {}", "4th of {}", "in {}", "last {}", "next {}", "{} 4, 2023", "{}, 2023",
                 "this past {}", "2 {}s ago")
    for word in words:
        for template in templates:
            for text in (template.format(word), template.format(word.title())):
                guarded = dates.extract_dates(text, 1685000000000)
                with pytest.MonkeyPatch.context() as patch:
                    patch.setattr(dates, "_present", lambda lowered, words=None: frozenset(
                        k for kinds in dates._NEEDS.values() for k in kinds))
                    assert guarded == dates.extract_dates(text, 1685000000000), text


@settings(max_examples=400, deadline=None)
@given(ascii_texts)
def test_one_reading_of_the_words_finds_what_each_feature_finds_alone(text: str) -> None:
    """extract reads an ASCII text's words once for numbers, dates and update cues; each feature
    read on its own finds the same, in what extract reads: the text after a "Name: " prefix
    ("Seventeen: " names a speaker, whose name is no number)."""
    found = features.extract("user", text, 1685000000000)
    _, body = features.speaker_of("user", text)
    assert found.numbers == features.numbers_of(body)
    assert list(found.dates) == dates.extract_dates(body, 1685000000000)
    assert found.update == (features._UPDATE.search(body) is not None)


def test_a_speakers_prefix_is_no_number():
    assert features.extract("user", "Seventeen: we met.", 1685000000000).numbers == ()
    assert features.extract("user", "We met seventeen times.", 1685000000000).numbers == ("17",)
