"""A word budget (`max_words`): the best evidence that fits, each message once, nothing cut."""

from __future__ import annotations

from typing import Any

import pytest

from aml_retriever.analysis.tokenizer import reading_words
from aml_retriever.engine.fusion import Candidate, WordBudget, select
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import AddRequest, Message, SearchRequest

WORDS = {1: 5, 2: 50, 3: 8, 4: 3}
CONTENT = {m: f"message {m}" for m in WORDS}


def _pack(order: list[Candidate], limit: int) -> tuple[list[Candidate], WordBudget]:
    budget = WordBudget(limit, WORDS.__getitem__)
    return [returned for _, returned in select(order, 10, CONTENT, lambda m: True, budget)], budget


def test_a_result_that_does_not_fit_is_left_out_and_a_shorter_one_follows():
    order = [Candidate("message", 1, (1,)), Candidate("message", 2, (2,)),
             Candidate("message", 3, (3,))]
    chosen, budget = _pack(order, 20)
    assert [c.members for c in chosen] == [(1,), (3,)]
    assert budget.used == 13 and budget.binding


def test_a_window_that_does_not_fit_leaves_its_messages_free():
    order = [Candidate("window", 3, (2, 3)), Candidate("message", 3, (3,)),
             Candidate("message", 4, (4,))]
    chosen, budget = _pack(order, 12)
    assert [c.members for c in chosen] == [(3,), (4,)]  # 3 once, not cut out of the window
    assert budget.used == 11


def test_without_a_budget_nothing_is_left_out():
    order = [Candidate("message", m, (m,)) for m in WORDS]
    assert len(select(order, 10, CONTENT, lambda m: True)) == 4


def test_reading_words_counts_each_han_character():
    assert reading_words("two words") == 2
    assert reading_words("我去北京 today") == 5


@pytest.fixture
def svc(tmp_path: Any) -> Any:
    service = MemoryService.open(str(tmp_path / "aml.db"), synchronous="NORMAL")
    long_reply = "The garden plan covers tomato beds and " + "more words about soil " * 40
    service.add(AddRequest("r1", "u", "s", tuple(Message(role, text, 1_700_000_000_000 + i * 1000)
                                                 for i, (role, text) in enumerate([
        ("user", "My tomato garden plan is ready."),
        ("assistant", long_reply),
        ("user", "The tomato beds get compost in May."),
        ("user", "Unrelated: my bike needs new brakes.")]))))
    yield service
    service.close()


def test_search_packs_the_best_evidence_within_the_budget(svc):
    unlimited = svc.search(SearchRequest("tomato garden plan", "u", 10, (), None))
    assert "words" not in unlimited  # the contract's response is unchanged without a budget
    packed = svc.search(SearchRequest("tomato garden plan", "u", 10, (), None, max_words=40))
    contents = [r["content"] for r in packed["data"]]
    assert packed["words"] == sum(reading_words(c) for c in contents) <= 40
    assert "My tomato garden plan is ready." in contents
    assert not any(c.startswith("The garden plan covers") for c in contents)  # 170 words: left out
    sources = [m for r in packed["data"] for m in r["source_message_ids"]]
    assert len(sources) == len(set(sources))  # no message twice


def test_a_default_budget_applies_to_searches_that_send_none(svc):
    svc.default_max_words = 12
    packed = svc.search(SearchRequest("tomato garden plan", "u", 10, (), None))
    assert packed["words"] <= 12 and packed["data"]
    assert svc.search(SearchRequest("tomato", "nobody", 10, (), None)) == {"data": [], "words": 0}


@pytest.mark.parametrize("value", [0, -1, 1.5, "100", True, 1_000_001])
def test_a_bad_budget_is_refused_by_name(client, value):
    response = client.search("alice", "anything", max_words=value)
    assert response.status == 400 and response.body["error"]["field"] == "max_words"


def test_a_budget_over_http_reports_the_words_returned(client):
    client.add("alice", "r1", ["the violin is in the attic", "the cello is in the hall"])
    response = client.search("alice", "violin cello", max_words=7)
    assert response.status == 200
    assert response.body["words"] == 6 and len(response.body["data"]) == 1
