"""Synthetic generator: the same seed gives byte-identical data; every question's gold evidence
is exactly the planted message(s), unique in the user's memory; each suite plants what it
claims (relative dates that resolve to the asked date, updates in time order, hops across
sessions, answers absent from memory, the named scripts, two people who name each other only in
their bare text); and the speakers suite's evidence is found by who said it."""

from __future__ import annotations

import datetime as dt
import itertools
import re
import unicodedata

import pytest

from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.evaluation import dataset, runner, suites, synthetic
from aml_retriever.evaluation.backends import InProcess
from aml_retriever.evaluation.suites import SUITES
from aml_retriever.evaluation.vocab import ABSENT_TOPICS, MONTHS, SPEAKER_PEOPLE, WEEKDAYS
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


# ---- two people, bare text -------------------------------------------------------------------

SPEAKER_FORMS = {name: [f for f in (name, short) if f] for name, _, short in SPEAKER_PEOPLE}
ANY_NAME = "|".join(form for forms in SPEAKER_FORMS.values() for form in forms)


def speakers_roles(conversation) -> dict[str, str]:
    """Each speaker's name -> the role of the turns its questions cite."""
    by_ref, _ = messages_by_ref(conversation)
    return {e.speaker: by_ref[(e.request_id, e.position)]["role"]
            for q in conversation.questions for e in q.evidence}


def test_speakers_suite_is_deterministic_by_seed():
    first = dataset.dumps(synthetic.generate_json("speakers", "tiny", "mixed", 7))
    assert first == dataset.dumps(synthetic.generate_json("speakers", "tiny", "mixed", 7))
    assert dataset.dumps(synthetic.generate_json("speakers", "tiny", "mixed", 8)) != first


def test_speakers_name_each_other_only_in_some_turns_and_never_as_a_prefix():
    conversations, _ = generate("speakers", seed=2, scale="small")
    for conversation in conversations:
        messages = list(messages_by_ref(conversation)[0].values())
        assert {m["role"] for m in messages} == {"user", "assistant"}
        assert not any(re.match(rf"\s*({ANY_NAME})\s*:", m["content"]) for m in messages)
        # How many turns call each role's speaker by name (all of them the other side's).
        named = {}
        for name, role in speakers_roles(conversation).items():
            called = re.compile(r"\b(" + "|".join(SPEAKER_FORMS[name]) + r")\b")
            named[role] = sum(m["role"] != role and called.search(m["content"]) is not None
                              for m in messages)
        assert 0.1 * len(messages) < sum(named.values()) < 0.5 * len(messages)  # some turns, not all
        assert 0 < min(named.values()) < 0.5 * max(named.values())  # one side is named rarely


def test_speakers_gold_is_the_named_speakers_turn_and_the_other_told_the_same():
    conversations, _ = generate("speakers", "hard", seed=3, scale="small")
    categories = set()
    for conversation in conversations:
        by_ref, _ = messages_by_ref(conversation)
        role_of = speakers_roles(conversation)
        questions = conversation.questions
        for question in questions:
            (evidence,) = question.evidence
            assert re.search(rf"\b{evidence.speaker}\b", question.question)
            assert by_ref[(evidence.request_id, evidence.position)]["role"] == role_of[evidence.speaker]
            categories.add(question.category)
        assert sorted(role_of.values()) == ["assistant", "user"]  # two speakers, a role each
        # Asked in pairs, one question per speaker, about the kind of thing both told.
        for a, b in itertools.pairwise(questions[::2]):
            assert a.evidence[0].speaker == b.evidence[0].speaker
        for a, b in zip(questions[::2], questions[1::2], strict=False):
            assert a.evidence[0].speaker != b.evidence[0].speaker
    assert categories == {"often_addressed", "rarely_addressed"}


def speakers_records(conversations, retrieval: RetrievalConfig, store) -> list[dict]:
    backend = InProcess(store, retrieval=retrieval)
    try:
        runner.add_all(backend, conversations, 1, progress=None)
        return runner.score(runner.search_all(backend, conversations, 100, 1, progress=None))
    finally:
        backend.close()


def mean(records: list[dict], metric: str) -> float:
    return sum(r[metric] for r in records) / len(records)


def test_speakers_evidence_ranks_by_who_said_it_and_worse_without_the_speaker_signal(tmp_path):
    """Both speakers tell the same kind of thing in the same templates: without knowing who
    said which turn, the named speaker's turn and the other's tie. Scored on the speakers the
    conversation names often (clear evidence for the name finder); the control turns the speaker
    signal off, and a broken name finder leaves the two alike, failing this."""
    conversations = [c for seed in (1, 2) for c in synthetic.generate("speakers", "small", "easy", seed)[0]]
    found = speakers_records(conversations, RetrievalConfig(), tmp_path / "on.db")
    control = speakers_records(conversations, RetrievalConfig().without("speaker"), tmp_path / "off.db")
    often = [r for r in found if r["category"] == "often_addressed"]
    often_control = [r for r in control if r["category"] == "often_addressed"]
    assert len(often) >= 12
    assert mean(often, "R@5") >= 0.8
    assert mean(often, "MRR") - mean(often_control, "MRR") >= 0.08
    assert mean(found, "MRR") - mean(control, "MRR") >= 0.05


def test_a_written_dataset_keeps_who_spoke_each_evidence() -> None:
    """`--write-data` and a replay of it keep each evidence's speaker (what `speaker visible`
    reads) and the temporal flag."""
    from aml_retriever.evaluation.dataset import Evidence, Question, question_from_json, question_to_json

    question = Question("q1", "What did Grace paint?", "speakers", "often_addressed",
                        (Evidence("r1", 2, "I painted a lake.", "Grace"),), "a lake", temporal=True)
    assert question_from_json(question_to_json(question)) == question
    plain = Question("q2", "Where?", "classic", "c", (Evidence("r1", 0, "Here."),), "here")
    assert "speaker" not in question_to_json(plain)["evidence"][0]
    assert question_from_json(question_to_json(plain)) == plain
