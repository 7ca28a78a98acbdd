"""`rehearse` drives a server as the leaderboard's client does and fails exactly what the platform
would fail: a clean run against a real server exits 0 with every question scored (streaming too);
429 (and, for an Add, 409) is retried after Retry-After while a 503, a Search's 409, a malformed
200 or a timeout fails; no server, or data that cannot be read, is one line on stderr, never a
traceback; two rehearsals are compared by their answers' digests."""

from __future__ import annotations

import json
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from reliability_support import ServerProcess

from aml_retriever.cli import build_parser, main
from aml_retriever.evaluation import rehearsal, rehearsal_report
from aml_retriever.evaluation.dataset import load

DAY_MS = 86_400_000
START_MS = 1_700_000_000_000
FACTS = {
    "ana": ["Ana adopted a grey parrot called Mango", "Ana's sister lives in Lisbon",
            "Ana plays the cello on Sundays"],
    "ben": ["Ben rebuilt a 1972 motorbike engine", "Ben is allergic to hazelnuts",
            "Ben's team won the chess league"],
    "cai": ["Cai planted forty tulip bulbs", "Cai's favourite film is Paprika",
            "Cai studies glacier geology"],
}
FILLER = ["How was your week?", "Pretty busy, lots of meetings.", "The weather turned cold again.",
          "I made soup for dinner.", "Traffic was terrible this morning.",
          "We should catch up soon.", "I finished the book you lent me."]


def replay_file(user: str, adds: int = 10) -> dict[str, Any]:
    """A replay-shaped conversation (LoCoMo's converted shape: `dia` turns, questions citing turn
    ids): `adds` Adds of two messages, the user's facts spread among small talk."""
    bodies, dia = [], {}
    facts = iter(FACTS[user])
    for a in range(adds):
        texts = [next(facts, None) if a % 3 == 1 else None, FILLER[(a * 2) % len(FILLER)]]
        texts = [t or FILLER[(a * 2 + 1) % len(FILLER)] + f" ({user} {a})" for t in texts]
        bodies.append({"request_id": f"{user}-r{a}", "user_id": f"rh-{user}",
                       "session_id": f"{user}-s{a // 4}",
                       "messages": [{"role": "user" if i == 0 else "assistant", "content": t,
                                     "timestamp": START_MS + a * DAY_MS + i * 1000}
                                    for i, t in enumerate(texts)]})
        for i, t in enumerate(texts):
            dia[f"D{a}:{i}"] = {"content": t, "add": a, "speaker": "Ana" if user == "ana" else "Sam"}
    turn = {fact: tid for tid, t in dia.items() for fact in FACTS[user] if t["content"] == fact}
    questions = [{"qid": f"{user}-q{n}", "question": q, "category": 4, "answer": "",
                  "evidence": [turn[FACTS[user][n]]]}
                 for n, q in enumerate(_questions(user))]
    return {"user_id": f"rh-{user}", "adds": bodies, "dia": dia, "questions": questions}


def _questions(user: str) -> list[str]:
    return {"ana": ["What is Ana's parrot called?", "Where does Ana's sister live?",
                    "Which instrument does Ana play?"],
            "ben": ["What engine did Ben rebuild?", "What is Ben allergic to?",
                    "What did Ben's team win?"],
            "cai": ["How many tulip bulbs did Cai plant?", "What is Cai's favourite film?",
                    "What does Cai study?"]}[user]


def texts_file() -> dict[str, Any]:
    """A conversation with evidence texts and MemDaily-style choices (sent as `options`)."""
    texts = ["Dana keeps her spare key under the blue flowerpot", "Dana likes green tea"]
    return {"conv": "tiny-1", "user_id": "rh-dana",
            "adds": [{"request_id": f"dana-r{i}", "user_id": "rh-dana", "session_id": "dana-s",
                      "messages": [{"role": "user", "content": t, "timestamp": START_MS + i * 1000}]}
                     for i, t in enumerate(texts)],
            "questions": [{"qid": "dana-q0", "question": "Where is Dana's spare key?",
                           "evidence": [texts[0]], "answer": "B"}],
            "stats": {"choices": {"dana-q0": {"A": "under the mat", "B": "under the flowerpot"}}}}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("data")
    for user in FACTS:
        (folder / f"{user}.json").write_text(json.dumps(replay_file(user)))
    (folder / "dana.json").write_text(json.dumps(texts_file()))
    return folder


@pytest.fixture(scope="module")
def questions(data: Path) -> int:
    return sum(len(c.questions) for path in data.glob("*.json") for c in load(path))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    process = ServerProcess(tmp_path_factory.mktemp("store") / "aml.db")
    yield f"http://127.0.0.1:{process.port}"
    process.stop()


def rehearse(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["rehearse", *argv])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def report(out: Path) -> dict[str, Any]:
    return json.loads((out / "report.json").read_text())


# ---- against a real server -------------------------------------------------------------------

def test_a_clean_run_fails_nothing_and_scores_every_question(capsys, tmp_path, data, questions, server):
    out = tmp_path / "run"
    code, printed, err = rehearse(capsys, "--url", server, "--data", str(data), "--out", str(out),
                                  "--add-concurrency", "8", "--search-concurrency", "8")
    assert code == 0, printed + err
    got = report(out)
    assert got["failed"] == 0 and got["questions_scored"] == questions
    assert got["requests"] == {"add": {"200": 32}, "search": {"200": questions}}
    assert got["outcomes"]["search"]["ok"] == questions
    assert set(got["evidence"]) == {"all", "locomo", "tiny"} and got["evidence"]["locomo"]["n"] == 9
    assert got["evidence"]["locomo"]["R@10"] == 1.0
    assert got["data"]["questions_with_options"] == 1
    assert got["settings"]["api_key"] == "none"
    lines = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    assert len(lines) == questions and all(len(line["sha256"]) == 64 for line in lines)
    files = got["prompts"]["files"]
    assert len(files) == 3 and all(f["estimated_tokens"] >= f["characters"] // 8 for f in files)
    first = (out / files[0]["file"]).read_text()
    assert first.startswith(f"Memories for user {files[0]['user_id']}:\n")
    assert first.endswith("\n\nQuestion: What is Ana's parrot called?")
    assert "Ana adopted a grey parrot called Mango" in first.split("\n")[1:]
    assert "failed: 0" in printed and str(out / "report.json") in printed


def test_a_streaming_run_asks_every_question_after_each_stage(capsys, tmp_path, data, questions, server):
    out = tmp_path / "streaming"
    code, printed, err = rehearse(capsys, "--url", server, "--data", str(data), "--out", str(out),
                                  "--streaming", "--stages", "3", "--add-concurrency", "4",
                                  "--search-concurrency", "4", "--limit-users", "2")
    assert code == 0, printed + err
    got = report(out)
    assert got["failed"] == 0 and got["questions_scored"] == 6
    assert got["requests"] == {"add": {"200": 20}, "search": {"200": 18}}  # 6 questions, 3 stages
    assert got["settings"]["streaming"] and got["settings"]["stages"] == 3


def test_two_rehearsals_are_compared_by_their_answers(capsys, tmp_path, data):
    first, second = (ServerProcess(tmp_path / f"{n}.db") for n in "ab")
    try:
        for process, seed in ((first, "1"), (second, "2")):
            code, printed, err = rehearse(capsys, "--url", f"http://127.0.0.1:{process.port}",
                                          "--data", str(data), "--seed", seed, "--quiet",
                                          "--out", str(tmp_path / seed))
            assert code == 0, printed + err
    finally:
        first.stop()
        second.stop()
    # Two arrival orders of the same Adds (seeds 1 and 2) give the same answers.
    code, printed, _ = rehearse(capsys, "--compare", str(tmp_path / "1"), str(tmp_path / "2"))
    assert (code, printed) == (0, "0 of 10 questions answered differently\n")
    shutil.copytree(tmp_path / "1", tmp_path / "copy")
    assert rehearse(capsys, "--compare", str(tmp_path / "1"), str(tmp_path / "copy"))[:2] == \
        (0, "0 of 10 questions answered differently\n")
    answers = tmp_path / "copy" / "answers.jsonl"
    lines = answers.read_text().splitlines()
    edited = json.loads(lines[3])
    edited["sha256"] = "0" * 64
    answers.write_text("\n".join([*lines[:3], json.dumps(edited), *lines[4:]]) + "\n")
    code, printed, _ = rehearse(capsys, "--compare", str(tmp_path / "1"), str(tmp_path / "copy"))
    assert code == 1 and printed.splitlines() == ["1 of 10 questions answered differently",
                                                  f"  {edited['user_id']} {edited['qid']}"]


# ---- against a stand-in server that answers by a script --------------------------------------

GOOD = "good"  # the answer the platform accepts, made from what was sent


@dataclass(frozen=True)
class Step:
    status: int = 200
    body: Any = GOOD
    headers: dict[str, str] = field(default_factory=dict)
    sleep: float = 0.0


def good(route: str, sent: dict[str, Any]) -> dict[str, Any]:
    if route == "add":
        return {"success": True, "request_id": sent["request_id"], "user_id": sent["user_id"],
                "session_id": sent["session_id"], "stored": len(sent["messages"])}
    return {"data": [{"content": "something", "score": 0.5}]}


@contextmanager
def scripted(**script: list[Step]) -> Iterator[tuple[str, dict[str, list[dict[str, Any]]]]]:
    """A server answering each route's requests with its steps in turn (the last one repeated,
    a good answer when the route has none); yields its URL and the bodies it received."""
    received: dict[str, list[dict[str, Any]]] = {"add": [], "search": [], "authorization": []}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            route = self.path.strip("/")
            sent = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                steps = script.get(route) or [Step()]
                step = steps[min(len(received[route]), len(steps) - 1)]
                received[route].append(sent)
                received["authorization"].append(self.headers.get("Authorization"))
            time.sleep(step.sleep)
            body = step.body if isinstance(step.body, bytes) else json.dumps(
                good(route, sent) if step.body == GOOD else step.body).encode()
            self.send_response(step.status)
            for name, value in {"Content-Type": "application/json", **step.headers}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            try:
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (the slow server's test)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def one_user(tmp_path: Path) -> Path:
    """Two Adds and one question with answer choices."""
    path = tmp_path / "dana.json"
    path.write_text(json.dumps(texts_file()))
    return path


def scripted_run(capsys, tmp_path: Path, url: str, data: Path,
                 *extra: str) -> tuple[int, dict[str, Any], str]:
    """One request at a time, in file order, so the script meets them in a known order."""
    out = tmp_path / "out"
    code, _, err = rehearse(capsys, "--url", url, "--data", str(data), "--out", str(out), "--quiet",
                            "--add-concurrency", "1", "--search-concurrency", "1", "--in-order", *extra)
    return code, report(out), err


def test_a_429_is_honoured_and_sent_again(capsys, tmp_path, one_user):
    busy = Step(429, {"error": {"code": "overloaded"}}, {"Retry-After": "0"})
    with scripted(add=[busy, busy, Step()], search=[busy, Step()]) as (url, received):
        code, got, err = scripted_run(capsys, tmp_path, url, one_user)
    assert code == 0, err
    assert got["requests"] == {"add": {"200": 2, "429": 2}, "search": {"200": 1, "429": 1}}
    assert got["outcomes"]["add"]["ok_after_retry"] == 1 and got["outcomes"]["add"]["ok"] == 1
    assert got["outcomes"]["add"]["retried_examples"] == ["dana-r0: HTTP 429 x2, then 200"]
    assert got["retries"] == {"add": 2, "search": 1} and got["retry_after_waited_s"]["add"] == 0
    assert received["search"][-1] == {"user_id": "rh-dana", "query": "Where is Dana's spare key?",
                                      "top_k": 100, "options": ["under the mat", "under the flowerpot"]}


def test_the_key_is_sent_as_a_bearer_token_and_never_written(capsys, tmp_path, one_user, monkeypatch):
    monkeypatch.setenv("AML_API_KEY", "from-the-environment")
    with scripted() as (url, received):
        assert scripted_run(capsys, tmp_path, url, one_user, "--api-key", "k-secret")[0] == 0
        assert set(received["authorization"]) == {"Bearer k-secret"}
        received["authorization"].clear()
        code, got, _ = scripted_run(capsys, tmp_path, url, one_user)
        assert set(received["authorization"]) == {"Bearer from-the-environment"}
    assert code == 0 and got["settings"]["api_key"] == "given"
    written = "".join(path.read_text() for path in (tmp_path / "out").rglob("*") if path.is_file())
    assert "k-secret" not in written and "from-the-environment" not in written


def test_an_add_answered_409_is_sent_again(capsys, tmp_path, one_user):
    conflict = Step(409, {"error": {"code": "busy"}}, {"Retry-After": "0"})
    with scripted(add=[conflict, Step()]) as (url, received):
        code, got, err = scripted_run(capsys, tmp_path, url, one_user)
    assert code == 0, err
    assert got["requests"]["add"] == {"200": 2, "409": 1} and got["outcomes"]["add"]["ok_after_retry"] == 1
    assert received["add"][0] == received["add"][1]  # the same body again


@pytest.mark.parametrize("script, route, reason", [
    ({"search": [Step(503, {"error": {"code": "overloaded"}})]}, "search", "HTTP 503 (overloaded)"),
    ({"search": [Step(409, {"error": {"code": "conflict"}}, {"Retry-After": "0"})]}, "search",
     "HTTP 409 (conflict)"),  # retried for an Add, never for a Search
    ({"add": [Step(500, b"oops")]}, "add", "HTTP 500"),
    ({"search": [Step(body={"data": [{"text": "no content"}]})]}, "search", "data[0] has no string content"),
    ({"search": [Step(body={"data": [{"content": "x", "score": "high"}]})]}, "search",
     "score is not a number"),
    ({"search": [Step(body={"data": [{"content": "x"}] * 101})]}, "search", "more than top_k 100"),
    ({"search": [Step(body=b"<html>")]}, "search", "body is not JSON"),
    ({"add": [Step(body={"success": True, "request_id": "other", "user_id": "rh-dana",
                         "session_id": "dana-s", "stored": 1})]}, "add", "request_id is not echoed"),
    ({"add": [Step(body={"success": True, "request_id": "dana-r0", "user_id": "rh-dana",
                         "session_id": "dana-s", "stored": "1"})]}, "add", "stored is not an integer"),
])
def test_what_the_platform_fails_fails_the_rehearsal(capsys, tmp_path, one_user, script, route, reason):
    with scripted(**script) as (url, received):
        code, got, err = scripted_run(capsys, tmp_path, url, one_user)
    assert code == 1 and err == ""
    assert got["outcomes"][route]["failed"] >= 1 and got["failed"] >= 1
    assert reason in got["outcomes"][route]["failed_examples"][0]
    assert len(received[route]) == got["outcomes"][route]["failed"]  # none was sent again


def test_a_slow_server_fails_by_timeout(capsys, tmp_path, one_user):
    with scripted(search=[Step(sleep=1.0)]) as (url, _):
        code, got, _ = scripted_run(capsys, tmp_path, url, one_user, "--timeout", "0.2")
    assert code == 1 and got["requests"]["search"] == {"timeout": 1}
    assert got["outcomes"]["search"]["failed_examples"] == ["rh-dana dana-q0: no answer within 0.2 s"]


# ---- no server, bad data, bad flags ----------------------------------------------------------

def test_no_server_is_one_line_and_a_report(capsys, tmp_path, one_user):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = tmp_path / "out"
    code, printed, err = rehearse(capsys, "--url", f"http://127.0.0.1:{port}", "--data", str(one_user),
                                  "--out", str(out))
    assert code == 1 and printed == ""
    assert err.startswith(f"error: nothing answers at 127.0.0.1:{port} (connection refused)")
    assert err.count("\n") == 1
    got = report(out)
    assert "connection refused" in got["aborted"] and got["failed"] == got["unsent"] == 3
    assert got["requests"] == {"add": {}, "search": {}}


@pytest.mark.parametrize("given, files, says", [
    ("missing", {}, "missing: no such file or directory"),
    ("", {}, "no *.json replay or dataset files in it"),
    ("", {"a.json": json.dumps(texts_file()), "broken.json": '{"adds": ['}, "broken.json: not valid JSON"),
    ("", {"odd.json": '{"user_id": "u", "adds": [{"request_id": "r"}], "dia": {}, "questions": []}'},
     "odd.json: an Add of 'u' is not an Add body"),
    ("qs.json", {"qs.json": '{"user_id": "u", "adds": [], "questions": [{}]}'},
     "qs.json: not a replay shape (no 'qid' field)"),
    ("", {"a.json": json.dumps(texts_file()), "b.json": json.dumps(texts_file())},
     "user 'rh-dana' is in both"),
])
def test_data_that_cannot_be_read_is_one_line_naming_it(capsys, tmp_path, given, files, says):
    folder = tmp_path / "data"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    code, printed, err = rehearse(capsys, "--url", "http://127.0.0.1:9", "--data", str(folder / given),
                                  "--out", str(tmp_path / "out"))
    assert code == 1 and printed == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and says in err, err


@pytest.mark.parametrize("argv", [
    ["--data", "x"], ["--url", "http://127.0.0.1:9"], ["--url", "ftp://x", "--data", "x"],
    ["--url", "http://127.0.0.1:9", "--data", "x", "--stages", "2"],
    ["--url", "http://127.0.0.1:9", "--data", "x", "--add-concurrency", "0"],
    ["--url", "http://127.0.0.1:9", "--data", "x", "--search-concurrency", "4097"],
    ["--url", "http://127.0.0.1:9", "--data", "x", "--timeout", "0"],
])
def test_usage_errors_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as exited:
        main(["rehearse", *argv])
    assert exited.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_the_flags_defaults_are_the_settings_defaults():
    parser = build_parser()
    args = parser.parse_args(["rehearse", "--url", "http://h", "--data", "x"])
    settings = rehearsal.Settings(url="http://h", data=("x",))
    for name in ("add_concurrency", "search_concurrency", "top_k", "seed", "timeout", "prompts", "out"):
        assert getattr(args, name) == getattr(settings, name), name


# ---- the rules, one by one -------------------------------------------------------------------

@pytest.mark.parametrize("header, seconds", [
    ("0", 0.0), ("2", 2.0), ("1.5", 1.5), ("600", 60.0), (None, 60.0), ("soon", 60.0), ("-1", 60.0),
    ("Wed, 21 Oct 2015 07:28:00 GMT", 60.0),
])
def test_retry_after_is_read_as_the_platform_reads_it(header, seconds):
    assert rehearsal.retry_wait(header) == seconds
    assert rehearsal.retry_wait(header, 429) == seconds


def test_a_409_or_524_without_retry_after_is_sent_again_after_a_second():
    assert rehearsal.retry_wait(None, 409) == rehearsal.retry_wait("soon", 524) == 1.0
    assert rehearsal.retry_wait("3", 409) == 3.0  # control: a Retry-After given is honoured


def test_stages_are_consecutive_parts_of_the_adds():
    adds = [{"n": i} for i in range(10)]
    parts = rehearsal.stage_parts(adds, 4)
    assert [len(p) for p in parts] == [2, 3, 2, 3] and [a for p in parts for a in p] == adds
    assert [len(p) for p in rehearsal.stage_parts(adds[:2], 4)] == [1, 1]
    assert rehearsal.stage_parts([], 4) == [[]]


def test_prompts_are_picked_across_data_sets_first():
    picked = rehearsal_report.pick(["a", "a", "b"], [2, 2, 1], 5)
    assert picked == [(0, 0), (2, 0), (1, 0), (0, 1), (1, 1)]
    assert rehearsal_report.pick(["a"], [3], 0) == []
    assert rehearsal_report.prompt("u1", ["one", "two"], "Why?") == \
        "Memories for user u1:\none\ntwo\n\nQuestion: Why?"
