"""Public benchmark converters: LoCoMo and LongMemEval files (tiny hand-written fixtures in their
published shapes) become replay files of chronological Adds within the limits, every turn with its
speaker and time, and questions whose gold evidence is the annotated turns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aml_retriever.evaluation import cli, dataset, public_data
from aml_retriever.memory.validation import parse_add

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "eval"


@pytest.fixture
def locomo() -> dict:
    (replay,) = public_data.locomo_files([FIXTURES / "locomo_tiny.json"])
    return replay


def all_messages(replay: dict) -> list[dict]:
    return [m for add in replay["adds"] for m in add["messages"]]


def test_locomo_times_are_read_without_a_locale():
    assert public_data.locomo_time("1:56 pm on 8 May, 2023") == 1683554160000
    assert public_data.locomo_time("12:05 am on 1 January, 2024") == 1704067500000
    with pytest.raises(public_data.ConversionError):
        public_data.locomo_time("yesterday at noon")


def test_longmemeval_dates_are_read():
    assert public_data.longmemeval_time("2023/05/20 (Sat) 02:21") == 1684549260000


def test_sessions_become_chronological_adds_within_the_limits(locomo):
    adds = locomo["adds"]
    assert [a["session_id"] for a in adds] == ["99-s2", "99-s1", "99-s1"]  # s2 is dated first
    assert [len(a["messages"]) for a in adds] == [4, 13, 12]  # 25 turns: two balanced Adds
    stamps = [m["timestamp"] for m in all_messages(locomo)]
    assert stamps == sorted(stamps)
    for add in adds:
        request = parse_add(add, 200)
        assert len(request.messages) <= public_data.MAX_MESSAGES
        assert sum(len(m.content.split()) for m in request.messages) <= public_data.MAX_WORDS
    assert locomo["stats"]["sessions"] == 2  # the empty session 3 sends nothing


def test_each_turn_carries_its_speaker_time_and_photo(locomo):
    dia = locomo["dia"]
    assert dia["D1:1"]["content"] == "Ana: Hi Ben! I finally picked up my pottery wheel yesterday."
    assert (dia["D1:1"]["speaker"], dia["D1:2"]["speaker"]) == ("Ana", "Ben")
    photo = "Ana: Here it is. [shares a photo: a photo of a blue ceramic bowl on a table]"
    assert dia["D1:7"]["content"] == photo
    first, second = locomo["adds"][1]["messages"][:2]
    assert (first["role"], second["role"]) == ("user", "assistant")  # speaker A, speaker B
    assert first["timestamp"] == public_data.locomo_time("4:05 pm on 12 June, 2023")
    assert second["timestamp"] == first["timestamp"] + 1000


def test_malformed_evidence_ids_are_read_leniently_and_unknown_ones_reported(locomo):
    evidence = {q["question"]: q for q in locomo["questions"]}
    assert evidence["What colour was Ana's first bowl?"]["evidence"] == ["D1:5", "D1:7"]
    assert evidence["When did Ben sign up for a marathon?"]["evidence"] == ["D2:1"]
    cat = evidence["What is the name of Ana's cat?"]
    assert cat["evidence"] == ["D2:4", "D1:9"]
    assert cat["evidence_dropped"] == ["D9:9"]
    assert evidence["What did Ana talk about at length?"]["evidence"] == []
    assert locomo["stats"]["questions_without_evidence"] == 1


def test_category_5_is_adversarial_with_its_adversarial_answer(locomo):
    question = locomo["questions"][4]
    assert question["category"] == 5 and question["adversarial"] is True
    assert question["answer"] == "Miso"
    assert not any(q["adversarial"] for q in locomo["questions"][:4])


def test_replay_loads_with_evidence_located_in_its_add(locomo, tmp_path):
    path = public_data.write_replay(locomo, tmp_path)
    (conversation,) = dataset.load(path)
    assert conversation.user_id == "locomo-99"
    wheel = conversation.questions[0]
    assert wheel.suite == "locomo" and wheel.category == "single-hop"
    by_id = {a["request_id"]: a for a in conversation.adds}
    for evidence in wheel.evidence:
        assert by_id[evidence.request_id]["messages"][evidence.position]["content"] == evidence.content
    assert [e.speaker for e in wheel.evidence] == ["Ana", "Ana"]
    assert conversation.questions[4].adversarial  # category 5
    # Category 2 is the temporal one, what `date visible` applies to.
    assert [q.temporal for q in conversation.questions] == [False, False, True, False, False, False]


def test_a_flattened_per_conversation_file_is_read_too():
    (replay,) = public_data.locomo_files([FIXTURES / "locomo_conversation_tiny.json"])
    assert replay["user_id"] == "locomo-locomo_conversation_tiny"
    assert len(replay["questions"]) == 2 and len(replay["dia"]) == 29


def test_add_sizes_are_balanced_and_respect_words():
    def msgs(*words: int) -> list[dict]:
        return [{"content": " ".join(["w"] * n)} for n in words]

    assert public_data.add_sizes(msgs(*[1] * 41)) == [14, 14, 13]
    assert public_data.add_sizes(msgs(900, 900, 900)) == [2, 1]
    assert public_data.add_sizes(msgs(2500, 10)) == [1, 1]  # a lone long message travels alone
    assert public_data.add_sizes(msgs(*[1] * 20)) == [20]


def test_longmemeval_gives_one_user_per_question():
    first, abstention = public_data.longmemeval_files([FIXTURES / "longmemeval_tiny.json"])
    assert first["user_id"] == "longmemeval-q_tiny_1"
    assert [a["session_id"] for a in first["adds"]] == ["q_tiny_1-sess_a", "q_tiny_1-sess_b"]
    assert first["stats"]["empty_turns_skipped"] == 1
    (question,) = first["questions"]
    assert question["evidence"] == ["sess_b:1"]
    assert first["dia"]["sess_b:1"]["content"] == "Update: I moved to Munich last week."
    assert question["category"] == "knowledge-update" and question["adversarial"] is False
    assert abstention["questions"][0]["adversarial"] is True
    assert abstention["questions"][0]["evidence"] == []
    assert all(m["role"] in ("user", "assistant") for m in all_messages(first))


def test_limit_stops_longmemeval_early():
    assert len(list(public_data.longmemeval_files([FIXTURES / "longmemeval_tiny.json"], limit=1))) == 1


def test_prepare_command_writes_replay_files(tmp_path, capsys):
    code = cli.prepare(["--locomo", str(FIXTURES / "locomo_tiny.json"),
                        "--longmemeval", str(FIXTURES / "longmemeval_tiny.json"), "--out", str(tmp_path)])
    assert code == 0
    names = sorted(p.name for p in tmp_path.glob("*.json"))
    assert names == ["locomo-99.json", "longmemeval-q_tiny_1.json", "longmemeval-q_tiny_2_abs.json"]
    assert json.loads((tmp_path / "locomo-99.json").read_text())["source"] == "locomo"
    assert "total: 3 files" in capsys.readouterr().out


def test_prepare_command_refuses_a_file_of_another_shape(tmp_path, capsys):
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"hello": "world"}))
    assert cli.prepare(["--locomo", str(wrong), "--out", str(tmp_path / "out")]) == 1
    assert "LoCoMo" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.prepare([])


def test_a_conversation_with_evidence_texts_loads_with_abstentions(tmp_path):
    """The shape of converted BEAM and MemDaily files: evidence given as the messages' texts."""
    adds = [{"request_id": "r1", "user_id": "u", "session_id": "s1", "messages": [
                {"role": "user", "content": "I adopted a cat named Miso.", "timestamp": 1_700_000_001_000},
                {"role": "assistant", "content": "Congratulations!", "timestamp": 1_700_000_002_000}]},
            {"request_id": "r2", "user_id": "u", "session_id": "s2", "messages": [
                {"role": "user", "content": "Miso turned two today.", "timestamp": 1_700_000_003_000}]}]
    path = tmp_path / "beam-100K-1.json"
    path.write_text(json.dumps({"conv": "beam-100K-1", "user_id": "u", "adds": adds, "questions": [
        {"qid": "q0", "question": "How old is my cat?", "category": "knowledge_update",
         "evidence": ["Miso turned two today.", "I adopted a cat named Miso."], "answer": "two"},
        {"qid": "q1", "question": "What is my dog called?", "category": "abstention",
         "evidence": [], "answer": ""}]}))
    (conversation,) = dataset.load_many([tmp_path])
    answerable, abstention = conversation.questions
    assert [(e.request_id, e.position) for e in answerable.evidence] == [("r2", 0), ("r1", 0)]
    assert (answerable.suite, answerable.category, answerable.adversarial) == (
        "beam", "knowledge_update", False)
    assert abstention.adversarial and not abstention.evidence  # the answer is not in memory
    assert cli.run_eval(["--replay", str(path), "--out", str(tmp_path / "out"), "--quiet",
                         "--top-k", "5", "--reference"]) == 0
    result = json.loads((tmp_path / "out" / "eval-replay.json").read_text())
    assert result["summary"]["groups"]["all"]["n"] == 1
    assert result["summary"]["groups"]["all"]["b@100w"]["mean"] == 1.0
    assert result["reference"]["groups"]["all"]["n"] == 1 and result["summary"]["adversarial"]["n"] == 1
    # No speaker names and no LoCoMo categories: what a reader sees is not measured, not an error.
    assert result["summary"]["groups"]["all"]["date visible"] is None
    assert result["summary"]["groups"]["all"]["n speaker visible"] == 0
