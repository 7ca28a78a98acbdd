"""Runners: the in-process service and a live server give the same rankings for the same data;
a server without provenance is scored by content; summaries average the right questions;
the HTTP client retries busy answers and reports refusals by their error code only."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator

import pytest

from aml_retriever.evaluation import runner, synthetic
from aml_retriever.evaluation.backends import EvalError, Http, InProcess
from aml_retriever.evaluation.dataset import Conversation, Evidence, Question


def tiny_conversation(user: str = "u1") -> Conversation:
    texts = ["An unrelated note about gardening tools", "Alice keeps a secret flamingo named Pinky",
             "Another unrelated note about bicycles"]
    add = {"request_id": "r1", "user_id": user, "session_id": "s1",
           "messages": [{"role": "user", "content": t, "timestamp": 1_700_000_000_000 + i * 1000}
                        for i, t in enumerate(texts)]}
    asked = Question("q1", "flamingo Pinky", "classic", "name",
                     (Evidence("r1", 1, texts[1]),), "Pinky", difficulty="easy")
    absent = Question("q2", "horse stable saddle", "adversarial", "absent", (), "", adversarial=True)
    return Conversation(user, (add,), (asked, absent))


def run(backend, conversations, top_k: int = 10, concurrency: int = 1) -> list[dict]:
    runner.add_all(backend, conversations, concurrency, progress=None)
    return runner.score(runner.search_all(backend, conversations, top_k, concurrency, progress=None))


def test_in_process_run_finds_planted_evidence_first(tmp_path):
    backend = InProcess(tmp_path / "aml.db")
    try:
        records = run(backend, [tiny_conversation()])
    finally:
        backend.close()
    asked, absent = records
    assert asked["ranks"] == [1] and asked["R@1"] == 1.0 and asked["MRR"] == 1.0
    assert absent["adversarial"] and "R@1" not in absent  # no evidence: not scored for recall
    summary = runner.summarise(records)
    assert summary["groups"]["all"]["n"] == 1
    assert summary["adversarial"]["n"] == 1


def ranks_of(records: list[dict]) -> dict[str, list]:
    return {r["qid"]: r.get("ranks") for r in records}


@pytest.fixture
def tiny_data() -> list[Conversation]:
    conversations, _ = synthetic.generate("classic", "tiny", "mixed", 11)
    return conversations


def test_http_and_in_process_rank_alike(tiny_data, tmp_path, make_app):
    local = InProcess(tmp_path / "local.db")
    try:
        expected = run(local, tiny_data, top_k=20)
    finally:
        local.close()
    app = make_app(db_path=str(tmp_path / "served.db"), synchronous="NORMAL")
    remote = Http(f"http://127.0.0.1:{app.port}")
    try:
        received = run(remote, tiny_data, top_k=20, concurrency=4)
    finally:
        remote.close()
    assert ranks_of(received) == ranks_of(expected)
    assert any(r.get("ranks") for r in expected)


def test_a_server_without_provenance_is_scored_by_content(tiny_data, tmp_path, make_app):
    with_ids = make_app(db_path=str(tmp_path / "a.db"), synchronous="NORMAL")
    without = make_app(db_path=str(tmp_path / "b.db"), provenance=False, synchronous="NORMAL")
    results = []
    for app in (with_ids, without):
        backend = Http(f"http://127.0.0.1:{app.port}")
        try:
            results.append(run(backend, tiny_data, top_k=20, concurrency=4))
        finally:
            backend.close()
    assert ranks_of(results[0]) == ranks_of(results[1])


def test_http_sends_the_api_key_and_reports_refusals_by_code(tmp_path, make_app):
    app = make_app(db_path=str(tmp_path / "k.db"), api_key="sekrit")
    good, bad = Http(f"http://127.0.0.1:{app.port}", "sekrit"), Http(f"http://127.0.0.1:{app.port}", "wrong")
    try:
        good.add(tiny_conversation().adds[0])
        assert good.search({"query": "flamingo", "user_id": "u1", "top_k": 5})
        with pytest.raises(EvalError, match="401: unauthorized") as refused:
            bad.search({"query": "flamingo", "user_id": "u1", "top_k": 5})
        assert "flamingo" not in str(refused.value)
    finally:
        good.close()
        bad.close()


def test_http_without_keep_alive_opens_a_connection_per_request(tmp_path, make_app):
    app = make_app(db_path=str(tmp_path / "f.db"), synchronous="NORMAL")
    client = Http(f"http://127.0.0.1:{app.port}", keep_alive=False)
    try:
        client.add(tiny_conversation().adds[0])
        first = client.search({"query": "flamingo", "user_id": "u1", "top_k": 5})
        assert client._local.conn is None  # dropped after each answer
        assert client.search({"query": "flamingo", "user_id": "u1", "top_k": 5}) == first
    finally:
        client.close()


@pytest.fixture
def busy_server() -> Iterator[tuple[int, list[int]]]:
    """A server that answers 503 to every other request, counting requests."""
    calls: list[int] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            calls.append(1)
            status, body = (503, b"{}") if len(calls) % 2 else (200, b'{"data": []}')
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server.server_address[1], calls
    server.shutdown()
    server.server_close()


def test_http_retries_a_busy_server(busy_server):
    port, calls = busy_server
    client = Http(f"http://127.0.0.1:{port}", retries=2)
    try:
        assert client.search({"query": "q", "user_id": "u", "top_k": 1}) == []
    finally:
        client.close()
    assert len(calls) == 2 and client.retried == 1


def test_http_gives_up_after_its_retries(busy_server):
    port, _ = busy_server
    client = Http(f"http://127.0.0.1:{port}", retries=0)
    try:
        with pytest.raises(EvalError, match="after 1 attempts"):
            client.search({"query": "q", "user_id": "u", "top_k": 1})  # the first answer is 503
    finally:
        client.close()


def record(qid: str, user: str, suite: str, category: str, r5: float, adversarial: bool = False,
           top: float | None = 1.0, difficulty: str = "easy") -> dict:
    base = {"qid": qid, "user_id": user, "suite": suite, "category": category, "difficulty": difficulty,
            "adversarial": adversarial, "top_score": top, "results": 3.0 if top is not None else 0.0,
            "words": 10.0, "latency_ms": 1.0}
    if adversarial and r5 < 0:
        return {**base, "evidence": 0}
    return {**base, "evidence": 1, **{k: r5 for k in
            ("R@1", "R@5", "R@10", "R@20", "R@50", "R@100", "all@1", "all@5", "all@10", "all@20", "all@50",
             "all@100", "MRR", "nDCG@10", "b@200w", "b@500w", "b@1000w", "b@2000w")}}


def test_summaries_average_answerable_questions_per_group():
    records = [record("a", "u", "classic", "name", 1.0), record("b", "u", "classic", "date", 0.0),
               record("c", "u", "update", "current", 0.5, difficulty="hard"),
               record("d", "u", "locomo", "adversarial", 0.25, adversarial=True),
               record("e", "u", "adversarial", "absent", -1, adversarial=True, top=0.5),
               record("f", "u", "adversarial", "absent", -1, adversarial=True, top=None)]
    summary = runner.summarise(records)
    groups = summary["groups"]
    assert groups["all"]["n"] == 3 and groups["all"]["R@5"] == pytest.approx(0.5)
    assert groups["suite:classic"]["R@5"] == pytest.approx(0.5)
    assert groups["difficulty:easy"]["n"] == 2 and groups["difficulty:hard"]["R@5"] == 0.5
    # An adversarial question with evidence (LoCoMo's category 5) has its category row only.
    assert groups["suite:locomo/category:adversarial"]["R@5"] == 0.25
    assert "suite:locomo" not in groups
    adversarial = summary["adversarial"]
    assert adversarial["n"] == 2 and adversarial["empty_rate"] == 0.5
    assert adversarial["confidence_auroc"] == 1.0  # answerable tops 1.0 beat 0.5 and nothing
    assert next(iter(groups)) == "all"


def test_seeds_combine_into_mean_and_range():
    one = runner.summarise([record("a", "u", "classic", "name", 1.0)])
    two = runner.summarise([record("a", "u", "classic", "name", 0.0),
                            record("b", "u", "classic", "name", 0.5)])
    combined = runner.combine_seeds([one, two])["groups"]["all"]
    assert combined["n"] == 3 and combined["seeds"] == 2
    assert combined["R@5"] == {"mean": pytest.approx(0.625), "min": 0.25, "max": 1.0}


def test_seeds_combine_reader_measures_over_the_seeds_they_apply_to():
    dated = runner.summarise([{**record("a", "u", "locomo", "temporal", 1.0), "date visible": 1.0},
                              {**record("b", "u", "locomo", "temporal", 1.0), "date visible": 0.0}])
    undated = runner.summarise([record("c", "u", "classic", "name", 1.0)])
    assert undated["groups"]["all"]["date visible"] is None
    combined = runner.combine_seeds([dated, undated])["groups"]["all"]
    assert combined["date visible"] == {"mean": 0.5, "min": 0.5, "max": 0.5}
    assert combined["n date visible"] == 2
    assert combined["speaker visible"] is None and combined["n speaker visible"] == 0


def test_progress_reports_on_stderr_stream():
    class Sink:
        def __init__(self) -> None:
            self.text = ""

        def write(self, s: str) -> None:
            self.text += s

        def flush(self) -> None:
            pass

    sink = Sink()
    meter = runner.Progress("add", 2, sink)  # type: ignore[arg-type]
    meter.step()
    meter.step()
    assert "add: 2/2 (100%)" in sink.text
    json.dumps(runner.AddStats(1, 2, 0.5, (1.0,)).as_dict())  # JSON-ready
