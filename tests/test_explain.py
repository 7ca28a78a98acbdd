"""`"explain": true` on Search: each result carries, per fused list switched on, its rank in that
list and that list's share of its score. The ranks are the result's places in the very lists fusion
read; the shares add up to the score; without `explain` the answer is byte for byte what it was."""

from __future__ import annotations

import json
from typing import Any

import pytest

from aml_retriever.common.signals import SIGNAL_NAMES, RetrievalConfig
from aml_retriever.engine import retrieval
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import AddRequest, Message, SearchRequest, parse_search

T0 = 1_700_000_000_000
CORPUS = {
    "trip": ["The ferry to Naxos leaves at 7 from pier 3.", "Is the ferry ever late?",
             "Usually not, Caroline said it was on time in May."],
    "town": ["Bus 7 leaves from the station every hour.", "Naxos has long sandy beaches.",
             "We should book the hotel near the pier."],
    "later": ["The ferry schedule changed for the summer.", "Melanie took the 7 am ferry twice."],
}


@pytest.fixture
def svc(tmp_path: Any) -> Any:
    service = MemoryService.open(str(tmp_path / "aml.db"), synchronous="NORMAL")
    for n, (session, contents) in enumerate(CORPUS.items()):
        messages = tuple(Message("user", c, T0 + n * 3_600_000 + i * 1000) for i, c in enumerate(contents))
        service.add(AddRequest(f"r-{session}", "u", session, messages))
    yield service
    service.close()


@pytest.fixture
def fused_lists(monkeypatch) -> list[dict]:
    """The lists each fusion of a Search read, as fusion received them."""
    seen: list[dict] = []
    original = retrieval.rrf

    def recording(lists, weights, k):
        seen.append({name: list(keys) for name, keys in lists.items()})
        return original(lists, weights, k)

    monkeypatch.setattr(retrieval, "rrf", recording)
    return seen


def explained(svc: MemoryService, query: str, top_k: int = 10) -> list[dict]:
    return svc.search(SearchRequest(query, "u", top_k, (), None, explain=True))["data"]


def test_a_known_answer_carries_its_ranks_weights_and_shares(svc):
    svc.retrieval = RetrievalConfig(weights={"lexical": 1.0, "number": 0.3})
    results = explained(svc, "ferry at 7")
    top = results[0]  # both words in the shortest text: first in both lists
    assert top["content"] == "Melanie took the 7 am ferry twice."
    assert top["explain"] == {"signals": [
        {"signal": "lexical", "rank": 1, "weight": 1.0, "share": pytest.approx(1 / 1.3)},
        {"signal": "number", "rank": 1, "weight": 0.3, "share": pytest.approx(0.3 / 1.3)}]}
    naxos = next(r for r in results if r["content"].startswith("The ferry to Naxos"))
    assert [s["rank"] for s in naxos["explain"]["signals"]] == [2, 2]
    bus = next(r for r in results if r["content"].startswith("Bus 7"))
    by_signal = {s["signal"]: s for s in bus["explain"]["signals"]}
    assert by_signal["number"]["rank"] == 3  # the third message with a 7, in lexical order
    schedule = next(r for r in results if r["content"].startswith("The ferry schedule"))
    assert {s["signal"]: s["rank"] for s in schedule["explain"]["signals"]}["number"] is None
    assert {s["signal"]: s["share"] for s in schedule["explain"]["signals"]} == {"lexical": 1.0,
                                                                                 "number": 0.0}


@pytest.mark.parametrize("query", ["When does the ferry to Naxos leave?", "What did Caroline say in May?",
                                   "ferry 7 pier", "Where are the beaches and the hotel?"])
def test_ranks_are_the_places_in_the_lists_fusion_read_and_shares_make_the_score(svc, fused_lists,
                                                                                 query):
    results = explained(svc, query)
    lists, k = fused_lists[-1], svc.retrieval.rrf_k
    assert results  # populated control
    for result in results:
        members = {int(m[1:]) for m in result["source_message_ids"]}
        signals = result["explain"]["signals"]
        switched_on = [name for name in SIGNAL_NAMES if name in lists and svc.retrieval.weight(name) > 0]
        assert [s["signal"] for s in signals] == switched_on  # in the registry's order
        ranked = {s["signal"]: s["rank"] for s in signals if s["rank"] is not None}
        assert ranked, result
        # Every rank names the same candidate (the one the result was taken from, which holds
        # the result's messages), and a list without a rank does not hold it.
        candidates = {lists[name][rank - 1] for name, rank in ranked.items()}
        assert len(candidates) == 1
        (candidate,) = candidates
        assert members <= set(candidate[1])
        for s in signals:
            if s["rank"] is None:
                assert candidate not in lists[s["signal"]]
            else:
                assert lists[s["signal"]].index(candidate) + 1 == s["rank"]
                assert s["weight"] == svc.retrieval.weight(s["signal"])
        assert sum(s["weight"] / (k + s["rank"]) for s in signals if s["rank"]) == \
            pytest.approx(result["score"])
        for s in signals:
            part = s["weight"] / (k + s["rank"]) if s["rank"] else 0.0
            assert s["share"] == pytest.approx(part / result["score"])
        assert sum(s["share"] for s in signals) == pytest.approx(1.0)


def test_without_explain_the_answer_is_byte_for_byte_the_same(client):
    for session, contents in CORPUS.items():
        client.add("alice", f"r-{session}", contents, session=session)
    for extra in ({}, {"max_words": 40}, {"top_k": 3, "options": ["pier", "station"]}):
        query = "When does the ferry to Naxos leave?"
        plain = client.search("alice", query, **extra).raw
        assert client.search("alice", query, explain=False, **extra).raw == plain
        assert client.search("alice", query, explain=None, **extra).raw == plain
        with_explain = client.search("alice", query, explain=True, **extra)
        assert all("explain" in r for r in with_explain.body["data"]) and with_explain.body["data"]
        for r in with_explain.body["data"]:
            del r["explain"]
        assert json.dumps(with_explain.body, ensure_ascii=False).encode() + b"\n" == plain


@pytest.mark.parametrize("value", ["yes", 1, 0, [], {}])
def test_explain_must_be_true_or_false(client, value):
    response = client.search("alice", "ferry", explain=value)
    assert response.status == 400
    assert response.body["error"]["field"] == "explain"


def test_explain_is_parsed_as_an_extension_field():
    assert parse_search({"query": "x", "user_id": "u", "explain": True}).explain is True
    assert parse_search({"query": "x", "user_id": "u"}).explain is False
