"""Evaluation metrics: each definition in docs/EVAL.md holds on hand-computed cases, and recall
agrees with a naive reference on generated rankings."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aml_retriever.evaluation import metrics
from aml_retriever.evaluation.metrics import Hit, Result


def ranked(*contents: str) -> list[Result]:
    return [Result(c) for c in contents]


def test_evidence_rank_and_words_read_are_those_of_its_first_result():
    results = ranked("noise one", "A: hello world and more", "B: second turn", "A: hello world")
    hits = metrics.first_hits(["A: hello world", "B: second turn"], results)
    # 2 words before result 2, then "A: hello world" is its first 3 words; result 3 comes after
    # 2 + 5 words and holds 3 more.
    assert hits == [Hit(rank=2, words_read=5), Hit(rank=3, words_read=10)]


def test_hand_computed_question_metrics():
    scores = metrics.question_metrics([Hit(2, 5), Hit(3, 10)])
    assert scores["R@1"] == 0.0 and scores["R@5"] == 1.0
    assert scores["all@1"] == 0.0 and scores["all@5"] == 1.0
    assert scores["MRR"] == 0.5
    ideal = 1 + 1 / math.log2(3)
    assert scores["nDCG@10"] == pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / ideal)
    assert scores["nDCG@10"] == pytest.approx(0.6934, abs=1e-4)


def test_recall_counts_the_share_of_evidence_found_by_k():
    scores = metrics.question_metrics([Hit(1, 3), None, Hit(7, 40)])
    assert scores["R@1"] == pytest.approx(1 / 3)
    assert scores["R@5"] == pytest.approx(1 / 3)
    assert scores["R@10"] == pytest.approx(2 / 3)
    assert scores["all@100"] == 0.0
    assert scores["MRR"] == 1.0


def test_budgeted_recall_cuts_reading_after_w_words():
    scores = metrics.question_metrics([Hit(1, 150), Hit(2, 450), Hit(3, 1500)])
    assert scores["b@100w"] == 0.0
    assert scores["b@200w"] == pytest.approx(1 / 3)
    assert scores["b@500w"] == pytest.approx(2 / 3)
    assert scores["b@1000w"] == pytest.approx(2 / 3)
    assert scores["b@2000w"] == 1.0 and scores["b@5000w"] == 1.0


def test_a_window_carrying_two_evidence_messages_credits_both_at_its_rank():
    window = Result("first line\nA: hello world\nB: second turn", ("m1", "m2", "m3"))
    hits = metrics.first_hits(["A: hello world", "B: second turn"], [window])
    assert hits == [Hit(1, 5), Hit(1, 8)]
    scores = metrics.question_metrics(hits)
    assert scores["all@1"] == 1.0
    assert scores["nDCG@10"] == 1.0  # two gains at rank 1 exceed the one-per-rank ideal: capped


def test_provenance_ids_count_when_the_text_is_not_contained():
    clipped = Result("A: hello", ("m7",))
    assert metrics.first_hits(["A: hello world"], [clipped]) == [None]  # control: no id given
    assert metrics.first_hits(["A: hello world"], [clipped], ["m7"]) == [Hit(1, 2)]
    assert metrics.first_hits(["A: hello world"], [clipped], ["m8"]) == [None]


def test_whitespace_runs_compare_as_one_space():
    hits = metrics.first_hits(["a  b\nc"], ranked("x a b c y"))
    assert hits == [Hit(1, 4)]


def test_nothing_found_scores_zero_everywhere():
    scores = metrics.question_metrics(metrics.first_hits(["needle"], ranked("hay", "stack")))
    assert all(scores[k] == 0.0 for k in metrics.METRIC_KEYS)


def test_a_question_without_evidence_cannot_be_scored():
    with pytest.raises(ValueError):
        metrics.question_metrics([])


def test_results_from_contract_items_keep_content_ids_and_score():
    items = [{"id": "m1", "content": "x", "score": 2, "source_message_ids": ["m1", "m2"]},
             {"id": "m3", "content": "y", "score": 1.5}]
    assert metrics.results_from_items(items) == [Result("x", ("m1", "m2"), 2.0), Result("y", (), 1.5)]


def test_reader_measures_are_averaged_over_the_questions_they_apply_to():
    rows = [{"date visible": 1.0, "speaker visible": None}, {"date visible": 0.0},
            {"date visible": None, "speaker visible": None}]
    assert metrics.applicable_means(rows) == {"date visible": 0.5, "n date visible": 2,
                                              "speaker visible": None, "n speaker visible": 0}


def test_confidence_auroc_counts_wins_and_half_ties():
    pairs = [(2.0, 1.0), (1.0, 1.0), (None, 0.5), (3.0, None)]
    assert metrics.confidence_auroc(pairs) == pytest.approx((1 + 0.5 + 0 + 1) / 4)
    assert metrics.confidence_auroc([]) is None


def test_nearest_rank_percentiles():
    assert metrics.percentiles([4, 1, 3, 2], (50, 95)) == {"p50": 2, "p95": 4}
    assert metrics.percentiles([]) == {}


def test_spread_is_mean_and_range():
    s = metrics.spread([0.2, 0.4, 0.9])
    assert (s.mean, s.low, s.high) == (pytest.approx(0.5), 0.2, 0.9)


@given(st.data())
def test_recall_matches_a_naive_reference(data):
    # Fixed-width tokens, so no evidence text is contained in another token.
    words = [f"w{i:02d}x" for i in range(data.draw(st.integers(1, 30)))]
    order = data.draw(st.permutations(words))
    evidence = data.draw(st.lists(st.sampled_from(words), min_size=1, max_size=5, unique=True))
    cut = data.draw(st.integers(0, len(order)))
    results = ranked(*order[:cut])
    scores = metrics.question_metrics(metrics.first_hits(evidence, results))
    for k in metrics.KS:
        expected = sum(1 for e in evidence if e in order[:min(k, cut)]) / len(evidence)
        assert scores[f"R@{k}"] == pytest.approx(expected)
        assert scores[f"all@{k}"] == float(expected == 1.0)
    found = [order.index(e) + 1 for e in evidence if e in order[:cut]]
    assert scores["MRR"] == (1 / min(found) if found else 0.0)
    assert 0.0 <= scores["nDCG@10"] <= 1.0
    budgets = [scores[f"b@{w}w"] for w in metrics.BUDGETS]
    assert budgets == sorted(budgets)
