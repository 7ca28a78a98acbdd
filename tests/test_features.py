"""Add-time features: what is extracted, and how it is stored with each message."""

from __future__ import annotations

import pytest

from aml_retriever.features import Features, extract


@pytest.mark.parametrize("features", [
    Features(),
    Features(speaker="ann"),
    Features(entities=("lena", "berlin")),
    Features(numbers=("2",), dates=("2023-05-20",), update=True),
    Features("max", ("max",), ("12",), ("2023-05",), False),
])
def test_stored_form_reads_back_the_same(features: Features) -> None:
    assert Features.from_json(features.to_json()) == features


def test_stored_form_drops_trailing_defaults() -> None:
    assert Features().to_json() == "[]"
    assert Features(entities=("lena",)).to_json() == '["",["lena"]]'
    # control: a set field after empty ones keeps the empty ones in place
    assert Features(update=True).to_json() == '["",[],[],[],1]'


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
    assert Features.from_json(features.to_json()) == features
