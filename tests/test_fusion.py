"""Fusion agrees with a naive reference, breaks ties by a stable key, and selection returns each
piece of evidence once."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aml_retriever.engine.fusion import Candidate, rrf, select


def reference_rrf(lists, weights, k):
    """RRF written the slow, obvious way: for each candidate, for each list, find its rank."""
    keys = {key for ranking in lists.values() for key in ranking}
    return {key: sum(weights[name] / (k + ranking.index(key) + 1)
                     for name, ranking in lists.items() if key in ranking and weights[name] > 0)
            for key in keys if any(key in r for n, r in lists.items() if weights[n] > 0)}


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]),
                       st.lists(st.integers(0, 30), unique=True, max_size=15), min_size=1),
       st.floats(0, 3), st.floats(1, 100))
def test_rrf_matches_the_reference(lists, weight, k):
    weights = {name: (weight if i % 2 else 1.0) for i, name in enumerate(sorted(lists))}
    fused = rrf(lists, weights, k)
    expected = reference_rrf(lists, weights, k)
    assert fused.keys() == expected.keys()
    for key, value in expected.items():
        assert abs(fused[key] - value) < 1e-12


def test_a_candidate_high_in_two_lists_beats_one_top_in_a_single_list():
    fused = rrf({"x": ["solo", "both"], "y": ["both"]}, {"x": 1.0, "y": 1.0}, 60)
    assert fused["both"] > fused["solo"]


def test_zero_weight_lists_do_not_count():
    assert rrf({"x": ["a"], "y": ["b"]}, {"x": 1.0, "y": 0.0}, 60) == {"a": 1 / 61}


CONTENT = {1: "one", 2: "two", 3: "three", 4: "one", 5: "five"}


def test_select_cuts_windows_to_what_was_not_returned_yet():
    order = [Candidate("message", 2, (2,)), Candidate("window", 9, (1, 2, 3)),
             Candidate("window", 8, (2, 3)), Candidate("message", 3, (3,))]
    chosen = [returned for _, returned in select(order, 10, CONTENT, lambda m: True)]
    assert chosen == [Candidate("message", 2, (2,)), Candidate("window", 9, (1, 3))]


def test_select_skips_repeated_content_and_stops_at_top_k():
    order = [Candidate("message", 1, (1,)), Candidate("message", 4, (4,)),
             Candidate("message", 5, (5,)), Candidate("message", 2, (2,))]
    chosen = [returned for _, returned in select(order, 2, CONTENT, lambda m: True)]
    assert chosen == [Candidate("message", 1, (1,)), Candidate("message", 5, (5,))]


def test_a_window_reduced_to_one_message_is_returned_as_that_message():
    order = [Candidate("message", 1, (1,)), Candidate("window", 7, (1, 2))]
    chosen = [returned for _, returned in select(order, 10, CONTENT, lambda m: True)]
    assert chosen[1] == Candidate("message", 2, (2,))


def test_a_window_whose_new_messages_match_nothing_is_skipped():
    order = [Candidate("message", 1, (1,)), Candidate("window", 7, (1, 2, 3)),
             Candidate("message", 5, (5,))]
    chosen = [returned for _, returned in select(order, 10, CONTENT, lambda m: m in (1, 5))]
    assert chosen == [Candidate("message", 1, (1,)), Candidate("message", 5, (5,))]
    # control: when its new messages do match, the cut window is returned
    chosen = [returned for _, returned in select(order, 10, CONTENT, lambda m: True)]
    assert chosen[1] == Candidate("window", 7, (2, 3))
