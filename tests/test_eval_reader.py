"""What a reader of the results sees beside the evidence: `date visible` holds on the shared
evaluation kit's cases (temporal questions with a dated answer; the date before the evidence or on
its line), `speaker visible` likewise (the speaker named on the evidence's own line), both are
None where they do not apply, and a run over a replay file reports their means and counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_eval_runner import run

from aml_retriever.evaluation import cli, dataset
from aml_retriever.evaluation.backends import Http, InProcess
from aml_retriever.evaluation.reader import date_visible, gold_date, speaker_visible

EV = "I went to a support group yesterday."
QUESTION = "When did Caroline go?"
ANSWER = "7 May 2023"


@pytest.mark.parametrize(("answer", "expected"), [
    ("7 May 2023", (2023, 5, 7)),
    ("The week before 9 June 2023", (2023, 6, 9)),
    ("June 2023", (2023, 6, None)),
    ("Since 2016", (2016, None, None)),
    ("Sweden", None),
])
def test_the_gold_date_is_the_answers_first_at_its_granularity(answer, expected):
    assert gold_date(answer) == expected


@pytest.mark.parametrize(("answer", "results", "expected"), [
    (ANSWER, ["noise", EV], 0.0),  # returned, but nothing dates it
    (ANSWER, [f"[2023-05-08] Caroline: {EV} (yesterday = 2023-05-07)"], 1.0),
    (ANSWER, [f"Sun, 7 May 2023\nCaroline: {EV}"], 1.0),
    (ANSWER, [f"Caroline: {EV}\n7 May 2023"], 0.0),  # after the evidence's line
    (ANSWER, [], 0.0),
    ("Sweden", [EV], None),  # the answer names no date
])
def test_date_visible_reads_the_date_before_the_evidence_or_on_its_line(answer, results, expected):
    assert date_visible(True, answer, [EV], results) == expected


def test_evidence_split_across_lines_is_found_and_its_whole_item_read():
    split = "I went to a support\ngroup yesterday.\n(7 May 2023)"
    assert date_visible(True, ANSWER, [EV], [split]) == 1.0
    assert date_visible(True, ANSWER, [EV], [split.replace("\n", " ", 1)]) == 0.0  # on one line


def test_date_visible_applies_to_temporal_questions_only():
    dated = [f"Sun, 7 May 2023\nCaroline: {EV}"]
    assert date_visible(True, ANSWER, [EV], dated) == 1.0  # control
    assert date_visible(False, ANSWER, [EV], dated) is None


@pytest.mark.parametrize(("speaker", "results", "expected"), [
    ("Caroline", [EV], 0.0),
    ("Caroline", [f"Mel: hi\n[8 May] Caroline (user): {EV}"], 1.0),
    ("Caroline", [f"Caroline: hi\nuser: {EV}"], 0.0),  # named on another line
    ("Melanie", [EV], None),  # the question names no speaker of its evidence
])
def test_speaker_visible_reads_the_name_on_the_evidences_line(speaker, results, expected):
    assert speaker_visible(QUESTION, [(EV, speaker)], results) == expected


def test_speaker_visible_needs_a_known_speaker():
    assert speaker_visible(QUESTION, [(f"Caroline: {EV}", "Caroline")], [f"Caroline: {EV}"]) == 1.0
    assert speaker_visible(QUESTION, [(f"Caroline: {EV}", "")], [f"Caroline: {EV}"]) is None


# ---- a run over a replay file ----------------------------------------------------------------

# (turn id, speaker, content). Caroline's first turn writes its date; Melanie's first does not
# (it says "yesterday"); her second never says who is speaking.
TURNS = [("D1:1", "Caroline", "Caroline: I went to the support group on 7 May 2023, it was moving."),
         ("D1:2", "Melanie", "Melanie: I signed up for a pottery class yesterday."),
         ("D1:3", "Melanie", "I painted a lake sunrise with watercolours last week."),
         ("D1:4", "Caroline", "Caroline: The kitten is called Miso."),
         ("D1:5", "Melanie", "Melanie: The weather was grey and rainy all weekend.")]
QUESTIONS = [  # (qid, question, LoCoMo category, answer, evidence)
    ("q0", "When did Caroline go to the support group?", 2, "7 May 2023", ["D1:1"]),
    ("q1", "When did Melanie sign up for a pottery class?", 2, "8 June 2023", ["D1:2"]),
    ("q2", "What did Melanie paint with watercolours at the lake?", 4, "a sunrise", ["D1:3"]),
    ("q3", "What is the kitten called?", 4, "Miso", ["D1:4"]),
]


def write_replay(path: Path) -> Path:
    roles = {"Caroline": "user", "Melanie": "assistant"}
    add = {"request_id": "locomo-1-s1-0", "user_id": "locomo-1", "session_id": "1-s1", "messages": [
        {"role": roles[speaker], "content": content, "timestamp": 1_686_225_600_000 + 1000 * i}
        for i, (_, speaker, content) in enumerate(TURNS)]}
    dia = {turn_id: {"content": content, "session": 1, "idx": i, "add": 0, "speaker": speaker}
           for i, (turn_id, speaker, content) in enumerate(TURNS)}
    questions = [{"qid": qid, "question": text, "category": category, "answer": answer,
                  "adversarial": False, "evidence": evidence}
                 for qid, text, category, answer, evidence in QUESTIONS]
    path.write_text(json.dumps({"conv": "1", "user_id": "locomo-1", "adds": [add], "dia": dia,
                                "questions": questions}))
    return path


def test_a_replay_run_reports_what_the_reader_sees(tmp_path, capsys):
    path = write_replay(tmp_path / "1.json")
    out = tmp_path / "out"
    assert cli.run_eval(["--replay", str(path), "--out", str(out), "--quiet", "--top-k", "10",
                         "--name", "tiny"]) == 0
    records = {r["qid"]: r for r in map(json.loads, (out / "tiny.questions.jsonl").open())}
    assert all(r["ranks"] == [1] for r in records.values())  # every 0 below is a 0 of the text
    assert [records[q]["date visible"] for q in ("q0", "q1", "q2", "q3")] == [1.0, 0.0, None, None]
    assert [records[q]["speaker visible"] for q in ("q0", "q1", "q2", "q3")] == [1.0, 1.0, 0.0, None]
    groups = json.loads((out / "tiny.json").read_text())["summary"]["groups"]
    assert groups["all"]["date visible"]["mean"] == 0.5 and groups["all"]["n date visible"] == 2
    assert groups["all"]["speaker visible"]["mean"] == pytest.approx(2 / 3)
    assert groups["all"]["n speaker visible"] == 3
    single_hop = groups["suite:locomo/category:single-hop"]
    assert single_hop["date visible"] is None and single_hop["n date visible"] == 0
    table = capsys.readouterr().out
    assert "| date visible | speaker visible |" in table
    assert "| 0.500 | 0.667 |" in table  # the all-answerable row


def test_a_server_over_http_shows_the_reader_what_the_service_in_process_does(tmp_path, make_app):
    conversations = dataset.load(write_replay(tmp_path / "1.json"))
    local = InProcess(tmp_path / "local.db")
    try:
        expected = run(local, conversations)
    finally:
        local.close()
    app = make_app(db_path=str(tmp_path / "served.db"), synchronous="NORMAL")
    remote = Http(f"http://127.0.0.1:{app.port}")
    try:
        received = run(remote, conversations)
    finally:
        remote.close()
    seen = [(r["date visible"], r["speaker visible"]) for r in received]
    assert seen == [(r["date visible"], r["speaker visible"]) for r in expected]
    assert (1.0, 1.0) in seen and (0.0, 1.0) in seen  # populated: both values occur
