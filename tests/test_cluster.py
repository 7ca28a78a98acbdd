"""Shards behind a real HAProxy (scripts/cluster.sh, deploy/haproxy.cfg): every request of a user
reaches the one shard that holds the user's file, whatever the id's script or encoding, and the
shard HAProxy picks is the one the mover computes; the synthetic suite gives through three shards
exactly what one server gives; a killed shard's users get 503 (never another shard's 200) while
the others are served; the router refuses request targets that are not one-slash paths (`//add`
would reach another shard) and reads a body's user id in a few ms of CPU whatever the body,
refusing one it cannot decide rather than guessing; growing to four shards moves about a quarter
of the users with nothing lost, duplicated or changed, and a move stopped anywhere is finished by
running it again. The command line takes relative paths from the caller's directory, the README's
commands work as pasted from a fresh clone (their cluster directory ignored by git), and `move`
prints a summary (every bucket with --verbose, nothing but errors with --quiet).

One cluster serves the whole module (the tests run in order: the kill and the growth come
last). Skipped, saying why, where HAProxy 2.6 or later cannot be had (scripts/run_tests.sh
installs it with apt-get when it runs as root)."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import shlex
import shutil
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
from conftest import Client, free_port

from aml_retriever import __version__
from aml_retriever.cluster import mover
from aml_retriever.cluster.control import Layout, mover_cluster
from aml_retriever.cluster.haproxy import LUA, Runtime, version
from aml_retriever.cluster.sharding import (
    BUCKETS,
    HOLD,
    bucket_of,
    bucket_of_file,
    changing_map,
    placement,
    read_map,
)
from aml_retriever.common.errors import AmlError, ClusterError
from aml_retriever.evaluation import synthetic
from aml_retriever.evaluation.dataset import with_prefix
from aml_retriever.memory.validation import parse_json, parse_user
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


def run_cluster_sh(*args: str, cwd: Path | None = None,
                   script: str = str(CLUSTER_SH)) -> subprocess.CompletedProcess[str]:
    return subprocess.run([script, *args], capture_output=True, text=True, timeout=180, cwd=cwd)



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
                "Host: localhost\r\n\r\n").encode()
    body = json.dumps({"user_id": user, "query": "q", "top_k": 0}, ensure_ascii=how == 0).encode()
    return (b"POST /search HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
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
    """Add bodies the server accepts for `user` in raw UTF-8 that a naive reader (HAProxy's own
    json_query, which the router once used) reads wrongly or not at all, and one with an escaped
    key."""
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


def test_bodies_a_naive_reader_misreads_are_routed_by_the_user_id_the_server_reads(running):
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
            b"POST /search HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
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


# ---- the router under attack: request targets --------------------------------------------------


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def by_router(self) -> bool:
        """Whether HAProxy answered itself (a shard's answer names the server)."""
        return "server" not in self.headers

    @property
    def unrouted(self) -> bool:
        """Whether HAProxy answered itself before choosing a shard (once it has chosen one, it
        names it in X-Aml-Shard, even on its own 503)."""
        return self.by_router and "x-aml-shard" not in self.headers

    def json(self) -> Any:
        return json.loads(self.body)


def exchange(port: int, method: str, target: str, body: bytes | None = None,
             headers: dict[str, str] | None = None) -> Answer:
    """One request sent as it is written (any request target, which http.client would check),
    on a connection of its own, and its answer."""
    head = [f"{method} {target} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
    head += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if body is not None:
        head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall("\r\n".join(head).encode("latin-1") + b"\r\n\r\n" + (body or b""))
        reader = sock.makefile("rb")
        status = int(reader.readline().split()[1])
        found = {}
        while (line := reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            found[name.strip().lower()] = value.strip()
        data = reader.read(int(found["content-length"])) if "content-length" in found else reader.read()
    return Answer(status, found, data)


def assert_refused_target(answer: Answer, target: str) -> None:
    """The router's own 400 for a request target that is not a path with one leading slash:
    the JSON error shape of its other answers, and no shard involved."""
    assert answer.status == 400 and answer.unrouted, (target, answer)
    error = answer.json()["error"]
    assert error["code"] == "bad_request" and "exactly one /" in error["message"], target
    assert set(error) == {"code", "message", "field"}


def user_on(running: Running, shard: str, prefix: str) -> str:
    """A user id (with a slash and a non-ASCII letter, so paths percent-encode it) whose shard
    is `shard`."""
    return next(user for user in (f"{prefix}/ü-{i}" for i in range(10_000))
                if running.shard_of(user) == shard)


def test_a_target_that_is_not_a_one_slash_path_is_refused_by_the_router(running):
    """`//add` through the router used to reach the first shard, which Python's http.server
    serves as `/add`: the user's data landed on a shard that does not own it, a DELETE through
    the router left it there, `//stats` answered 200. The router now refuses such targets 400
    itself, before routing; the same requests with one slash are the controls."""
    user = user_on(running, "shard-1", "slashes")  # not the first shard, where `//` went
    quoted = urllib.parse.quote(user, safe="")
    marker = "DOUBLESLASHQUOKKA"
    add = json.dumps({"request_id": "r1", "user_id": user, "session_id": "s",
                      "messages": [{"role": "user", "content": f"{marker} lives here"}]}).encode()
    search = json.dumps({"user_id": user, "query": marker, "top_k": 5}).encode()
    port = running.port
    for target in ("//add", "///add"):
        assert_refused_target(exchange(port, "POST", target, add), target)
    time.sleep(0.5)  # a checkpoint tick: rows written anywhere would reach a file
    assert holding(running.layout.root, marker) == []  # the Add landed nowhere
    # Control: the same Add with one slash lands on the user's shard, and only there.
    added = exchange(port, "POST", "/add", add)
    assert added.status == 200 and added.headers["x-aml-shard"] == "shard-1"
    time.sleep(0.5)
    assert holding(running.layout.root, marker) == ["shard-1"]

    refused = [("POST", "//search", search), ("POST", "//delete_user", search),
               ("DELETE", f"//users/{quoted}", None), ("GET", f"//users/{quoted}/messages", None),
               ("GET", f"//users/{quoted}/export", None), ("GET", "//users", None),
               ("GET", "//stats", None), ("GET", "//metrics", None), ("GET", "//health", None),
               ("POST", f"http://127.0.0.1:{port}/search", search),
               ("POST", f"HTTP://127.0.0.1:{port}/add", add),
               ("DELETE", f"http://127.0.0.1:{port}/users/{quoted}", None),
               ("GET", f"http://127.0.0.1:{port}//stats", None), ("OPTIONS", "*", None)]
    for method, target, body in refused:
        assert_refused_target(exchange(port, method, target, body), target)
    # Targets HAProxy's own parser refuses: its 400 (an HTML body no setting changes), before
    # any rule and any shard.
    for target in ("add", "a:/add", "/add#x", "http://elsewhere/add"):
        answer = exchange(port, "POST", target, add)
        assert answer.status == 400 and answer.unrouted, target
    # The user is still whole: the refused DELETEs deleted nothing, and a found Search is the
    # control of the one-slash DELETE that now deletes.
    found = exchange(port, "POST", "/search", search)
    assert found.status == 200 and [r["content"] for r in found.json()["data"]] == [
        f"{marker} lives here"]
    assert exchange(port, "GET", "/stats").status == 404  # the router's own answer, as before
    deleted = exchange(port, "DELETE", f"/users/{quoted}")
    assert deleted.status == 200 and deleted.json()["deleted"]["messages"] == 1
    time.sleep(0.5)
    assert holding(running.layout.root, marker) == []


def spellings(user: str, port: int) -> tuple[list[tuple[str, str, bytes | None]],
                                             list[tuple[str, str, bytes | None]]]:
    """Requests about `user` spelled in many ways: those a shard serves as its routes (they must
    be routed by the user), and those it does not (404 or 405 wherever they go, or refused)."""
    quoted = urllib.parse.quote(user, safe="")
    every_byte = "".join(f"%{b:02X}" for b in user.encode())  # even the letters
    search = json.dumps({"user_id": user, "query": "spelled", "top_k": 5}).encode()
    served = [("POST", "/search", search), ("POST", "/search?x=1", search),
              ("POST", "/search?next=//add", search),
              ("GET", f"/users/{quoted}/messages", None),
              ("GET", f"/users/{quoted}/messages?limit=5", None),
              ("GET", f"/users/{every_byte}/messages", None),
              ("GET", f"/users/{quoted.lower()}/messages", None),
              ("GET", f"/users/{quoted}/audit", None), ("GET", f"/users/{quoted}/export", None)]
    not_served = [
        *[("POST", target, search) for target in (
            "//search", "///search", "/%2Fsearch", "/%2fsearch", "/./search", "/search/",
            "/search/.", "/SEARCH", "/Search", "/search;x", "/%73earch", "/x/../search",
            f"http://127.0.0.1:{port}/search", f"http://127.0.0.1:{port}//search", "*")],
        *[("GET", target, None) for target in (
            f"//users/{quoted}/messages", f"/users//{quoted}/messages",
            f"/users/{quoted}/messages/", f"/users/{quoted}/./messages",
            f"/USERS/{quoted}/messages", f"/users%2F{quoted}/messages",
            f"/users/{quoted}%2Fmessages", f"/%75sers/{quoted}/messages",
            f"http://127.0.0.1:{port}/users/{quoted}/messages")],
        ("DELETE", f"//users/{quoted}", None), ("DELETE", f"/users/{quoted}/", None)]
    return served, not_served


def test_a_dead_shards_users_get_no_other_shards_200_by_any_spelling(running):
    """With the user's shard down, no spelling of a request about the user is answered 200 by
    another shard: what a shard serves is routed by the user (503), the rest is refused by the
    router or answered 404/405 by whichever shard gets it. Control: with the shard up, the
    spellings it serves are answered 200 by it, with the user's messages."""
    user = user_on(running, "shard-1", "spelled")
    port = running.port
    client = running.client()
    try:
        assert client.add(user, "r1", ["spelled in many ways"]).status == 200
    finally:
        client.close()
    served, not_served = spellings(user, port)
    for method, target, body in served:  # control: the shard is up and serves them
        answer = exchange(port, method, target, body)
        assert answer.status == 200 and answer.headers["x-aml-shard"] == "shard-1", target
        assert b"spelled in many ways" in answer.body or b'"events"' in answer.body, target
    for method, target, body in not_served:  # and these it would not serve, up or down
        answer = exchange(port, method, target, body)
        assert answer.status in (400, 404, 405), (target, answer.status)
        if not target.startswith("/") or target.startswith("//"):
            assert_refused_target(answer, target)

    runtime = Runtime(running.layout.router.socket)
    runtime.command("set server shard-1/shard-1 state maint")  # down, as the router sees it
    try:
        for method, target, body in served:
            answer = exchange(port, method, target, body)
            assert answer.status == 503 and answer.by_router, target
            assert answer.headers["x-aml-shard"] == "shard-1", target
            assert answer.json()["error"]["code"] == "shard_unavailable", target
        for method, target, body in not_served:
            answer = exchange(port, method, target, body)
            assert answer.status in (400, 404, 405, 503), (target, answer.status)
            if not target.startswith("/") or target.startswith("//"):
                assert_refused_target(answer, target)
            elif answer.status in (404, 405):  # another shard said no: it has no such route
                assert not answer.by_router and answer.headers.get("x-aml-shard") != "shard-1"
    finally:
        runtime.command("set server shard-1/shard-1 state ready")
    assert exchange(port, *served[0]).status == 200  # back at once: it never stopped running


# ---- the router under attack: bodies ------------------------------------------------------------

# A body the size of the servers' limit (max_body_bytes), less room for the wrapping.
NEAR_LIMIT = 1_048_576 - 4096


def filled(head: str, unit: str, tail: str) -> bytes:
    """`head`, then `unit` repeated up to NEAR_LIMIT bytes, then `tail`."""
    count = (NEAR_LIMIT - len(head.encode()) - len(tail.encode())) // len(unit.encode())
    return (head + unit * count + tail).encode()


def costly_bodies(user: str) -> dict[str, tuple[bytes, bytes]]:
    """The body shapes that cost the router's user-id reader most (each ~1 MiB, user_id the last
    key), and each with user_id first instead: the control, which must reach the user's shard.
    The Searches have top_k 0, so the shard refuses them 400 without reading the store."""
    def shape(filler: str, unit: str, end: str) -> tuple[bytes, bytes]:
        last = filled('{"top_k": 0, "query": "\\u00e9", ' + filler, unit,
                      end + ', "user_id": ' + json.dumps(user) + "}")
        first = filled('{"user_id": ' + json.dumps(user) + ', "top_k": 0, "query": "\\u00e9", '
                       + filler, unit, end + "}")
        return last, first

    half = (NEAR_LIMIT - 200) // 2
    return {
        "\\u escapes": shape('"q": "', "\\u4e2d", '"'),
        "escaped quotes": shape('"q": "', '\\"', '"'),
        "backslash runs": shape('"q": "', "\\\\", '\\""'),
        "tiny strings": shape('"q": [', '"",', '""]'),
        "deep nesting": (
            ('{"top_k": 0, "q": ' + "[" * half + "]" * half + ', "user_id": '
             + json.dumps(user) + "}").encode(),
            ('{"user_id": ' + json.dumps(user) + ', "top_k": 0, "q": ' + "[" * half + "]" * half
             + "}").encode()),
        "nested user_id keys": shape('"messages": [', '{"user_id": "decoy"},', "{}]"),
        "user_id strings as values": shape('"a": "user_id", "b": [0', ', "user_id"', "]"),
    }


def router_cpu_s(running: Running) -> float:
    """The CPU time HAProxy has used so far (user and system), from /proc."""
    pid = int(running.layout.router_pid.read_text())
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# The most CPU the router may spend on one request, whatever its body: it took 90-290 ms on
# these shapes when the Lua reader decoded every string it passed; it takes 1.3-4.6 ms now
# (docs/RELIABILITY.md, "The router under attack"), and 20 ms leaves room for a busy machine.
MAX_ROUTER_CPU_S = 0.020


def test_no_body_costs_the_router_more_than_a_few_ms_of_cpu(running):
    """Every costly shape, sent 10 times: HAProxy's own CPU time per request stays within
    MAX_ROUTER_CPU_S. A body the reader cannot decide within its steps is refused 400 by the
    router (never guessed at: a guess could route a real user's Add to another shard); the
    control, the same body with user_id first, is routed to the user's shard."""
    user = user_on(running, "shard-2", "costly")
    routed = refused = 0
    for name, (last, first) in costly_bodies(user).items():
        answer = exchange(running.port, "POST", "/search", first)
        assert answer.status == 400 and answer.headers.get("x-aml-shard") == "shard-2", name
        assert not answer.by_router, name  # the shard read it (top_k 0; or nested too deep)
        answer = exchange(running.port, "POST", "/search", last)
        if answer.unrouted:
            assert answer.status == 400 and answer.json()["error"]["field"] == "user_id", name
            assert "send user_id as the first key" in answer.json()["error"]["message"]
            refused += 1
        else:  # decided within the steps: routed by the user, and only by it
            assert answer.headers["x-aml-shard"] == "shard-2", name
            routed += 1
        before = router_cpu_s(running)
        for _ in range(10):
            exchange(running.port, "POST", "/search", last)
        spent = (router_cpu_s(running) - before) / 10
        assert spent < MAX_ROUTER_CPU_S, (name, f"{spent * 1000:.1f} ms a request")
    assert routed >= 1 and refused >= 3  # both outcomes occurred


def test_the_largest_add_is_routed_whatever_the_order_of_its_keys(running):
    """The reader's step limit leaves room for what clients send: an Add of max_messages (200)
    messages, ~1 MiB of text written as \\u escapes (Python's json.dumps), each message with a
    timestamp and metadata the server ignores, user_id the last key, reaches the user's shard."""
    user = user_on(running, "shard-2", "largest")
    messages = [{"role": "user", "content": f"大きな{i} " + "中文字" * 260,
                 "timestamp": 1_700_000_000_000 + i, "meta": {"source": "chat", "tags": ["a"]}}
                for i in range(200)]
    body = json.dumps({"request_id": "big", "session_id": "s", "messages": messages,
                       "user_id": user}).encode()
    assert 900_000 < len(body) < 1_048_576 and b"\\u" in body
    answer = exchange(running.port, "POST", "/add", body)
    assert answer.status == 200 and answer.headers["x-aml-shard"] == "shard-2", answer
    assert answer.json()["stored"] == 200


def router_reads(port: int, body: bytes) -> tuple[str, bytes | None]:
    """What aml_route.lua reads from a body, asked of a bare HAProxy that answers it."""
    answer = exchange(port, "POST", "/add", body)
    text = answer.body.decode()
    if text.startswith("id:"):
        return "id", bytes.fromhex(text[3:])
    return text, None


def server_reads(body: bytes) -> str | None:
    """The user id the server reads from a body (None: it refuses the body)."""
    try:
        return parse_user(parse_json(body))
    except AmlError:
        return None


FUZZ_TEXT = [*'ab_/ "\\{}[]:,\t\n', "user_id", "é", "中", "😀", "\x00", "\x1f", "\u2028"]


def fuzz_body(rng: random.Random) -> bytes:
    """A random body: nested objects and arrays, decoy user_id keys and values, escaped or raw
    text, user_id anywhere or missing, spelled with escapes, some bodies damaged."""
    def text(most: int) -> str:
        return "".join(rng.choice(FUZZ_TEXT) for _ in range(rng.randint(0, most)))

    def value(depth: int) -> Any:
        roll = rng.random()
        if depth > 4 or roll < 0.35:
            return rng.choice([text(8), 7, -2.5e3, True, None, "user_id", ""])
        if roll < 0.7:
            return {rng.choice(["user_id", "a", text(4)]): value(depth + 1)
                    for _ in range(rng.randint(0, 4))}
        return [value(depth + 1) for _ in range(rng.randint(0, 4))]

    items = [(rng.choice(["a", "messages", "user_id ", "User_id", text(4)]), value(1))
             for _ in range(rng.randint(0, 5))]
    if rng.random() < 0.85:
        user = ((text(12) + "u") if rng.random() < 0.7
                else rng.choice([" ", "x" * 300, 5, None, {"a": 1}, [""], ""]))
        items.insert(rng.randint(0, len(items)), ("user_id", user))
    body = dict(items)
    written = json.dumps(body, ensure_ascii=rng.random() < 0.5,
                         separators=rng.choice([(",", ":"), (", ", ": "), (" ,\n ", " :\t")]))
    if rng.random() < 0.25:
        written = written.replace('"user_id"', rng.choice(
            ['"user\\u005fid"', '"\\u0075ser_id"', '"user\\u005Fid"',
             '"\\u0075\\u0073\\u0065\\u0072\\u005f\\u0069\\u0064"']), 1)
    if rng.random() < 0.2:
        written = written.replace("/", "\\/")
    data = written.encode()
    if rng.random() < 0.1:
        data = b"\xef\xbb\xbf" + data
    if rng.random() < 0.1:
        data = b" \r\n" + data + b"\n"
    if rng.random() < 0.15:  # damaged: a byte dropped, added, or the end cut off
        at = rng.randrange(len(data) + 1)
        roll = rng.random()
        if roll < 0.33:
            data = data[:at] + data[at + 1:]
        elif roll < 0.66:
            data = data[:at] + bytes([rng.choice(b'"\\{}[]:, x')]) + data[at:]
        else:
            data = data[:at]
    return data


@pytest.fixture(scope="module")
def bare_reader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A HAProxy that runs aml_route.lua's body reader on each request and answers what it read
    (the id in hex, `none`, or `undecided`): the reader alone, against the server's parser."""
    root = tmp_path_factory.mktemp("reader")
    port = free_port()
    config = root / "reader.cfg"
    config.write_text(f"""global
    nbthread 1
    tune.bufsize 1114112
    lua-load {LUA}
defaults
    mode http
    timeout connect 1s
    timeout client 30s
    timeout http-request 30s
frontend reader
    bind 127.0.0.1:{port}
    acl undecided var(txn.unroutable) -m found
    acl read var(txn.uid) -m found
    http-request wait-for-body time 30s
    http-request lua.aml_body_user
    http-request return status 200 content-type text/plain string "undecided" if undecided
    http-request return status 200 content-type text/plain lf-string "id:%[var(txn.uid),hex]" if read
    http-request return status 200 content-type text/plain string "none"
""")
    process = subprocess.Popen(["haproxy", "-db", "-f", str(config)], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None, process.stderr.read() if process.stderr else ""
                assert time.monotonic() < deadline
                time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(10)


def test_the_body_reader_reads_the_user_id_the_server_reads(bare_reader):
    """12,000 random bodies: wherever the server reads a user id, the router's reader reads the
    same bytes (its UTF-8), never another id and never none; where the server refuses the body,
    the reader may read anything (a shard answers 400). Small bodies are always decided."""
    rng = random.Random(20)
    outcomes: dict[str, int] = {}
    mismatches = []
    for _ in range(12_000):
        body = fuzz_body(rng)
        expected = server_reads(body)
        got = router_reads(bare_reader, body)
        outcome = f"{'refused' if expected is None else 'served'} {got[0]}"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if expected is not None and got != ("id", expected.encode()):
            mismatches.append((body[:200], expected, got))
    assert mismatches == []
    assert outcomes.get("served id", 0) > 4_000 and outcomes.get("refused none", 0) > 1_500
    assert "served undecided" not in outcomes and "refused undecided" not in outcomes


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
    # `cluster.sh stats | head -1`: the reader goes away, no BrokenPipeError traceback.
    piped = subprocess.run(["bash", "-c", f"'{CLUSTER_SH}' stats --dir '{running.layout.root}' | head -1"],
                           capture_output=True, text=True, timeout=180)
    assert piped.stdout == "{\n" and "Traceback" not in piped.stderr


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
                         (["move", "--dir", str(tmp_path), "--shards", "2"], "no cluster"),
                         (["start", "--dir", str(tmp_path / ("d" * 100)), "--shards", "1",
                           "--port", str(free_port())], "path is too long"),
                         (["start", "--dir", str(tmp_path / "pub"), "--shards", "1", "--port",
                           str(free_port()), "--host", "0.0.0.0"], "needs an API key")):
        done = subprocess.run([str(CLUSTER_SH), *args], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 1 and reason in done.stderr, args
        assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1


# ---- the command line: paths, the README's commands, move's output ---------------------------


def stop_quietly(root: Path) -> None:
    if (root / "cluster.json").exists():
        run_cluster_sh("stop", "--dir", str(root))


def test_relative_paths_are_the_callers_from_any_directory(tmp_path):
    caller = tmp_path / "a" / "w"  # short: HAProxy's socket path is at most 97 bytes
    caller.mkdir(parents=True)
    settings = tmp_path / "a" / "settings.json"
    settings.write_text(json.dumps(SETTINGS))
    script = os.path.relpath(CLUSTER_SH, caller)  # the script named relatively, too
    name = "rel-cluster"
    assert not (ROOT / name).exists()
    try:
        started = run_cluster_sh("start", "--shards", "1", "--port", str(free_port()), "--dir",
                                 name, "--config", "../settings.json", cwd=caller, script=script)
        assert started.returncode == 0, started.stderr
        root = caller / name
        spec = json.loads((root / "cluster.json").read_text())
        assert spec["config_file"] == str(settings.resolve())
        assert (root / "shard-0" / "aml.db").exists() and (root / "haproxy.cfg").exists()
        assert not (ROOT / name).exists()
        # stats by a relative path from the cluster's parent, and by ./ from inside it
        stats = run_cluster_sh("stats", "--dir", f"./{name}", cwd=caller, script=script)
        assert stats.returncode == 0 and json.loads(stats.stdout)["total"]["users"] == 0
        inside = run_cluster_sh("stats", "--dir", ".", cwd=root)
        assert inside.returncode == 0, inside.stderr
        stopped = run_cluster_sh("stop", "--dir", f"w/{name}", cwd=caller.parent)
        assert stopped.returncode == 0, stopped.stderr
        assert set(json.loads(stopped.stdout)["stopped"].values()) == {"stopped"}
    finally:
        stop_quietly(caller / name)
        stop_quietly(ROOT / name)


def readme_cluster_commands(readme: str, heading: str) -> list[list[str]]:
    """The cluster.sh commands of a README's section on several machines, as argv lists."""
    text = (ROOT / readme).read_text(encoding="utf-8")
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [argv for line in block.splitlines()
            if (argv := shlex.split(line, comments=True)) and argv[0].endswith("cluster.sh")]


def fresh_clone(into: Path) -> None:
    """What a clone of this repository holds at its top, linked (git's files when it can tell)."""
    names = {path.name for path in ROOT.iterdir()}
    if (ROOT / ".git").exists() and shutil.which("git"):
        listed = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True,
                                text=True, check=True).stdout.splitlines()
        names = {line.split("/", 1)[0] for line in listed} & names
    for name in names:
        (into / name).symlink_to(ROOT / name)


def test_the_readmes_cluster_commands_work_as_pasted_from_a_fresh_clone(tmp_path):
    commands = readme_cluster_commands("README.md", "Running on several machines")
    assert commands == readme_cluster_commands("README.zh.md", "在多台机器上运行")
    assert [argv[1] for argv in commands] == ["start", "stats", "start", "move", "stop"]
    clone = tmp_path / "r"
    clone.mkdir()
    fresh_clone(clone)
    port = str(free_port())  # the README's 8080 may be taken here
    try:
        for argv in commands:
            argv = [port if arg == "8080" else arg for arg in argv]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=180, cwd=clone)
            assert done.returncode == 0, (argv, done.stderr)
            json.loads(done.stdout)
        assert (clone / "cluster" / "cluster.json").exists()
    finally:
        stop_quietly(clone / "cluster")


def test_the_readmes_cluster_directory_is_ignored_by_git():
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")

    def ignored(path: str) -> bool:
        done = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "--no-index", path])
        assert done.returncode in (0, 1)
        return done.returncode == 0

    assert ignored("cluster/cluster.json") and ignored("cluster/shard-0/aml.db")
    assert not ignored("aml_retriever/cluster/control.py")  # the package is not the cluster


def test_move_prints_a_summary_every_bucket_with_verbose_and_only_errors_with_quiet(tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(SETTINGS))
    root = tmp_path / "c"
    port = free_port()
    two = placement(["shard-0", "shard-1"])
    user = next(u for u in (f"mover-{i}" for i in range(10_000))
                if two[bucket_of(u)] == "shard-1")
    try:
        cluster_sh("start", "--shards", "1", "--port", str(port), "--dir", str(root),
                   "--config", str(settings))
        client = Client(port)
        try:
            assert client.post("/add", {"request_id": "r1", "user_id": user, "session_id": "s",
                                        "messages": [{"role": "user", "content": "a kite"}]}
                               ).status == 200
        finally:
            client.close()
        cluster_sh("start", "--shards", "2", "--dir", str(root))

        # By default: a few lines saying what went where, and the report as JSON.
        done = run_cluster_sh("move", "--shards", "2", "--dir", str(root))
        assert done.returncode == 0, done.stderr
        assert len(done.stderr.splitlines()) == 3, done.stderr
        report = json.loads(done.stdout)
        assert report["users_moved"] == 1 and report["files_removed"] == 1
        assert report["moves"] == [{"from": "shard-0", "to": "shard-1",
                                    "buckets": report["buckets_moved"], "users": 1}]
        lines = done.stderr.splitlines()
        assert lines == [f"moved {report['buckets_moved']} buckets (1 user):",
                         f"  shard-0 -> shard-1: {report['buckets_moved']} buckets, 1 user",
                         "removed 1 emptied user file"]
        assert report["buckets_moved"] > 100  # what --verbose would have listed

        # --verbose: a line for every bucket switched (empty ones too), then the summary.
        done = run_cluster_sh("move", "--shards", "1", "--dir", str(root), "--verbose")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        lines = done.stderr.splitlines()
        switched = [line for line in lines if line.startswith("switched: ")]
        assert len(switched) == report["buckets_moved"] > 100
        assert {json.loads(line.split(": ", 1)[1])["shard"] for line in switched} == {"shard-0"}
        assert f"  shard-1 -> shard-0: {report['buckets_moved']} buckets, 1 user" in lines

        # --quiet: nothing at all when it works, the one line of an error when it does not.
        done = run_cluster_sh("move", "--shards", "2", "--dir", str(root), "--quiet")
        assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
        assert read_map(Layout(root).router.map) == two
        done = run_cluster_sh("move", "--shards", "3", "--dir", str(root), "--quiet")
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.startswith("error: --shards must be from 1 to") and \
            done.stderr.count("\n") == 1
        done = run_cluster_sh("move", "--shards", "2", "--dir", str(root))
        assert done.returncode == 0 and json.loads(done.stdout)["buckets_moved"] == 0
        assert done.stderr == "nothing to move: every bucket is already on its shard\n"
    finally:
        stop_quietly(root)


def test_an_installed_package_without_the_router_files_starts_nothing(tmp_path, monkeypatch):
    """`pip install .` ships the package alone: `cluster start` refuses at once, naming what is
    missing, instead of starting shards it cannot route to and leaving them running."""
    from aml_retriever.cluster import control, haproxy

    monkeypatch.setattr(haproxy, "TEMPLATE", tmp_path / "site-packages" / "deploy" / "haproxy.cfg")
    monkeypatch.setattr(control, "version", lambda: (2, 6))
    layout = control.Layout(tmp_path / "cluster")
    with pytest.raises(ClusterError, match=r"the router.s files are not here .*haproxy\.cfg"):
        control.start(layout, 2, free_port(), "127.0.0.1", None)
    assert not (tmp_path / "cluster").exists()  # nothing made, nothing started
