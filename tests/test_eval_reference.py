"""The plain reference: BM25 with the Lucene IDF over words and character unigrams + bigrams,
one message per result, each user's memory its own."""

from __future__ import annotations

from aml_retriever.evaluation.reference import BigramBM25, reference_terms


def _add(backend: BigramBM25, user: str, request: str, *contents: str) -> None:
    backend.add({"user_id": user, "request_id": request, "session_id": "s",
                 "messages": [{"role": "user", "content": c} for c in contents]})


def test_terms_are_words_without_stop_words_and_han_unigrams_and_bigrams():
    assert reference_terms("Where is the 北京烤鸭?") == ["北", "京", "烤", "鸭", "北京", "京烤", "烤鸭"]


def test_ranks_by_bm25_and_keeps_users_apart():
    backend = BigramBM25()
    _add(backend, "alice", "r1", "我表弟今年36岁。", "我上司都44岁了。", "我表弟在杭州工作。")
    _add(backend, "bob", "r1", "我表弟是医生。")
    found = [r["content"] for r in backend.search({"user_id": "alice", "query": "我表弟多大了",
                                                   "top_k": 10})]
    assert found[0].startswith("我表弟") and "我表弟是医生。" not in found
    assert [r["content"] for r in backend.search({"user_id": "bob", "query": "表弟"})] == ["我表弟是医生。"]
    assert backend.search({"user_id": "carol", "query": "表弟"}) == []


def test_a_replayed_request_is_stored_once():
    backend = BigramBM25()
    _add(backend, "alice", "r1", "violin lessons")
    _add(backend, "alice", "r1", "violin lessons")
    assert len(backend.search({"user_id": "alice", "query": "violin"})) == 1
