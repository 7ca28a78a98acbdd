"""Agent memory suite: the generator is deterministic per style and plants what it claims (unique
contents, three to five versions per fact in time order, current questions without present-pointing
words, every past kind; restated versions and questions of a fact sharing its subject words;
paraphrased scenarios exactly as before the styles existed), the evaluator scores a fake memory
exactly, and one small run per style over the real ScopedMemory completes with every number in
[0, 1]."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from aml_retriever.evaluation import agent_memory
from aml_retriever.evaluation.agent_memory import (
    GLOBAL_CHANGES,
    LOCAL_CHANGES,
    PAST_KINDS,
    PRESENT_WORDS,
    RESTATED,
    STYLES,
    TOPICS,
    Scenario,
    evaluate,
    generate,
    main,
    run,
)

PRESENT = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in PRESENT_WORDS) + r")\b", re.IGNORECASE)
YEAR = re.compile(r"\bin (\d{4})\?$")


@pytest.fixture(scope="module", params=STYLES)
def scenario(request) -> Scenario:
    return generate(7, style=request.param)


def carries(text: str, word: str) -> bool:
    """Whether a text, without its {v} and {old} slots, has the word in some inflection ("target",
    "targets"; "live", "lives"; "monitor", "monitoring"; "note", "note-taking")."""
    forms = {word, word + "s", word + "es", word + "d", word + "ed", word + "ing",
             word.removesuffix("e") + "ing"}
    return bool(forms & set(re.findall(r"[a-z0-9]+", re.sub(r"\{\w+\}", " ", text).lower())))


def carries_subject(topic: str, text: str) -> bool:
    return all(carries(text, word) for word in RESTATED[topic].subject)


def without_values(text: str, versions) -> str:
    for version in versions:
        text = text.replace(version.value, " ")
    return text


# ---- the generator ---------------------------------------------------------------------------

def test_the_pool_holds_enough_topics_in_both_scopes_each_with_enough_values_and_phrasings():
    assert len(TOPICS) >= 40
    assert len({t.key for t in TOPICS}) == len(TOPICS)
    assert {t.scope for t in TOPICS} == {"local", "global"}
    for topic in TOPICS:
        assert len(set(topic.values)) == len(topic.values) >= 5, topic.key
        assert len(topic.plain) >= 3 and len(topic.current) >= 2, topic.key
        assert "{when}" in topic.past, topic.key
        for question in topic.current:
            assert not PRESENT.search(question), question


def test_every_topic_has_a_restated_wording_whose_every_sentence_carries_the_subject_words():
    assert set(RESTATED) == {t.key for t in TOPICS}
    for topic in TOPICS:
        restated = RESTATED[topic.key]
        assert restated.subject, topic.key
        for word in restated.subject:  # a content word, lower case, not one every statement has
            assert word == word.lower() and agent_memory._stems(word), (topic.key, word)
        assert len(restated.plain) >= 3 and len(restated.current) >= 2, topic.key
        assert "{when}" in restated.past, topic.key
        assert all("{v}" in t and "{old}" not in t for t in restated.plain), topic.key
        assert all("{v}" in t for t in restated.changes), topic.key
        generic = (LOCAL_CHANGES if topic.scope == "local" else GLOBAL_CHANGES) if restated.generic else ()
        changes = (*restated.changes, *(t.format(v="{v}", old="{old}", noun=restated.noun,
                                                 Noun=restated.noun[:1].upper() + restated.noun[1:])
                                        for t in generic))
        assert len(changes) >= 1, topic.key
        for text in (*restated.plain, *changes, *restated.current, restated.past, restated.noun):
            assert carries_subject(topic.key, text), (topic.key, text)
        for question in restated.current:
            assert not PRESENT.search(question), question


@pytest.mark.parametrize("style", STYLES)
def test_same_seed_same_scenario_and_another_seed_another(style):
    assert generate(7, style=style) == generate(7, style=style)
    assert generate(8, style=style) != generate(7, style=style)
    assert generate(7, topics=12, style=style) != generate(7, style=style)


def test_the_default_style_is_restated_and_the_styles_differ_in_wording_not_in_topics():
    assert generate(7) == generate(7, style="restated")
    restated, paraphrased = generate(7, style="restated"), generate(7, style="paraphrased")
    assert (restated.style, paraphrased.style) == ("restated", "paraphrased")
    assert [h.topic for h in restated.histories] == [h.topic for h in paraphrased.histories]
    assert restated.statements != paraphrased.statements
    with pytest.raises(ValueError):
        generate(7, style="shuffled")


def test_the_paraphrased_style_is_exactly_the_scenario_from_before_the_styles():
    scenario = generate(7, style="paraphrased")
    digest = hashlib.sha256(repr((scenario.statements, scenario.questions, scenario.histories)).encode())
    assert digest.hexdigest() == "660ac6ab096e978927065dce2d770437746b11eeef8972333d7b2b1415036fc8"
    smaller = generate(3, topics=12, style="paraphrased")
    digest = hashlib.sha256(repr((smaller.statements, smaller.questions, smaller.histories)).encode())
    assert digest.hexdigest() == "0b3712c6fb1ac07de516c993525910ff914d35d7e6bfbe4315a77df2fe19f822"


@pytest.mark.parametrize("seed", [1, 2, 3, 7])
def test_restated_versions_and_questions_of_a_fact_share_its_subject_words(seed):
    scenario = generate(seed, topics=len(TOPICS), style="restated")
    for history in scenario.histories:
        versions = history.versions
        # Every version and every question of the fact carries all its subject words outside the
        # values, so each shares them with every other version and with the current question.
        for version in versions:
            assert carries_subject(history.topic, without_values(version.content, versions)), version.content
        questions = [q for q in scenario.questions if q.topic == history.topic]
        assert [q.category for q in questions].count("current") == 1
        for question in questions:
            assert carries_subject(history.topic, without_values(question.query, versions)), question.query


def test_restated_facts_are_often_restated_in_the_same_sentence_and_paraphrased_ones_never():
    def same_sentence(scenario: Scenario) -> int:
        return sum(old.content.replace(old.value, "") == new.content.replace(new.value, "")
                   for h in scenario.histories for old, new in itertools.pairwise(h.versions))
    assert same_sentence(generate(7, style="restated")) >= 5
    assert same_sentence(generate(7, style="paraphrased")) == 0


def test_contents_are_unique_and_every_topic_has_three_to_five_versions_in_order(scenario):
    contents = [content for _, content in scenario.statements]
    assert len(contents) == len(set(contents))
    assert len(scenario.histories) == 40
    assert {h.scope for h in scenario.histories} == {"local", "global"}
    position = {content: i for i, content in enumerate(contents)}
    for history in scenario.histories:
        assert 3 <= len(history.versions) <= 5
        values = [v.value for v in history.versions]
        assert len(set(values)) == len(values)  # values drawn without repetition
        months = [v.year * 12 + v.month for v in history.versions]
        assert months == sorted(set(months))  # each version takes effect after the last
        indices = [position[v.content] for v in history.versions]
        assert indices == sorted(indices)  # remembered oldest first
        assert all((history.scope, v.content) in scenario.statements for v in history.versions)
        for version in history.versions:
            assert version.value in version.content
            # A version that carries its date carries its own, in one of the written forms.
            if version.dated:
                assert str(version.year) in version.content
    # Topics are interleaved, not remembered one after another.
    firsts = sorted(position[h.versions[0].content] for h in scenario.histories)
    lasts = sorted(position[h.versions[-1].content] for h in scenario.histories)
    assert firsts[-1] > lasts[0]


def test_versions_are_mostly_plain_restatements_and_about_a_third_are_dated(scenario):
    versions = [v for h in scenario.histories for v in h.versions]
    later = [v for h in scenario.histories for v in h.versions[1:]]
    assert not any(h.versions[0].changed for h in scenario.histories)
    assert 0.05 < sum(v.changed for v in later) / len(later) < 0.5
    assert 0.2 < sum(v.dated for v in versions) / len(versions) < 0.5


def test_distractors_are_mixed_into_both_scopes(scenario):
    versions = {v.content for h in scenario.histories for v in h.versions}
    distractors = [(scope, c) for scope, c in scenario.statements if c not in versions]
    assert 30 <= len(distractors) <= 60
    assert {scope for scope, _ in distractors} == {"local", "global"}


def test_questions_expect_statements_of_their_topic_and_name_the_past_as_claimed(scenario):
    statements = set(scenario.statements)
    histories = {h.topic: h for h in scenario.histories}
    queries = [q.query for q in scenario.questions]
    assert len(queries) == len(set(queries))
    for question in scenario.questions:
        assert (question.scope, question.expected) in statements
        versions = histories[question.topic].versions
        contents = [v.content for v in versions]
        index = contents.index(question.expected)
        if question.category == "current":
            assert index == len(versions) - 1
            assert not PRESENT.search(question.query), question.query
        elif question.kind == "first":
            assert index == 0
            assert re.search(r"\b(originally|at first|initially|first)\b", question.query)
        elif question.kind == "before":
            assert index == len(versions) - 2
            assert (f"before {versions[-1].value}" in question.query or "previously" in question.query
                    or "used to" in question.query)
        else:
            assert question.kind == "year"
            year = int(YEAR.search(question.query).group(1))
            assert versions[index].dated
            assert [v.year <= year for v in versions] == [True] * (index + 1) + [False] * (
                len(versions) - index - 1)
    # Current questions share a content word with the newest version (restated: the subject words,
    # always; paraphrased: mostly), never its wording.
    current = [q for q in scenario.questions if q.category == "current"]
    if scenario.style == "restated":
        assert all(carries_subject(q.topic, q.query) and carries_subject(q.topic, q.expected)
                   for q in current)
    else:
        assert sum(agent_memory.overlaps(q.query, q.expected) for q in current) >= 0.75 * len(current)
    assert all(q.query.rstrip("?").lower() not in q.expected.lower() for q in current)
    per_topic = Counter((q.topic, q.category) for q in scenario.questions)
    for history in scenario.histories:
        assert per_topic[(history.topic, "current")] == 1
        assert 1 <= per_topic[(history.topic, "past")] <= 2
    assert {q.kind for q in scenario.questions if q.category == "past"} == set(PAST_KINDS)


def test_topic_count_scales_and_is_bounded():
    assert len(generate(3, topics=10).histories) == 10
    assert len(generate(3, topics=len(TOPICS)).histories) == len(TOPICS)
    for bad in (0, len(TOPICS) + 1):
        with pytest.raises(ValueError):
            generate(3, topics=bad)


# ---- the evaluator over a fake memory ---------------------------------------------------------

class FakeMemory:
    """Ids in remember order; recall answers from a chooser of contents per question."""

    def __init__(self, scenario: Scenario, chooser) -> None:
        self.ids: dict[str, str] = {}
        self.questions = {q.query: q for q in scenario.questions}
        self.scenario = scenario
        self.chooser = chooser

    def remember(self, content: str, scope: str) -> str:
        self.ids[content] = f"{scope}:{len(self.ids) + 1}"
        return self.ids[content]

    def recall(self, query: str, limit: int) -> list[str]:
        question = self.questions[query]
        ranked = self.chooser(question, self.scenario.versions(question.topic))
        return [self.ids[content] for content in ranked][:limit]


def test_a_memory_that_returns_the_expected_statement_first_scores_one(scenario):
    fake = FakeMemory(scenario, lambda q, versions: [q.expected, *(v for v in versions if v != q.expected)])
    report = evaluate(fake.remember, fake.recall, scenario)
    assert report["statements"] == len(scenario.statements)
    for name in ("current", "past", "all", *(f"past/{k}" for k in PAST_KINDS)):
        group = report["groups"][name]
        assert group["questions"] > 0
        assert group["first"] == group["MRR"] == group["R@5"] == 1.0
        assert group["stale_first"] == group["newer_first"] == group["off_topic_first"] == 0.0


def test_a_memory_that_returns_the_oldest_version_first_is_stale_on_every_current_question(scenario):
    fake = FakeMemory(scenario, lambda q, versions: list(versions))
    groups = evaluate(fake.remember, fake.recall, scenario)["groups"]
    current = groups["current"]
    assert current["questions"] == len(scenario.histories)
    assert current["first"] == 0.0 and current["stale_first"] == 1.0 and current["newer_first"] == 0.0
    # The expected newest version is still returned, at rank 3 to 5: partial credit only.
    assert 0.2 <= current["MRR"] <= 1 / 3 and current["R@5"] == 1.0
    # Oldest first is right for "originally" questions and a newer-first error for none.
    assert groups["past/first"]["first"] == 1.0
    assert groups["past/before"]["first"] == 0.0 and groups["past/before"]["stale_first"] == 1.0


def test_a_memory_that_finds_nothing_scores_zero_and_reports_no_version_first(scenario):
    fake = FakeMemory(scenario, lambda q, versions: [])
    current = evaluate(fake.remember, fake.recall, scenario)["groups"]["current"]
    assert current["first"] == current["MRR"] == current["R@5"] == current["stale_first"] == 0.0
    assert current["off_topic_first"] == 1.0


def test_statements_remembered_twice_are_refused():
    with pytest.raises(ValueError):
        agent_memory.remember_all(lambda content, scope: "local:1", [("local", "a"), ("global", "a")])


# ---- over the project's memory ----------------------------------------------------------------

@pytest.mark.parametrize("style", STYLES)
def test_a_small_run_over_scoped_memory_reports_numbers_in_the_unit_interval(tmp_path: Path, style):
    report = run(5, topics=10, directory=tmp_path, style=style)
    assert report["style"] == style
    assert (tmp_path / "project" / ".aml" / "memory.db").exists()
    assert (tmp_path / "account" / "memory.db").exists()
    assert report["groups"]["current"]["questions"] == 10
    for group in report["groups"].values():
        for key, value in group.items():
            if key != "questions":
                assert 0.0 <= value <= 1.0, (key, value)
        if group["questions"]:
            # The first result is the expected version, another version, or none of them.
            shares = ("first", "stale_first", "newer_first", "off_topic_first")
            assert sum(group[k] for k in shares) == pytest.approx(1.0)


def test_main_prints_a_table_writes_json_and_rejects_bad_arguments(tmp_path, capsys, monkeypatch):
    calls = []

    def fake_run(seed: int, topics: int, limit: int, style: str) -> dict:
        calls.append((seed, topics, limit, style))
        scenario = generate(seed, topics, style)
        fake = FakeMemory(scenario, lambda q, versions: [q.expected])
        return evaluate(fake.remember, fake.recall, scenario, limit)

    monkeypatch.setattr(agent_memory, "run", fake_run)
    out = tmp_path / "agent.json"
    assert main(["--seeds", "1,2", "--topics", "6", "--json", str(out)]) == 0
    assert calls == [(1, 6, 10, "restated"), (2, 6, 10, "restated")]
    printed = capsys.readouterr().out
    assert "| current |" in printed and "| past |" in printed and "stale first" in printed
    assert "restated" in printed and "paraphrased" not in printed
    data = json.loads(out.read_text())
    assert data["seeds"] == [1, 2] and list(data["styles"]) == ["restated"]
    assert data["styles"]["restated"]["mean"]["current"]["first"] == 1.0
    calls.clear()
    assert main(["--seeds", "3", "--topics", "5", "--style", "both", "--json", str(out)]) == 0
    assert calls == [(3, 5, 10, "restated"), (3, 5, 10, "paraphrased")]
    printed = capsys.readouterr().out
    assert printed.count("| current |") == 2
    assert printed.index("restated") < printed.index("paraphrased")
    data = json.loads(out.read_text())
    assert list(data["styles"]) == ["restated", "paraphrased"]
    assert [r["style"] for r in data["styles"]["paraphrased"]["runs"]] == ["paraphrased"]
    assert main(["--seeds", "3", "--topics", "5", "--style", "paraphrased"]) == 0
    assert calls[-1] == (3, 5, 10, "paraphrased")
    for bad in (["--seeds", "x"], ["--seeds", ""], ["--topics", "0"], ["--topics", "500"],
                ["--limit", "abc"], ["--style", "shuffled"]):
        with pytest.raises(SystemExit) as exit_info:
            main(bad)
        assert exit_info.value.code == 2
    assert "Traceback" not in capsys.readouterr().err
