"""A question's terms: the part that asks outweighs an aside before it, and no term is dropped
for where it sits, however long the question."""

from __future__ import annotations

from typing import Any

import pytest

from aml_retriever.engine.candidates import MAX_QUERY_TERMS, Term, TermIndex
from aml_retriever.engine.focus import ASIDE_WEIGHT, ask_and_aside, weighted_terms
from aml_retriever.engine.query import content_terms, plan
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import AddRequest, Message, SearchRequest

CHATTER = ("今天天气真好，阳光明媚，真想去海边散散步。说起海边，上次学游泳的时候还没学会换气呢，"
           "得找个时间继续练习。对了，家里那盆绿萝长得真好，不知道什么时候开花。")


@pytest.mark.parametrize("question,ask", [
    (CHATTER + "不好意思，我真正想问的是：那场两千人的展会在哪里举办？", "那场两千人的展会在哪里举办？"),
    ("I had such a long day at work. Anyway, what did I say about the lease?",
     " what did I say about the lease?"),
    ("What areas of the U.S. has John been to?", "What areas of the U.S. has John been to?"),
    ("Can you list the order in which I raised each topic? Mention ONLY five items.",
     "Can you list the order in which I raised each topic?"),
    ("When did Caroline go to the support group?", "When did Caroline go to the support group?"),
])
def test_the_ask_is_the_last_question_after_its_cue(question, ask):
    assert ask_and_aside(question)[0] == ask


def test_aside_terms_weigh_less_unless_the_ask_has_them_too():
    terms = {t.text: t.weight for t in weighted_terms(content_terms("where is the lease"),
                                                      content_terms("the lease and the garden"))}
    assert terms == {"lease": 1.0, "garden": ASIDE_WEIGHT}


def test_a_questions_features_come_from_the_part_that_asks():
    asked = plan("I met Rosa in Paris last week. Anyway, what did Tom say about the budget?")
    assert "tom" in asked.entities and "rosa" not in asked.entities
    assert asked.first_person is False
    assert plan("What did I say about the budget?").first_person is True


@pytest.fixture
def svc(tmp_path: Any) -> Any:
    service = MemoryService.open(str(tmp_path / "aml.db"), synchronous="NORMAL")
    yield service
    service.close()


def _search(svc: MemoryService, query: str) -> list[str]:
    return [r["content"] for r in svc.search(SearchRequest(query, "u", 10, (), None))["data"]]


def test_the_end_of_a_long_question_is_searched(svc):
    evidence = "The trade fair with two thousand visitors was held in Hangzhou."
    chatter = " ".join(f"chatter{i}" for i in range(90))  # 90 distinct words before the ask
    svc.add(AddRequest("r1", "u", "s", (Message("user", evidence, 1_700_000_000_000),
                                        Message("user", "chatter1 chatter2 chatter3", 1_700_000_001_000))))
    question = f"{chatter}. Anyway, where was the trade fair held?"
    assert len(question) >= 300
    assert _search(svc, question)[0] == evidence
    # Control: the chatter alone does not find the evidence.
    assert evidence not in _search(svc, chatter)


def test_a_long_chinese_question_after_an_aside_finds_its_evidence(svc):
    evidence = "那场两千人的展会在杭州国际博览中心举办。"
    chatter = "今天天气真好，我去海边散步了。"
    svc.add(AddRequest("r1", "u", "s", (Message("user", evidence, 1_700_000_000_000),
                                        Message("user", chatter, 1_700_000_001_000))))
    question = CHATTER * 2 + "不好意思，我真正想问的是：那场两千人的展会在哪里举办？"
    assert len(question) >= 150 and len(plan(question).lexical) > MAX_QUERY_TERMS
    assert _search(svc, question)[0] == evidence


def test_past_the_cap_the_ask_and_the_rare_terms_are_kept(svc):
    svc.add(AddRequest("r1", "u", "s", (Message("user", "common word here", 1_700_000_000_000),
                                        Message("user", "common again", 1_700_000_001_000))))
    asked = [Term("words", f"ask{i}") for i in range(10)]
    aside = [Term("words", "common", ASIDE_WEIGHT)] + [
        Term("words", f"rare{i}", ASIDE_WEIGHT) for i in range(MAX_QUERY_TERMS)]
    with svc.store.connection("u", create=False) as conn:
        kept = TermIndex(conn).informative(tuple(asked + aside))
    assert len(kept) == MAX_QUERY_TERMS
    assert kept[:10] == asked  # the ask first, in its order
    assert Term("words", "common", ASIDE_WEIGHT) not in kept  # the common aside word gives way
