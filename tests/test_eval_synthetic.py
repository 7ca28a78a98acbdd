"""Synthetic generator: the same seed gives byte-identical data; every question's gold evidence
is exactly the planted message(s), unique in the user's memory; each suite plants what it
claims (relative dates that resolve to the asked date, updates in time order, hops across
sessions, answers absent from memory, the named scripts)."""

from __future__ import annotations

import datetime as dt
import itertools
import re
import unicodedata

import pytest

from aml_retriever.evaluation import dataset, suites, synthetic
from aml_retriever.evaluation.suites import SUITES
from aml_retriever.evaluation.vocab import ABSENT_TOPICS, MONTHS, WEEKDAYS
from aml_retriever.memory.validation import parse_add


def generate(suite: str = "mixed", difficulty: str = "mixed", seed: int = 1, scale: str = "tiny"):
    conversations, meta = synthetic.generate(suite, scale, difficulty, seed)
    return conversations, meta


def messages_by_ref(conversation):
    """(request_id, position) -> message dict, plus the session of each Add."""
    out, sessions = {}, {}
    for add in conversation.adds:
        sessions[add["request_id"]] = add["session_id"]
        for i, message in enumerate(add["messages"]):
            out[(add["request_id"], i)] = message
    return out, sessions


def test_same_seed_gives_byte_identical_data():
    first = dataset.dumps(synthetic.generate_json("mixed", "tiny", "mixed", 7))
    second = dataset.dumps(synthetic.generate_json("mixed", "tiny", "mixed", 7))
    assert first == second
    assert dataset.dumps(synthetic.generate_json("mixed", "tiny", "mixed", 8)) != first


@pytest.mark.parametrize("suite", [*synthetic.ALL_SUITES, "mixed"])
@pytest.mark.parametrize("difficulty", synthetic.DIFFICULTY_CHOICES)
def test_every_evidence_is_the_planted_message_and_unique(suite, difficulty):
    conversations, meta = generate(suite, difficulty, seed=3)
    assert meta["dropped_ambiguous"] == 0
    assert meta["questions"] >= synthetic.SCALES["tiny"].per_suite
    for conversation in conversations:
        by_ref, _ = messages_by_ref(conversation)
        corpus = [m["content"] for m in by_ref.values()]
        for question in conversation.questions:
            assert question.suite == suite if suite != "mixed" else question.suite in SUITES
            assert question.difficulty in synthetic.DIFFICULTIES
            assert bool(question.evidence) != question.adversarial
            for evidence in question.evidence:
                assert by_ref[(evidence.request_id, evidence.position)]["content"] == evidence.content
                assert sum(evidence.content in text for text in corpus) == 1


def test_adds_are_valid_contract_bodies_in_time_order():
    conversations, _ = generate(seed=2, scale="small")
    for conversation in conversations:
        last_by_session: dict[str, int] = {}
        for add in conversation.adds:
            request = parse_add(add, 200)
            assert 1 <= len(request.messages) <= synthetic.MAX_ADD_MESSAGES
            assert request.user_id == conversation.user_id
            for message in request.messages:
                assert message.timestamp_ms > last_by_session.get(add["session_id"], 0)
                last_by_session[add["session_id"]] = message.timestamp_ms


def test_scales_hold_their_promised_sizes():
    assert synthetic.SCALES["large"].messages >= 50_000
    conversations, _ = generate(scale="small", seed=1)
    assert len(conversations) == synthetic.SCALES["small"].users
    assert all(c.message_count >= synthetic.SCALES["small"].messages for c in conversations)


def test_unknown_parameters_are_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="classic"):
        synthetic.generate("nonsense", "tiny", "easy", 1)
    with pytest.raises(ValueError, match="hard"):
        synthetic.generate("classic", "tiny", "brutal", 1)
    with pytest.raises(ValueError, match="medium"):
        synthetic.generate("classic", "gigantic", "easy", 1)


# ---- per suite -----------------------------------------------------------------------------

NUMBERS = {"a": 1, "two": 2, "three": 3, "four": 4, "five": 5}


def said_offset(text: str, said_on: dt.date) -> dt.date:
    """The date a relative expression in `text` means, said on `said_on` (independent of the
    generator's own code)."""
    if "yesterday" in text:
        return said_on - dt.timedelta(days=1)
    found = re.search(r"\b(a|two|three|four|five) (day|week)s? ago", text)
    if found:
        unit = 7 if found.group(2) == "week" else 1
        return said_on - dt.timedelta(days=NUMBERS[found.group(1)] * unit)
    found = re.search(r"last (" + "|".join(WEEKDAYS) + ")", text)
    assert found, text
    back = (said_on.weekday() - WEEKDAYS.index(found.group(1))) % 7 or 7
    return said_on - dt.timedelta(days=back)


def asked_date(question: str) -> dt.date:
    found = re.search(r"(\d{4})-(\d{2})-(\d{2})", question)
    if found:
        return dt.date(*(int(g) for g in found.groups()))
    months = "|".join(MONTHS)
    found = re.search(rf"({months}) (\d{{1,2}}), (\d{{4}})", question)
    if found:
        return dt.date(int(found.group(3)), MONTHS.index(found.group(1)) + 1, int(found.group(2)))
    found = re.search(rf"(\d{{1,2}}) ({months}) (\d{{4}})", question)
    assert found, question
    return dt.date(int(found.group(3)), MONTHS.index(found.group(2)) + 1, int(found.group(1)))


def test_temporal_evidence_resolves_to_the_asked_date_only_with_its_message_time():
    conversations, _ = generate("temporal", "hard", seed=5, scale="small")
    checked = 0
    for conversation in conversations:
        by_ref, _ = messages_by_ref(conversation)
        for question in conversation.questions:
            (evidence,) = question.evidence
            message = by_ref[(evidence.request_id, evidence.position)]
            said_on = dt.datetime.fromtimestamp(message["timestamp"] / 1000, dt.UTC).date()
            meant = said_offset(evidence.content, said_on)
            if question.category == "when":
                assert asked_date(question.answer) == meant
            else:
                assert asked_date(question.question) == meant
                assert meant.isoformat() not in evidence.content  # only the message time resolves it
            checked += 1
    assert checked >= 10


def test_update_questions_cite_the_newest_and_the_one_before():
    conversations, _ = generate("update", "hard", seed=4, scale="small")
    for conversation in conversations:
        by_ref, _ = messages_by_ref(conversation)
        questions = list(conversation.questions)
        # Each chain asks "current" then "previous" (the quota may cut the last pair short).
        pairs = [(a, b) for a, b in itertools.pairwise(questions) if b.category == "previous"]
        assert len(pairs) >= len(questions) // 2
        for current, previous in pairs:
            assert current.category == "current"
            newest = by_ref[(current.evidence[0].request_id, current.evidence[0].position)]
            before = by_ref[(previous.evidence[0].request_id, previous.evidence[0].position)]
            assert before["timestamp"] < newest["timestamp"]
            assert current.answer in newest["content"] and previous.answer in before["content"]


def test_multi_hop_answers_need_messages_from_different_sessions():
    conversations, _ = generate("multi_hop", "mixed", seed=6, scale="small")
    for conversation in conversations:
        _, session_of = messages_by_ref(conversation)
        for question in conversation.questions:
            assert len(question.evidence) >= 2
            assert len({session_of[e.request_id] for e in question.evidence}) >= 2


def statement_prefix(question: str) -> tuple[str, list[str]]:
    """For a near-miss question: the opening of the statement that would answer it, and the same
    opening for every other owner."""
    owners = (suites.ME, *suites.RELATIVES)
    for fact in suites.CLASSIC:
        for owner in owners:
            if suites.fact_question(fact, owner) == question:
                openings = {o: suites.fact_text(fact, o, "\x00").split("\x00")[0] for o in owners}
                return openings[owner], [text for o, text in openings.items() if o != owner]
    raise AssertionError(f"no classic fact asks {question!r}")


def test_adversarial_answers_are_not_in_memory():
    conversations, _ = generate("adversarial", "mixed", seed=2, scale="small")
    absent_words = {question: topic for topic, question in ABSENT_TOPICS}
    seen = set()
    for conversation in conversations:
        contents = [m["content"] for add in conversation.adds for m in add["messages"]]
        lowered = "\n".join(contents).lower()
        for question in conversation.questions:
            assert question.adversarial and not question.evidence
            seen.add(question.category)
            if question.category == "absent":
                assert absent_words[question.question] not in lowered
            else:
                asked, others = statement_prefix(question.question)
                assert not any(asked in text for text in contents)
                assert any(other in text for other in others for text in contents)  # the near miss
    assert seen == {"absent", "near_miss"}


SCRIPT_TEST = {
    "chinese": lambda ch: "\u4e00" <= ch <= "\u9fff",
    "japanese": lambda ch: "\u3040" <= ch <= "\u30ff",
    "korean": lambda ch: "\uac00" <= ch <= "\ud7a3",
    "cyrillic": lambda ch: "\u0400" <= ch <= "\u04ff",
    "arabic": lambda ch: "\u0600" <= ch <= "\u06ff",
    "latin": lambda ch: not ch.isascii() and "LATIN" in unicodedata.name(ch, ""),
}


def test_multilingual_evidence_is_written_in_its_script():
    conversations, _ = generate("multilingual", "easy", seed=1, scale="small")
    categories = set()
    for conversation in conversations:
        for question in conversation.questions:
            categories.add(question.category)
            assert any(SCRIPT_TEST[question.category](ch) for ch in question.evidence[0].content)
    assert categories == set(SCRIPT_TEST)


def test_hard_latin_questions_drop_their_diacritics():
    conversations, _ = generate("multilingual", "hard", seed=1, scale="small")
    latin = [q for c in conversations for q in c.questions if q.category == "latin"]
    assert latin
    assert all(q.question.isascii() or "¿" in q.question for q in latin)
    assert any(not q.evidence[0].content.isascii() for q in latin)


def test_long_turn_evidence_is_a_short_user_message_answered_at_length():
    conversations, _ = generate("long_turn", seed=4, scale="small")
    for conversation in conversations:
        by_ref, _ = messages_by_ref(conversation)
        order = list(by_ref)  # Adds in time order, messages in order within each
        for question in conversation.questions:
            evidence = question.evidence[0]
            at = order.index((evidence.request_id, evidence.position))
            assert by_ref[order[at]]["role"] == "user"
            assert len(by_ref[order[at]]["content"].split()) < 20
            # The next assistant turn is the long reply (a later plant may stand between them).
            reply = next(by_ref[r] for r in order[at + 1:] if by_ref[r]["role"] == "assistant")
            assert len(reply["content"].split()) >= 300
            if question.category == "changed":
                assert question.question.endswith(" now?")


def test_chinese_questions_ask_one_of_several_facts_about_a_person():
    conversations, _ = generate("chinese", seed=4, scale="small")
    asides = 0
    for conversation in conversations:
        corpus = [m["content"] for m in messages_by_ref(conversation)[0].values()]
        for question in conversation.questions:
            person = question.evidence[0].content[1:3]  # 我表弟今年36岁。 -> 表弟
            assert sum(text.startswith("我" + person) for text in corpus) >= 2  # siblings
            asides += question.category == "aside"
            if question.category == "aside":
                assert len(question.question) > 30
    assert asides > 0
