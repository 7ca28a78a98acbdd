"""GET /metrics: the Prometheus text format, parsed strictly (tests/prometheus_text.py, and
prometheus_client's parser where installed). After a known sequence of requests every route and
status is counted exactly; histograms are cumulative and count every answer; the in-flight gauge
sees a slow request; connections, refusals, expiries and checkpoints are counted; the store's
gauges are cached and bounded; with two processes a scrape shows both; nothing a client wrote
(user ids, content, queries, paths) ever appears."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Client, saturated
from prometheus_text import MetricFamily, parse

from aml_retriever.http.metrics import BUCKETS, CONTENT_TYPE, PEER_SLOT_BYTES, Peers, StoreScan, render

ROOT = Path(__file__).resolve().parent.parent
SECRET = "metricsecret4471"
KEY = "k"


def scrape(port: int, key: str | None = KEY) -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {key}"} if key else {})
        response = conn.getresponse()
        return (response.status, {k.lower(): v for k, v in response.getheaders()},
                response.read().decode("utf-8"))
    finally:
        conn.close()


def families(port: int, key: str | None = KEY) -> dict[str, MetricFamily]:
    status, _, text = scrape(port, key)
    assert status == 200, text
    return parse(text)


def series(found: dict[str, MetricFamily], name: str, process: str | None = "0") -> dict[tuple, float]:
    """A family's samples named `name`: their labels (less process) -> value, for one process."""
    family = found[name] if name in found else found[_base(name)]
    return {tuple(sorted((k, v) for k, v in labels.items() if k != "process")): value
            for sample, labels, value in family.samples
            if sample == name and (process is None or labels.get("process") == process)}


def _base(name: str) -> str:
    for suffix in ("_bucket", "_sum", "_count"):
        name = name.removesuffix(suffix)
    return name


def requests_by(found: dict[str, MetricFamily], process: str = "0") -> dict[tuple[str, str, str], int]:
    counted = series(found, "aml_http_requests_total", process)
    return {(d["method"], d["route"], d["status"]): int(v) for d, v in
            ((dict(labels), v) for labels, v in counted.items())}


def one(found: dict[str, MetricFamily], name: str, process: str | None = "0", **labels: str) -> float:
    wanted = tuple(sorted(labels.items()))
    return series(found, name, process)[wanted]


def assert_histograms_hold(found: dict[str, MetricFamily]) -> None:
    """Every route's histogram: the buckets of BUCKETS and +Inf, cumulative, +Inf = count = the
    route's requests; its sum positive when it counted any."""
    family = found["aml_http_request_duration_seconds"]
    assert family.type == "histogram"
    routes = {(labels["process"], labels["route"]) for _, labels, _ in family.samples}
    assert routes
    for process, route in routes:
        mine = [(name, labels, value) for name, labels, value in family.samples
                if labels["process"] == process and labels["route"] == route]
        buckets = [(labels["le"], value) for name, labels, value in mine if name.endswith("_bucket")]
        assert [le for le, _ in buckets] == [*map(repr, BUCKETS), "+Inf"]
        counts = [value for _, value in buckets]
        assert counts == sorted(counts), (route, counts)
        total = next(v for n, _, v in mine if n.endswith("_count"))
        total_seconds = next(v for n, _, v in mine if n.endswith("_sum"))
        answered = sum(v for (m, r, s), v in requests_by(found, process).items() if r == route)
        assert counts[-1] == total == answered, (route, counts[-1], total, answered)
        assert total_seconds > 0


def test_a_known_sequence_of_requests_is_counted_exactly_by_route_and_status(make_app):
    app = make_app(api_key=KEY)
    c = Client(app.port, api_key=KEY)
    user = f"user-{SECRET}"
    for _ in range(3):
        assert c.request("GET", "/health").status == 200
    assert c.add(user, "r1", [f"content {SECRET}"]).status == 200
    assert c.add(user, "r2", ["more content"]).status == 200
    assert c.add(user, "r1", [f"content {SECRET}"]).body["replayed"] is True
    assert c.post("/add", {"request_id": "r3", "user_id": user, "session_id": "s",
                           "messages": []}).status == 400
    found_content = [c.search(user, f"content {SECRET}") for _ in range(4)]
    assert all(r.status == 200 for r in found_content)
    assert SECRET in found_content[0].body["data"][0]["content"]  # control: it was stored
    assert c.request("GET", f"/nowhere/{SECRET}").status == 404
    assert Client(app.port).request("GET", "/stats").status == 401
    assert c.request("POST", "/health", body={}).status == 405
    assert c.request("GET", f"/users/{user}/audit?cursor=0&note={SECRET}").status == 200
    assert c.request("DELETE", f"/users/{user}").status == 200
    assert c.request("BREW", "/search").status == 405
    expected = {("GET", "/health", "200"): 3, ("POST", "/add", "200"): 3,
                ("POST", "/add", "400"): 1, ("POST", "/search", "200"): 4,
                ("GET", "-", "404"): 1, ("GET", "-", "401"): 1, ("POST", "/health", "405"): 1,
                ("GET", "/users/{user_id}/audit", "200"): 1,
                ("DELETE", "/users/{user_id}", "200"): 1, ("OTHER", "/search", "405"): 1}
    status, headers, text = scrape(app.port)
    first = parse(text)
    assert status == 200 and headers["content-type"] == CONTENT_TYPE
    assert requests_by(first) == expected  # the scrape is counted once answered
    assert_histograms_hold(first)
    assert SECRET not in text and "user-" not in text
    second = families(app.port)
    assert requests_by(second) == {**expected, ("GET", "/metrics", "200"): 1}
    assert_histograms_hold(second)


def test_a_latency_lands_in_the_first_bucket_that_holds_it(make_app, monkeypatch):
    app = make_app()
    original = app.service.search

    def slow(request):
        time.sleep(0.3)
        return original(request)

    monkeypatch.setattr(app.service, "search", slow)
    c = Client(app.port)
    assert c.search("u", "anything").status == 200
    assert c.request("GET", "/health").status == 200
    found = families(app.port, None)
    buckets = series(found, "aml_http_request_duration_seconds_bucket")
    assert buckets[(("le", "0.25"), ("route", "/search"))] == 0  # 0.3 s is above 0.25
    assert buckets[(("le", "+Inf"), ("route", "/search"))] == 1
    assert buckets[(("le", "0.25"), ("route", "/health"))] == 1  # control: a quick answer is below
    assert one(found, "aml_http_request_duration_seconds_sum", route="/search") >= 0.3


def test_the_in_flight_gauge_sees_a_slow_request_and_the_scrape_needs_no_turn(make_app, monkeypatch):
    app = make_app(active_requests=1)
    release, inside = threading.Event(), threading.Event()
    original = app.service.search

    def held(request):
        inside.set()
        release.wait(10)
        return original(request)

    monkeypatch.setattr(app.service, "search", held)
    thread = threading.Thread(target=lambda: Client(app.port).search("u", "anything"))
    thread.start()
    try:
        assert inside.wait(5)  # the only turn at the service is held
        assert one(families(app.port, None), "aml_http_requests_in_flight") == 2  # it + the scrape
    finally:
        release.set()
        thread.join(10)
    assert one(families(app.port, None), "aml_http_requests_in_flight") == 1  # the scrape alone


def test_the_openapi_document_gives_the_content_type_served():
    spec = json.loads((ROOT / "aml_retriever" / "http" / "openapi.json").read_text())
    assert list(spec["paths"]["/metrics"]["get"]["responses"]["200"]["content"]) == [CONTENT_TYPE]


def test_metrics_need_the_key_like_stats(make_app):
    app = make_app(api_key=KEY)
    status, headers, text = scrape(app.port, None)
    assert status == 401 and headers["content-type"].startswith("application/json")
    assert "aml_" not in text
    status, headers, text = scrape(app.port, KEY)
    assert status == 200 and headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "# TYPE aml_http_requests_total counter" in text


def test_open_and_accepted_connections_are_the_clients_own(make_app):
    app = make_app()
    clients = [Client(app.port) for _ in range(3)]
    for c in clients:
        assert c.request("GET", "/health").status == 200  # kept alive
    found = families(app.port, None)  # a fourth connection
    assert one(found, "aml_connections_open") == 4
    assert one(found, "aml_connections_accepted_total") == 4
    for c in clients:
        c.close()
    deadline = time.monotonic() + 5
    while one(families(app.port, None), "aml_connections_open") != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert one(families(app.port, None), "aml_connections_open") == 1  # only the scrape's


def test_connections_shed_at_the_cap_are_counted(make_app):
    app = make_app(max_connections=2, socket_timeout=30.0)
    idle = [socket.create_connection(("127.0.0.1", app.port)) for _ in range(2)]
    try:
        time.sleep(0.3)
        found = families(app.port, None)  # a third connection: the oldest idle one is shed
        assert one(found, "aml_connections_shed_total", reason="cap") == 1
        assert one(found, "aml_connections_shed_total", reason="memory") == 0
        idle[0].settimeout(2)
        assert idle[0].recv(1) == b""  # control: it was closed
    finally:
        for sock in idle:
            sock.close()


def test_a_refused_request_is_counted_and_its_answer_carries_its_request_id(make_app):
    app = make_app(active_requests=1, queue_size=1, socket_timeout=3.0)
    with saturated(app):
        waiting = families(app.port, None)
        refused = Client(app.port).request("GET", "/stats", headers={"X-Request-Id": "busy-1"})
        assert refused.status == 429 and refused.headers["x-request-id"] == "busy-1"
    time.sleep(0.3)
    found = families(app.port, None)
    assert one(waiting, "aml_http_requests_waiting") == 1 and one(found, "aml_http_requests_waiting") == 0
    assert one(found, "aml_connections_refused_total") == 1
    assert requests_by(found)[("-", "-", "429")] == 1
    assert requests_by(found)[("GET", "/stats", "200")] == 2  # control: the held ones, once done


def test_slow_connections_are_counted_by_stage(make_app):
    app = make_app(socket_timeout=0.5)
    with socket.create_connection(("127.0.0.1", app.port)) as body_late, \
            socket.create_connection(("127.0.0.1", app.port)) as head_late, \
            socket.create_connection(("127.0.0.1", app.port)) as idle:
        body_late.sendall(b"POST /search HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                          b"X-Request-Id: late-body-7\r\nContent-Length: 100\r\n\r\n{\"user_id\"")
        head_late.sendall(b"GET /health HTTP/1.1\r\nX-Pad: a")
        reply = _read_until_close(body_late)
        assert _read_until_close(head_late) == b""  # closed without an answer
        assert _read_until_close(idle) == b""
    assert reply.startswith(b"HTTP/1.1 408") and b"\r\nX-Request-Id: late-body-7\r\n" in reply
    found = families(app.port, None)
    assert {stage: one(found, "aml_connections_expired_total", stage=stage)
            for stage in ("idle", "head", "body")} == {"idle": 1, "head": 1, "body": 1}
    assert requests_by(found) == {("-", "-", "408"): 1}


def _read_until_close(sock: socket.socket) -> bytes:
    sock.settimeout(10)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_wal_checkpoints_are_counted(make_app):
    app = make_app(checkpoint_interval=0.1)
    assert one(families(app.port, None), "aml_wal_checkpoints_total", result="done") == 0
    assert Client(app.port).add("u", "r1", ["a checkpointed line"]).status == 200
    deadline = time.monotonic() + 5
    while (one(families(app.port, None), "aml_wal_checkpoints_total", result="done") < 1
           and time.monotonic() < deadline):
        time.sleep(0.05)
    assert one(families(app.port, None), "aml_wal_checkpoints_total", result="done") >= 1


def test_store_gauges_match_stats_and_are_cached_between_scans(make_app):
    app = make_app()
    c = Client(app.port)
    empty = families(app.port, None)
    assert one(empty, "aml_store_users", None) == 0 and one(empty, "aml_store_messages", None) == 0
    assert c.add("ann", "r1", ["one", "two"]).status == 200
    assert c.add("bob", "r1", ["three"]).status == 200
    cached = families(app.port, None)  # within STORE_SCAN_MIN_AGE_S of the last scan: reused
    assert one(cached, "aml_store_messages", None) == 0
    assert one(cached, "aml_store_scan_age_seconds", None) > 0
    app.metrics.store.min_age_s = 0  # a scan is due at the next scrape
    time.sleep(0.1)
    fresh = families(app.port, None)
    stats = c.request("GET", "/stats").body
    assert (one(fresh, "aml_store_users", None), one(fresh, "aml_store_messages", None)) == \
        (stats["users"], stats["messages"]) == (2, 3)
    assert one(fresh, "aml_store_size_bytes", None) > 0
    assert one(fresh, "aml_store_quarantined_user_files", None) == 0


def test_a_slow_store_scan_never_holds_a_scrape_past_its_wait():
    calls: list[float] = []

    def scan():
        calls.append(time.monotonic())
        time.sleep(0.0 if len(calls) == 1 else 0.5)
        return {"users": len(calls), "messages": 0, "store_bytes": 0, "damaged_user_files": 0,
                "quarantined_user_files": 0}

    store = StoreScan(scan, min_age_s=0, wait_s=0.1)
    first = {name: value for name, _, value in store.samples()}
    assert first["aml_store_users"] == 1  # the first scan, waited for
    time.sleep(20 * first["aml_store_scan_duration_seconds"] + 0.05)  # then a scrape starts one
    started = time.monotonic()
    assert dict((n, v) for n, _, v in store.samples())["aml_store_users"] == 1  # previous values
    assert time.monotonic() - started < 0.4  # not held for the 0.5 s scan
    store.samples()
    assert len(calls) == 2  # no second scan while one runs
    time.sleep(0.6)
    assert dict((n, v) for n, _, v in store.samples())["aml_store_users"] == 2
    assert len(calls) == 2  # a 0.5 s scan is not repeated within 20 x 0.5 s


def test_label_values_and_help_are_escaped():
    hostile = 'a"b\\c\nd'
    text = render([("aml_http_requests_total", (("process", "0"), ("method", "GET"),
                                                ("route", hostile), ("status", "200")), 1)])
    assert "\nd" not in text.split("\n", 2)[2]  # no raw line feed inside the sample
    sample = parse(text)["aml_http_requests_total"].samples[0]
    assert sample[1]["route"] == hostile


def test_prometheus_clients_own_parser_reads_the_same_samples(make_app):
    parser = pytest.importorskip("prometheus_client.parser",
                                 reason="prometheus_client not installed (scripts/run_tests.sh "
                                        "installs it)")
    app = make_app()
    c = Client(app.port)
    c.add("u", "r1", ["text"])
    c.search("u", "text")
    c.request("GET", "/nowhere")
    _, _, text = scrape(app.port, None)
    theirs = {(s.name, tuple(sorted(s.labels.items())), s.value)
              for family in parser.text_string_to_metric_families(text) for s in family.samples}
    ours = {(name, tuple(sorted(labels.items())), value)
            for family in parse(text).values() for name, labels, value in family.samples}
    assert theirs == ours and len(ours) > 50
    kinds = {family.name: family.type for family in parser.text_string_to_metric_families(text)}
    assert kinds["aml_http_request_duration_seconds"] == "histogram"
    assert kinds["aml_http_requests"] == "counter"  # prometheus_client drops the _total


def test_peers_see_each_others_last_counts_and_not_their_own():
    peers = Peers(3)
    assert peers.others(0) == []  # nobody has written
    assert peers.publish(2, [("aml_connections_open", (("process", "2"),), 5)])
    assert [(p, s) for p, _, s in peers.others(0)] == [("2", [("aml_connections_open",
                                                              (("process", "2"),), 5)])]
    assert peers.others(2) == []  # its own slot is not among the others
    assert not peers.publish(1, [("aml_connections_open", (("process", "x" * 2_000_000),), 1)])
    assert [p for p, _, _ in peers.others(0)] == ["2"]  # too large for its slot: not written


def test_a_copy_being_read_is_never_written_and_a_half_written_one_never_read():
    peers = Peers(2)
    counts = [("aml_connections_open", (("process", "1"),), n) for n in (1, 2)]
    peers.publish(1, [counts[0]])
    in_use = peers._copy_at(1, Peers._ACTIVE.unpack_from(peers._map, PEER_SLOT_BYTES)[0])
    before = peers._map[in_use:in_use + 4096]
    peers.publish(1, [counts[1]])
    assert peers._map[in_use:in_use + 4096] == before  # a reader in the middle of it read it whole
    assert [s for _, _, s in peers.others(0)] == [[counts[1]]]
    # a copy in use that its CRC does not match (its writer killed while writing it) is skipped
    in_use = peers._copy_at(1, Peers._ACTIVE.unpack_from(peers._map, PEER_SLOT_BYTES)[0])
    peers._map[in_use + 16:in_use + 20] = b"[[[["  # past the head: when written, length, CRC-32
    assert peers.others(0) == []


@pytest.fixture
def two_processes(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "aml_retriever", "serve", "--processes", "2",
                               "--port", str(port), "--db", str(tmp_path / "aml.db"),
                               "--log-level", "WARNING"], cwd=ROOT, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    yield server, port
    server.terminate()
    try:
        server.wait(30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(10)


def _processes_shown(port: int) -> set[str]:
    found = families(port, None)
    return {labels["process"] for _, labels, _ in found["aml_metrics_age_seconds"].samples}


def test_with_two_processes_every_scrape_shows_both_and_their_sum_is_exact(two_processes):
    _, port = two_processes
    deadline = time.monotonic() + 30
    while _processes_shown(port) != {"0", "1"} and time.monotonic() < deadline:
        time.sleep(0.1)  # both started (each shows itself once it has written its counts)
    sent, statuses = 60, []

    def health(n: int) -> None:
        for _ in range(n):
            c = Client(port)  # a new connection each time: either process may accept it
            statuses.append(c.request("GET", "/health").status)
            c.close()

    threads = [threading.Thread(target=health, args=(sent // 6,)) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert statuses == [200] * sent
    done = time.time()
    deadline = time.monotonic() + 15
    while True:  # until the process not answering has written its counts since the last request
        before = time.time()
        found = families(port, None)
        ages = {labels["process"]: v for _, labels, v in found["aml_metrics_age_seconds"].samples}
        fresh = set(ages) == {"0", "1"} and max(ages.values()) < before - done
        if fresh or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for _ in range(6):  # whichever process answers, the same totals
        per_process = {p: requests_by(found, p).get(("GET", "/health", "200"), 0) for p in ("0", "1")}
        assert sum(per_process.values()) == sent, (per_process, ages)
        assert all(per_process.values()), per_process  # both served some: each counts its own
        assert {labels["process"] for _, labels, _ in found["aml_connections_open"].samples} == {"0", "1"}
        assert sorted(ages.values())[0] == 0 and max(ages.values()) < 5, ages
        assert_histograms_hold(found)
        assert one(found, "aml_store_users", None) == 0  # the store's gauges: once, unlabelled
        found = families(port, None)
        ages = {labels["process"]: v for _, labels, v in found["aml_metrics_age_seconds"].samples}
