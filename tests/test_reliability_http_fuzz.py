"""A byte-level fuzz of the HTTP layer against a real server: malformed request lines, methods and
versions, bad and conflicting Content-Length, chunked bodies, oversized and broken headers, flipped,
cut and inserted bytes, pipelined requests. Every answer is a well-formed HTTP/1.1 response with the
JSON error shape, a 2xx or 4xx (505 only for a version it does not speak), or the connection is
closed; never a 500. Meanwhile, and afterwards, the server keeps serving everyone else.

The cases come from a seeded generator, so a failure names a case that can be replayed;
AML_FUZZ_REQUESTS=20000 runs more than the suite's 1500."""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter

from conftest import Client
from reliability_support import exchange, responses

FUZZ_REQUESTS = max(1500, int(os.environ.get("AML_FUZZ_REQUESTS", "1500")))
SEED = 5_2026

METHODS = [b"GET", b"POST", b"DELETE", b"PUT", b"HEAD", b"OPTIONS", b"PATCH", b"TRACE", b"CONNECT",
           b"get", b"BREW", b"", b"G\x00T", b"POST\xff", b"X" * 300, b"GET GET"]
PATHS = [b"/health", b"/search", b"/add", b"/stats", b"/delete_user", b"/users/fuzz-victim",
         b"/users/%ff%fe", b"/users/", b"/users/a/b", b"/users/%00", b"*", b"", b"//add",
         b"http://127.0.0.1/search", b"/search?query=x", b"/search#frag", b"/\xff\xfe",
         b"/" + b"a" * 70_000, b"/../../etc/passwd", b"/users/" + "用户".encode(), b"/%2e%2e/add",
         b"/users", b"/users/fuzz-victim/messages?cursor=%ff&limit=0", b"/users/fuzz-victim/messages/m1",
         b"/users/fuzz-victim/messages/m1/confirm", b"/users/fuzz-victim/export", b"/users?limit=\xff"]
VERSIONS = [b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0", b"HTTP/0.9", b"HTTP/1", b"HTTP/1.1.1", b"http/1.1",
            b"HTTP/11", b"HTTP/1.x", b"", b"HTTP/1.1 extra", b"HTTP/\xff"]
CONTENT_LENGTHS = [None, b"0", b"-1", b"+5", b" 12 ", b"0x10", b"1e3", b"\xb2", b"99999999999999999999",
                   b"", b"abc", b"5, 5", b"3"]
HEADER_HAZARDS = [
    b"Transfer-Encoding: chunked", b"Transfer-Encoding: chunked, identity", b"Transfer-Encoding: gzip",
    b"Content-Length: 7", b"Expect: 100-continue", b"Connection: close", b"Connection: keep-alive",
    b"Connection: \xff", b"Host: localhost", b"Host: a\r\nHost: b", b"X-Fold: a\r\n folded", b"NoColonHere",
    b"X-Nul: a\x00b", b"X-Latin: \xe9\xff", b"Bad Name: x", b": empty-name", b"X-Long: " + b"v" * 70_000,
    b"Content-Type: text/plain", b"Content-Type: application/json; charset=utf-16",
    b"Authorization: Bearer \xff", b"X-Api-Key: " + b"k" * 5000,
]
BODIES = [b"", b"{}", b"[]", b"null", b"{", b'{"query": "x", "user_id": "fuzz-victim"}',
          b'{"request_id": "f1", "user_id": "fuzz-victim", "session_id": "s", "messages": '
          b'[{"role": "user", "content": "fuzz content"}]}', b"\xff\xfe\x00", b"\x00" * 64,
          b"5\r\n{}{}{\r\n0\r\n\r\n", b"[" * 5000, json.dumps({"query": "\ud800"}).encode()]


def fuzz_case(rng: random.Random) -> bytes:
    """One hostile request (or several, pipelined), built from a well-formed one."""
    method = rng.choice([b"GET", b"POST", b"DELETE"]) if rng.random() < 0.6 else rng.choice(METHODS)
    path = rng.choice(PATHS[:6]) if rng.random() < 0.6 else rng.choice(PATHS)
    version = b"HTTP/1.1" if rng.random() < 0.7 else rng.choice(VERSIONS)
    body = rng.choice(BODIES)
    headers = [b"Host: 127.0.0.1", b"Content-Type: application/json"]
    length = b"%d" % len(body) if rng.random() < 0.6 else rng.choice(CONTENT_LENGTHS)
    if length is not None:
        headers.append(b"Content-Length: " + length)
    headers += rng.sample(HEADER_HAZARDS, rng.choice([0, 0, 1, 1, 2, 3]))
    if rng.random() < 0.1:
        headers += [b"X-H%d: v" % i for i in range(rng.choice([50, 101, 150]))]
    line_end = b"\r\n" if rng.random() < 0.9 else rng.choice([b"\n", b"\r", b"\r\r\n"])
    request_line = b" ".join(part for part in (method, path, version) if part or rng.random() < 0.5)
    data = line_end.join([request_line, *headers]) + line_end + line_end + body
    for _ in range(rng.choice([0, 0, 0, 1, 2, 5])):  # byte-level damage
        if not data:
            break
        at = rng.randrange(len(data))
        damage = rng.randrange(4)
        if damage == 0:
            data = data[:at] + bytes([rng.randrange(256)]) + data[at + 1:]
        elif damage == 1:
            data = data[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) + data[at:]
        elif damage == 2:
            data = data[:at] + data[at + rng.randint(1, 16):]
        else:
            data = data[:at]  # cut short
    if rng.random() < 0.1:  # pipelined: a valid request after the hostile one
        data += b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"
    return data


def test_fuzzed_requests_get_a_2xx_a_json_4xx_or_a_close_and_others_stay_served(make_app):
    app = make_app(socket_timeout=1.0, workers=8)
    control = Client(app.port)
    assert control.add("bystander", "b1", ["the bystander keeps its kestrel"]).status == 200
    stop = threading.Event()
    control_answers: Counter[int] = Counter()

    def keep_using_the_server() -> None:
        c = Client(app.port)
        n = 0
        while not stop.is_set():
            n += 1
            control_answers[c.search("bystander", "heron").status] += 1
            control_answers[c.add("bystander", f"during-{n}", [f"heron note {n}"]).status] += 1
            time.sleep(0.01)
        c.close()

    user = threading.Thread(target=keep_using_the_server)
    user.start()
    rng = random.Random(SEED)
    statuses: Counter[str] = Counter()
    try:
        for case in range(FUZZ_REQUESTS):
            data = fuzz_case(rng)
            stream = exchange(app.port, data, timeout=10)
            head = data.startswith(b"HEAD ")
            try:
                answers = responses(stream, head_first=head)
            except AssertionError as exc:
                raise AssertionError(f"case {case} (seed {SEED}) got a broken response: {exc}; "
                                     f"sent {data[:300]!r}") from None
            if not answers:
                statuses["closed"] += 1
            for index, answer in enumerate(answers):
                statuses[str(answer.status)] += 1
                assert answer.status < 500 or (answer.status == 505 and b"HTTP/1.1" not in data[:80]), \
                    f"case {case} (seed {SEED}): {answer.status} for {data[:300]!r}"
                if answer.status >= 400 and not (head and index == 0):  # HEAD: no body
                    error = answer.json()["error"]
                    assert set(error) == {"code", "message", "field"}, case
    finally:
        stop.set()
        user.join(timeout=30)
    assert set(control_answers) == {200}, control_answers  # everyone else was served throughout
    assert control_answers[200] > 20
    assert control.request("GET", "/health").status == 200
    assert control.contents("bystander", "kestrel") == ["the bystander keeps its kestrel"]
    assert statuses["200"] > 0 and statuses["400"] > 0  # control: the cases covered both sides
    print(f"\nfuzzed requests: {FUZZ_REQUESTS}, answers: {dict(sorted(statuses.items()))}")
