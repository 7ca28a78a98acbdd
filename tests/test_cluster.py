"""Shards behind a real HAProxy (scripts/cluster.sh, deploy/haproxy.cfg): every request of a user
reaches the one shard that holds the user's file, whatever the id's script or encoding, and the
shard HAProxy picks is the one the mover computes; the synthetic suite gives through three shards
exactly what one server gives; a killed shard's users get 503 (never another shard's 200) while
the others are served; growing to four shards moves about a quarter of the users with nothing
lost, duplicated or changed, and a move stopped anywhere is finished by running it again.

One cluster serves the whole module (the tests run in order: the kill and the growth come
last). Skipped, saying why, where HAProxy 2.6 or later cannot be had (scripts/run_tests.sh
installs it with apt-get when it runs as root)."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import socket
import sqlite3
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import Client

from aml_retriever import __version__
from aml_retriever.cluster import mover
from aml_retriever.cluster.control import Layout, mover_cluster
from aml_retriever.cluster.haproxy import version
from aml_retriever.cluster.sharding import (
    BUCKETS,
    HOLD,
    bucket_of,
    bucket_of_file,
    changing_map,
    placement,
    read_map,
)
from aml_retriever.common.errors import ClusterError
from aml_retriever.evaluation import synthetic
from aml_retriever.evaluation.dataset import with_prefix
from aml_retriever.storage.user_files import shard_name


def _haproxy_missing() -> str | None:
    try:
        version()
    except ClusterError as exc:
        return exc.message
    return None


MISSING = _haproxy_missing()
pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"needs HAProxy >= 2.6: {MISSING}")

ROOT = Path(__file__).resolve().parent.parent
CLUSTER_SH = ROOT / "scripts" / "cluster.sh"
SETTINGS = {"synchronous": "NORMAL", "checkpoint_interval": 0.2, "socket_timeout": 5.0}
SHARDS = ("shard-0", "shard-1", "shard-2")
# HAProxy marks a shard down after `fall` (2) failed checks `inter` (1 s) apart; a request
# meanwhile fails to connect, is retried twice a second apart, then answered 503.
DETECTION_S = 2 * 1.0 + 3 * 1.0 + 2.0
# The synthetic data: every user under three prefixes (ASCII, Latin, CJK with a space), so that
# ids are escaped in JSON and users land on every shard.
SEEDS = (1, 2)
PREFIXES = ("", "ü/", "用户 ")
ID_ALPHABET = (list("abcXYZ019 -_.~/?#%&+=:;@[]!$'()*,\"\\\t\n")
               + list("éüñßçøåœ中文字用户名🙂😀𝔘ا你ह्\u0301\u200b\x00\x7f"))


def cluster_sh(*args: str) -> dict[str, Any]:
    done = subprocess.run([str(CLUSTER_SH), *args], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Running:
    """The module's cluster, and what the tests stored in it."""
    layout: Layout
    port: int
    users: set[str] = field(default_factory=set)  # every user given an Add
    expected: dict[tuple[str, str], Any] = field(default_factory=dict)  # (user, query) -> data
    first_adds: dict[str, dict[str, Any]] = field(default_factory=dict)  # user -> its first Add

    def client(self) -> Client:
        return Client(self.port)

    def buckets(self) -> dict[int, str]:
        return read_map(self.layout.router.map)

    def shard_of(self, user: str) -> str:
        return self.buckets()[bucket_of(user)]

    def pid(self, shard: str) -> int:
        return int(self.layout.pid(shard).read_text())

    def user_files(self) -> dict[str, list[str]]:
        """Every user file holding rows, by file name: the shards it is on."""
        found: dict[str, list[str]] = {}
        for shard_dir in sorted(self.layout.root.glob("shard-*/aml.db.users")):
            for path in shard_dir.glob("??/*.db"):
                conn = sqlite3.connect(path)
                try:
                    rows = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
                finally:
                    conn.close()
                if rows:
                    found.setdefault(path.stem, []).append(shard_dir.parent.name)
        return found

    def search_all(self) -> dict[tuple[str, str], Any]:
        client = self.client()
        try:
            return {(user, query): _data(client.search(user, query, top_k=10))
                    for user, query in self.expected}
        finally:
            client.close()


def _data(response: Any) -> Any:
    assert response.status == 200, response.body
    return response.body["data"]


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    root = tmp_path_factory.mktemp("cluster")
    settings = root / "settings.json"
    settings.write_text(json.dumps(SETTINGS))
    layout = Layout(root / "c")
    port = free_port()
    cluster_sh("start", "--shards", "3", "--port", str(port), "--dir", str(layout.root),
               "--config", str(settings))
    try:
        yield Running(layout, port)
    finally:
        subprocess.run([str(CLUSTER_SH), "stop", "--dir", str(layout.root)], capture_output=True,
                       timeout=180)


def synthetic_users() -> list[Any]:
    conversations = []
    for seed in SEEDS:
        for conversation in synthetic.generate("mixed", "small", "mixed", seed)[0]:
            conversations += [with_prefix(conversation, prefix) for prefix in PREFIXES]
    return conversations


@pytest.fixture(scope="module")
def loaded(running: Running) -> list[Any]:
    """The synthetic suite stored through the cluster, and every question's answer recorded."""
    conversations = synthetic_users()
    client = running.client()
    try:
        for conversation in conversations:
            running.users.add(conversation.user_id)
            running.first_adds[conversation.user_id] = conversation.adds[0]
            for add in conversation.adds:
                response = client.post("/add", add)
                assert response.status == 200 and not response.body["replayed"], response.body
            for question in conversation.questions:
                key = (conversation.user_id, question.question)
                running.expected[key] = _data(client.search(*key, top_k=10))
    finally:
        client.close()
    return conversations


# ---- routing ---------------------------------------------------------------------------------


def random_ids(count: int, seed: int = 16) -> list[str]:
    rng = random.Random(seed)
    ids = []
    while len(ids) < count:
        text = "".join(rng.choice(ID_ALPHABET) for _ in range(rng.randint(1, 40)))
        if text.strip():  # the server refuses an id of only whitespace
            ids.append(text)
    return ids


def id_request(user: str, how: int) -> bytes:
    """One request naming `user`: by a JSON body with escapes (how 0) or in raw UTF-8 (1), or
    by a percent-encoded path (2). Each is answered by the shard without touching its store:
    a Search with top_k 0 is refused 400, OPTIONS 405."""
    if how == 2:
        return (f"OPTIONS /users/{urllib.parse.quote(user, safe='')}/audit HTTP/1.1\r\n"
                "Host: aml\r\n\r\n").encode()
    body = json.dumps({"user_id": user, "query": "q", "top_k": 0}, ensure_ascii=how == 0).encode()
    return (b"POST /search HTTP/1.1\r\nHost: aml\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def pipelined(port: int, requests: list[bytes]) -> list[tuple[int, dict[str, str]]]:
    """Send requests back to back on one connection (HTTP/1.1 pipelining, which HAProxy and the
    server both take) and read every answer's status and headers, in order."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    reader = sock.makefile("rb")
    sender = threading.Thread(target=lambda: sock.sendall(b"".join(requests)))
    sender.start()
    answers = []
    try:
        for _ in requests:
            status = int(reader.readline().split()[1])
            headers = {}
            while (line := reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            reader.read(int(headers.get("content-length", "0")))
            answers.append((status, headers))
    finally:
        sender.join()
        reader.close()
        sock.close()
    return answers


def test_every_id_reaches_the_shard_the_mover_computes(running):
    """10,000 random ids (reserved and control characters, accents, CJK, emoji, combining marks),
    each sent one of three ways: a JSON body with escapes (\\u00e9, surrogate pairs), a JSON body
    in raw UTF-8, and a percent-encoded /users/{id} path. The shard that answers (HAProxy names
    the backend it used) is the one the bucket map gives for the id's hash."""
    ids = random_ids(10_000)
    buckets = running.buckets()
    connections = 6
    answers: dict[int, list[tuple[int, dict[str, str]]]] = {}

    def send(offset: int) -> None:
        answers[offset] = pipelined(running.port, [id_request(ids[i], i % 3) for i in
                                                   range(offset, len(ids), connections)])

    threads = [threading.Thread(target=send, args=(k,)) for k in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    mismatches, answered = [], {}
    for offset, got in answers.items():
        for i, (status, headers) in zip(range(offset, len(ids), connections), got, strict=True):
            shard = headers.get("x-aml-shard")
            answered[shard] = answered.get(shard, 0) + 1
            if shard != buckets[bucket_of(ids[i])] or status != (405 if i % 3 == 2 else 400):
                mismatches.append((i % 3, ids[i], shard, status))
    assert mismatches == []
    assert sorted(answered) == list(SHARDS)  # control: every shard answered some
    assert min(answered.values()) > 2_000


def odd_bodies(user: str) -> dict[str, bytes]:
    """Add bodies the server accepts for `user` in raw UTF-8 (so HAProxy tries json_query first)
    that json_query reads wrongly or not at all, and one with an escaped key."""
    def add(request_id: str, **extra: Any) -> dict[str, Any]:
        return {"request_id": request_id, "session_id": "s",
                "messages": [{"role": "user", "content": f"marker {request_id} note"}], **extra}

    def raw(body: dict[str, Any]) -> str:
        return json.dumps(body, ensure_ascii=False)

    return {
        "byte-order mark": b"\xef\xbb\xbf" + raw({**add("bom"), "user_id": user}).encode(),
        "escaped key": (raw(add("key"))[:-1] + ', "user\\u005fid": ' + raw(user) + "}").encode(),
        "decoys first": raw({"meta": {"user_id": "decoy-a"}, "list": [{"user_id": "decoy-b"}],
                             **add("decoys"), "user_id": user}).encode(),
        "nesting deeper than 20": raw({"deep": [[[[[[[[[[[[[[[[[[[[[[[[["x"]]]]]]]]]]]]]]]]]]]]]]]]],
                                       **add("deep"), "user_id": user}).encode(),
        "escaped solidus": raw({**add("solidus"), "user_id": user}).replace("/", "\\/").encode(),
        "last of a 1 MiB body": raw({**add("big", messages=[
            {"role": "user", "content": "filler " * 140_000 + "marker big note"}]),
            "user_id": user}).encode(),
    }


def test_bodies_json_query_misreads_are_routed_by_the_user_id_the_server_reads(running):
    user = "odd/ü 用户 😀"
    client = running.client()
    try:
        for name, body in odd_bodies(user).items():
            response = client.request("POST", "/add", raw=body,
                                      headers={"Content-Type": "application/json"})
            assert response.status == 200, (name, response.body)
            assert response.headers["x-aml-shard"] == running.shard_of(user), name
        running.users.add(user)
        found = "\n".join(r["content"] for r in _data(client.search(user, "marker note", top_k=20)))
        for marker in ("bom", "key", "decoys", "deep", "solidus", "big"):
            assert f"marker {marker} note" in found
        assert running.user_files()[shard_name(user)] == [running.shard_of(user)]
    finally:
        client.close()


def test_a_request_naming_no_user_is_answered_400_by_a_shard(running):
    client = running.client()
    try:
        for body in ({"query": "q"}, {"query": "q", "user_id": None},
                     {"query": "q", "user_id": 7}, {"query": "q", "user_id": ""}):
            response = client.post("/search", body)
            assert response.status == 400 and response.body["error"]["field"] == "user_id", body
            assert response.headers["server"].startswith("aml_retriever")  # a shard answered
        broken = client.request("POST", "/search", raw=b'{"query": "q", "user_id": ',
                                headers={"Content-Type": "application/json"})
        assert broken.status == 400 and broken.body["error"]["code"] == "invalid_body"
        assert broken.headers["server"].startswith("aml_retriever")
        # control: the same request naming a user is routed by it and answered 200
        named = client.post("/search", {"query": "q", "user_id": "someone"})
        assert named.status == 200 and named.headers["x-aml-shard"] == running.shard_of("someone")
    finally:
        client.close()


def test_the_router_answers_health_and_refuses_bodies_the_servers_would(running):
    client = running.client()
    try:
        health = client.request("GET", "/health")
        assert health.status == 200 and health.body == {"status": "ok", "version": __version__}
        assert "server" not in health.headers  # HAProxy's own answer
        limit = 1_048_576  # max_body_bytes, the servers' default
        for size in (limit + 1, 4 * limit):  # a shard refuses it, and the client reads why
            body = json.dumps({"user_id": "big", "query": "q" * size}).encode()
            refused = client.request("POST", "/search", raw=body,
                                     headers={"Content-Type": "application/json"})
            assert refused.status == 413 and refused.body["error"]["code"] == "payload_too_large"
            assert refused.body["error"]["field"] == "body"
            assert refused.headers["server"].startswith("aml_retriever")
        # A body within the limit whose headers leave it no room in HAProxy's buffer is refused
        # whole, never routed on the part that fitted.
        body = json.dumps({"user_id": "big", "query": "q" * (limit - 100)}).encode()
        crowded = answer_while_sending(running.port, (
            b"POST /search HTTP/1.1\r\nHost: aml\r\nContent-Type: application/json\r\n"
            b"X-Padding: " + b"p" * 90_000 + b"\r\nContent-Length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body))
        assert crowded.startswith(b"HTTP/1.1 431") and b"x-aml-shard" not in crowded.lower()
        for path in ("/stats", "/metrics", "/users"):  # one shard's: asked of each shard
            answer = client.request("GET", path)
            assert answer.status == 404 and "cluster.sh stats" in answer.body["error"]["message"]
    finally:
        client.close()


def answer_while_sending(port: int, request: bytes) -> bytes:
    """The start of the answer to a request, read while it is still being sent (as a client
    that reads an early refusal does)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)

    def send() -> None:
        try:
            sock.sendall(request)
        except OSError:  # refused before the end: what was read is the answer
            pass

    sender = threading.Thread(target=send)
    sender.start()
    try:
        return sock.recv(65536)
    finally:
        sender.join()
        sock.close()


# ---- the synthetic suite -----------------------------------------------------------------------


def test_the_synthetic_suite_gives_identical_results_through_three_shards(running, loaded,
                                                                           make_app, tmp_path):
    spread = {running.shard_of(c.user_id) for c in loaded}
    assert spread == set(SHARDS)  # control: the users are spread over every shard
    app = make_app(db_path=str(tmp_path / "one.db"), synchronous="NORMAL")
    one = Client(app.port)
    differences = []
    try:
        for conversation in loaded:
            for add in conversation.adds:
                assert one.post("/add", add).status == 200
        for (user, query), data in running.expected.items():
            if _data(one.search(user, query, top_k=10)) != data:
                differences.append((user, query))
    finally:
        one.close()
    assert differences == []
    assert len(running.expected) > 200
    assert sum(1 for data in running.expected.values() if data) > 200  # control: answers found


def test_an_add_retried_through_the_cluster_is_a_replay(running, loaded):
    client = running.client()
    try:
        for conversation in loaded[:3]:
            add = running.first_adds[conversation.user_id]
            again = client.post("/add", add)
            assert again.status == 200 and again.body["replayed"] is True
            assert again.body["stored"] == len(add["messages"])
            changed = {**add, "session_id": "another"}
            assert client.post("/add", changed).status == 409
    finally:
        client.close()


def test_cluster_stats_sum_the_shards(running, loaded):
    summed = cluster_sh("stats", "--dir", str(running.layout.root))
    per_shard = summed["shards"]
    assert sorted(per_shard) == list(SHARDS)
    assert summed["total"]["messages"] == sum(s["messages"] for s in per_shard.values())
    assert summed["total"]["users"] >= len(loaded)


def test_deleting_a_user_through_the_cluster_leaves_no_bytes_on_any_shard(running):
    user = "to-forget/ü"
    marker = "ZEBRAQUOKKA"
    client = running.client()
    try:
        for i in range(3):
            assert client.add(user, f"r{i}", [f"{marker} secret number {i}"]).status == 200
        time.sleep(0.5)  # a checkpoint tick: the rows reach the user's file
        assert holding(running.layout.root, marker) == [running.shard_of(user)]  # control
        quoted = urllib.parse.quote(user, safe="")
        deleted = client.request("DELETE", f"/users/{quoted}")
        assert deleted.status == 200 and deleted.body["deleted"]["messages"] == 3
        assert deleted.headers["x-aml-shard"] == running.shard_of(user)
        time.sleep(0.5)
        assert holding(running.layout.root, marker) == []
        assert _data(client.search(user, marker)) == []
    finally:
        client.close()


def holding(root: Path, marker: str) -> list[str]:
    """The shards with a file (a store, its WAL, anything) holding these bytes."""
    found = set()
    for path in root.glob("shard-*/**/*"):
        if path.is_file() and marker.encode() in path.read_bytes():
            found.add(path.relative_to(root).parts[0])
    return sorted(found)


# ---- a shard down --------------------------------------------------------------------------------


def status_of(client: Client, user: str, query: str) -> tuple[int, Any]:
    response = client.search(user, query, top_k=10)
    return response.status, response


def test_a_killed_shard_answers_503_for_its_users_only_and_loses_nothing(running, loaded):
    keys_by_shard: dict[str, list[tuple[str, str]]] = {}
    for user, query in running.expected:
        keys_by_shard.setdefault(running.shard_of(user), []).append((user, query))
    victim, others = "shard-1", [k for s in SHARDS if s != "shard-1" for k in keys_by_shard[s][:3]]
    theirs = keys_by_shard[victim][:3]
    client = running.client()
    last_user = theirs[0][0]
    acknowledged = client.add(last_user, "before-the-kill", ["acknowledged just before the kill"])
    assert acknowledged.status == 200
    os.kill(running.pid(victim), signal.SIGKILL)
    killed = time.monotonic()
    try:
        while True:  # HAProxy's checks notice within DETECTION_S
            status, response = status_of(client, *theirs[0])
            if status == 503:
                break
            assert status != 200, "a killed shard's user was answered 200"
            assert time.monotonic() - killed < DETECTION_S
        assert response.body["error"]["code"] == "shard_unavailable"
        assert response.headers["retry-after"] == "5"
        until = time.monotonic() + 10.0
        while time.monotonic() < until:  # and it stays so: no other shard takes them
            for key in theirs:
                assert status_of(client, *key)[0] == 503
            for key in others:
                assert _data(client.search(*key, top_k=10)) == running.expected[key]
            time.sleep(0.5)
        assert client.add(last_user, "while-down", ["refused"]).status == 503
    finally:
        cluster_sh("start", "--dir", str(running.layout.root))
        client.close()
    client = running.client()
    try:
        deadline = time.monotonic() + DETECTION_S
        while status_of(client, *theirs[0])[0] != 200:  # two good checks bring it back
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert running.search_all() == running.expected
        found = [r["content"] for r in _data(client.search(last_user, "acknowledged kill"))]
        assert "acknowledged just before the kill" in found
    finally:
        client.close()


# ---- growing ------------------------------------------------------------------------------------

GROWN = (*SHARDS, "shard-3")


def growth_users(count: int = 200) -> list[str]:
    """`count` users, and two more sharing a bucket that goes to the new shard (a bucket of two
    files: a move can stop between them)."""
    users = [f"grow-{i}" for i in range(count)]
    before, after = placement(SHARDS), placement(GROWN)
    seen: dict[int, str] = {}
    for i in range(100_000):
        user = f"pair-{i}"
        bucket = bucket_of(user)
        if before[bucket] != after[bucket]:
            if bucket in seen:
                return [*users, seen[bucket], user]
            seen[bucket] = user
    raise AssertionError("no two users share a moving bucket")


def crash_at(layout: Layout, when: str, bucket: int) -> int:
    """Run the move to four shards in a child process that dies (os._exit, no clean-up) at a
    point: after the first copy ("copied"), or after emptying the first source of `bucket`
    ("emptied")."""
    def child() -> None:
        cluster, _ = mover_cluster(layout)
        if when == "emptied":
            real = mover._empty_source

            def empty_then_die(source: Any, target: Any, name: str, digest: str) -> None:
                real(source, target, name, digest)
                if bucket_of_file(name) == bucket:
                    os._exit(3)

            mover._empty_source = empty_then_die  # type: ignore[assignment]

        def progress(event: str, detail: Any) -> None:
            if when == "copied" and event == "copied":
                os._exit(3)

        mover.move(cluster, GROWN, progress)
        os._exit(0)

    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    process.join(120)
    return process.exitcode or 0


def test_growing_to_four_shards_moves_a_quarter_and_a_stopped_move_resumes(running, loaded,
                                                                            monkeypatch):
    users = growth_users()
    grown = placement(GROWN)
    client = running.client()
    try:
        for user in users:
            add = {"request_id": "g1", "user_id": user, "session_id": "s",
                   "messages": [{"role": "user", "content": f"{user} keeps a kite named K{user}"}]}
            assert client.post("/add", add).status == 200
            running.users.add(user)
            running.first_adds[user] = add
            if grown[bucket_of(user)] == "shard-3":  # the users that will move: their answers
                running.expected[(user, "kite named")] = _data(client.search(user, "kite named"))
    finally:
        client.close()
    before = {user: running.shard_of(user) for user in running.users}
    cluster_sh("start", "--dir", str(running.layout.root), "--shards", "4")
    assert running.buckets() == placement(SHARDS)  # a new shard holds nothing until a move

    # A copy that does not hold what its source holds stops the move; its bucket stays put.
    real_verify = mover._verify

    def lose_a_row(copy: sqlite3.Connection, digest: str, name: str) -> None:
        copy.execute("DELETE FROM messages WHERE id = (SELECT max(id) FROM messages)")
        real_verify(copy, digest, name)

    monkeypatch.setattr(mover, "_verify", lose_a_row)
    cluster, _ = mover_cluster(running.layout)
    with pytest.raises(ClusterError, match="does not hold what its source holds"):
        mover.move(cluster, GROWN)
    monkeypatch.undo()
    assert running.buckets() == placement(SHARDS)
    assert running.search_all() == running.expected
    assert all(shards == [before_shard(before, name)] for name, shards in
               running.user_files().items() if name in names_of(running.users))

    # Stopped by a crash after a copy: the held buckets answer 503, and nothing is lost.
    pair_bucket = bucket_of(users[-1])
    assert crash_at(running.layout, "copied", pair_bucket) == 3
    held = [b for b, shard in running.buckets().items() if shard == HOLD]
    assert held
    held_user = next(u for u in (f"probe-{i}" for i in range(100_000)) if bucket_of(u) in held)
    client = running.client()
    try:
        waiting = client.search(held_user, "kite")
        assert waiting.status == 503 and waiting.body["error"]["code"] == "user_moving"
        assert waiting.headers["retry-after"] == "1"
    finally:
        client.close()

    # Stopped again, after emptying the first of the two files of a bucket.
    assert crash_at(running.layout, "emptied", pair_bucket) == 3
    assert running.buckets()[pair_bucket] == HOLD

    # Run to the end through the command line.
    report = cluster_sh("move", "--dir", str(running.layout.root), "--shards", "4")
    assert running.buckets() == placement(GROWN)
    assert report["unexpected_files"] == []
    # The moved users' emptied files are gone: the shards closed them when asked (SIGUSR1).
    assert report["files_removed"] > 0 and report["emptied_files_left_open"] == 0
    moved = [u for u in running.users if running.shard_of(u) != before[u]]
    assert 0.15 < len(moved) / len(running.users) < 0.35  # about a quarter
    assert all(running.shard_of(u) == "shard-3" for u in moved)
    files = running.user_files()
    assert {name: shards for name, shards in files.items() if name in names_of(running.users)} == {
        shard_name(u): [running.shard_of(u)] for u in running.users}  # none lost, none twice
    leftovers = list(running.layout.root.glob("shard-*/aml.db.users/??/*.moving*"))
    assert leftovers == []
    assert running.search_all() == running.expected  # every result unchanged
    for user in [u for u in moved if u in users][:3]:  # the old shard keeps no byte of them
        assert holding(running.layout.root, f"{user} keeps a kite named K{user}") == ["shard-3"]
    client = running.client()
    try:
        for user in moved[:20]:
            again = client.post("/add", running.first_adds[user])
            assert again.status == 200 and again.body["replayed"] is True
            assert again.headers["x-aml-shard"] == "shard-3"
    finally:
        client.close()


def names_of(users: set[str]) -> set[str]:
    return {shard_name(u) for u in users}


def before_shard(before: dict[str, str], name: str) -> str:
    return next(shard for user, shard in before.items() if shard_name(user) == name)


def test_shrinking_back_to_three_shards_moves_the_fourth_shards_users_back(running):
    root = str(running.layout.root)
    refused = subprocess.run([str(CLUSTER_SH), "start", "--dir", root, "--shards", "3"],
                             capture_output=True, text=True, timeout=180)
    assert refused.returncode == 1 and "still hold users" in refused.stderr
    assert refused.stderr.count("\n") == 1  # one line, no traceback
    with changing_map(running.layout.router.map):  # as if another move were running
        racing = subprocess.run([str(CLUSTER_SH), "move", "--dir", root, "--shards", "3"],
                                capture_output=True, text=True, timeout=180)
    assert racing.returncode == 1 and "another move" in racing.stderr
    assert running.buckets() == placement(GROWN)
    report = cluster_sh("move", "--dir", root, "--shards", "3")
    assert report["buckets_moved"] == list(placement(GROWN).values()).count("shard-3")
    assert running.buckets() == placement(SHARDS)
    assert {name: shards for name, shards in running.user_files().items()
            if name in names_of(running.users)} == {
        shard_name(u): [running.shard_of(u)] for u in running.users}
    assert running.search_all() == running.expected
    cluster_sh("start", "--dir", root, "--shards", "3")
    assert not running.layout.pid("shard-3").exists()
    buckets = running.buckets()
    assert sorted(buckets) == list(range(BUCKETS)) and set(buckets.values()) == set(SHARDS)


def test_cluster_commands_refuse_what_they_cannot_do_in_one_line(tmp_path):
    for args, reason in ((["stats", "--dir", str(tmp_path)], "no cluster"),
                         (["start", "--dir", str(tmp_path / "new"), "--shards", "2"],
                          "needs --shards and --port"),
                         (["move", "--dir", str(tmp_path), "--shards", "2"], "no cluster")):
        done = subprocess.run([str(CLUSTER_SH), *args], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 1 and reason in done.stderr, args
        assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
