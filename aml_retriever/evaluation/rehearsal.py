"""A rehearsal of a leaderboard run: a running server driven as the platform's client drives it
(memory interface memory-api-v1.1), every answer checked as the platform checks it.

The platform's client, as published:

- Adds up to `add_concurrency` in flight (16-64), Searches up to `search_concurrency` (16-256);
  a conversation's Adds are sent in parallel, so they arrive in any order.
- A 429 is honoured: the client waits Retry-After seconds (at most 60; 60 when the header is
  absent or unreadable) and sends again; an Add answered 409 or 524 is sent again too (after
  Retry-After when given; the platform publishes no wait for these, and here it is a second, so
  a conflict that never resolves fails in half a minute rather than half an hour); at most 32
  attempts per logical write. Nothing else is retried: a Search answered 409 or any other
  4xx, a 5xx, a connection error or a timeout fails. A 200 whose body is malformed fails too.
- Non-streaming: every Add, then every question once. Streaming: each conversation's Adds in
  `stages` consecutive parts, every question asked after each part; only the last part's answers
  are scored, the earlier ones are checked for shape.

Here: one thread pool for Adds and one for Searches, shared by every conversation; each thread
keeps one keep-alive connection (http.client), dropped and opened again when the server has
closed it while idle. The report, answers and prompts are written by rehearsal_report.py.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import http.client
import json
import random
import select
import socket
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from aml_retriever.evaluation import dataset, metrics, rehearsal_report, runner
from aml_retriever.evaluation.dataset import Conversation, Question
from aml_retriever.evaluation.rehearsal_report import FAILED, OK, OK_AFTER_RETRY, Prompt, Scored, Tally

MAX_ATTEMPTS = 32
# Retry-After above this is cut to it; absent or unreadable, the platform waits this long after
# a 429. After a 409 or 524 without one: OTHER_WAIT_S (see the module's docstring).
MAX_WAIT_S = 60.0
OTHER_WAIT_S = 1.0
# What the platform sends again, by route; every other status but 200 fails the write.
RETRIED = {"add": frozenset({409, 429, 524}), "search": frozenset({429})}
PATHS = {"add": "/add", "search": "/search"}
# Seconds the first connection may take before the server is called unreachable (no request is
# sent then: a host that drops packets is said at once, not after every request's timeout).
PROBE_S = 30.0


class DataError(ValueError):
    """Data that cannot be rehearsed: missing, empty, not JSON, not a replay shape."""


@dataclass(frozen=True)
class Settings:
    """A rehearsal as the command line gives it."""

    url: str
    data: tuple[str, ...]
    api_key: str | None = None
    add_concurrency: int = 64
    search_concurrency: int = 256
    streaming: bool = False
    stages: int = 4
    top_k: int = 100
    seed: int = 0
    in_order: bool = False
    limit_users: int | None = None
    timeout: float = 1800.0
    prompts: int = 3
    out: str = "rehearsal"
    quiet: bool = False

    def shown(self) -> dict[str, Any]:
        """The settings as the report keeps them: whether a key was given, never the key."""
        out = asdict(self)
        out["api_key"] = "given" if self.api_key else "none"
        out["data"] = list(self.data)
        return out


# ---- data ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Data:
    """The conversations to rehearse, each question's `suite` set to its data set's name."""

    conversations: tuple[Conversation, ...]
    datasets: tuple[str, ...]  # the data set of each conversation


def load_data(paths: Sequence[str], limit_users: int | None = None) -> Data:
    """Every conversation of the files and directories given, in order; DataError names the
    file that cannot be read. A data set is named by its suite (locomo, beam, memdaily), with
    the --data path beside it when one suite comes from several paths (beam/100K, beam/500K)."""
    loaded: list[tuple[Conversation, str]] = []
    seen: dict[str, Path] = {}
    try:
        for arg in paths:
            for path in dataset.files([arg]):
                for conversation in _load_file(path):
                    if conversation.user_id in seen:  # one user's Adds twice: a 409 or a replay
                        raise DataError(f"user {conversation.user_id!r} is in both "
                                        f"{seen[conversation.user_id]} and {path}: rehearse them one "
                                        "at a time")
                    seen[conversation.user_id] = path
                    loaded.append((conversation, arg))
    except DataError:
        raise
    except ValueError as exc:  # a path that does not exist, a directory without *.json
        raise DataError(str(exc)) from None
    if not loaded:
        raise DataError(f"{', '.join(paths)}: no conversations in it")
    loaded = loaded[:limit_users] if limit_users else loaded
    sources: dict[str, set[str]] = {}
    for conversation, arg in loaded:
        for q in conversation.questions:
            sources.setdefault(q.suite, set()).add(arg)

    def name(suite: str, arg: str) -> str:
        return suite if len(sources[suite]) == 1 else f"{suite} ({arg})"

    conversations, names = [], []
    for conversation, arg in loaded:
        questions = tuple(replace(q, suite=name(q.suite, arg)) for q in conversation.questions)
        conversations.append(replace(conversation, questions=questions))
        names.append(questions[0].suite if questions else Path(arg).name)
    return Data(tuple(conversations), tuple(names))


def _load_file(path: Path) -> list[Conversation]:
    try:
        conversations = dataset.load(path)
        for conversation in conversations:
            for add in conversation.adds:
                if not isinstance(add, dict) or not isinstance(add.get("messages"), list):
                    raise DataError(f"{path}: an Add of {conversation.user_id!r} is not an Add body")
        return conversations
    except DataError:
        raise
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not UTF-8 text") from None
    except KeyError as exc:
        raise DataError(f"{path}: not a replay shape (no {exc} field)") from None
    except OSError as exc:
        raise DataError(f"{path}: {exc.strerror or exc}") from None
    except (ValueError, TypeError, AttributeError, IndexError) as exc:
        message = str(exc)
        raise DataError(message if message.startswith(str(path)) else f"{path}: not a replay shape "
                        f"({message})") from None


def stage_parts(adds: Sequence[dict[str, Any]], stages: int) -> list[list[dict[str, Any]]]:
    """A conversation's Adds in `stages` consecutive parts of near-equal size, in file order
    (fewer parts when there are fewer Adds, so no stage repeats the one before; one empty part
    for a conversation without Adds, so its questions are still asked)."""
    count = max(1, min(stages, len(adds)))
    bounds = [i * len(adds) // count for i in range(count + 1)]
    return [list(adds[bounds[i]:bounds[i + 1]]) for i in range(count)]


def search_body(user_id: str, q: Question, top_k: int) -> dict[str, Any]:
    """The platform's Search: the question, top_k, and its answer choices when it has them."""
    body: dict[str, Any] = {"user_id": user_id, "query": q.question, "top_k": top_k}
    if q.options:
        body["options"] = list(q.options)
    return body


# ---- one HTTP exchange -----------------------------------------------------------------------

@dataclass(frozen=True)
class Attempt:
    """One request sent: its status, or `kind` saying why none came (timeout, refused, closed,
    protocol, error)."""

    status: int | None
    kind: str
    ms: float
    body: bytes = b""
    retry_after: str | None = None
    detail: str = ""


class Client:
    """POSTs JSON to one server: one keep-alive connection per thread, opened again when the
    server closed it while it was idle (as pooled clients check before reusing a connection)."""

    def __init__(self, url: str, api_key: str | None, timeout: float) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.https = parts.scheme == "https"
        self.host, self.port, self.base = parts.hostname, parts.port, parts.path.rstrip("/")
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self._local = threading.local()
        self._lock = threading.Lock()
        self._opened: list[http.client.HTTPConnection] = []

    def _new(self, timeout: float) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=timeout)

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._new(self.timeout)
            with self._lock:
                self._opened.append(conn)
        elif conn.sock is not None and _closed_by_peer(conn.sock):
            conn.close()  # reopened by the next request
        return conn

    def probe(self) -> str | None:
        """Why nothing can be sent (no server at the address), or None when it accepts a
        connection. Sends no request, so nothing is counted."""
        waited = min(self.timeout, PROBE_S)
        conn = self._new(waited)
        try:
            conn.connect()
            return None
        except OSError as exc:
            return f"nothing answers at {self.host}:{self.port or (443 if self.https else 80)} " \
                   f"({_failure(exc, waited)[1]})"
        finally:
            conn.close()

    def post(self, path: str, data: bytes) -> Attempt:
        started = time.perf_counter()
        conn = self._connection()
        try:
            conn.request("POST", self.base + path, body=data, headers=self.headers)
            response = conn.getresponse()
            body = response.read()
        except Exception as exc:  # any way the exchange broke is an attempt without an answer
            conn.close()
            kind, detail = _failure(exc, self.timeout)
            return Attempt(None, kind, (time.perf_counter() - started) * 1000, detail=detail)
        if response.will_close:
            conn.close()
        return Attempt(response.status, str(response.status), (time.perf_counter() - started) * 1000,
                       body, response.getheader("Retry-After"))

    def close(self) -> None:
        with self._lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()


def _closed_by_peer(sock: socket.socket) -> bool:
    """An idle keep-alive socket that is readable has been closed by the server (or holds bytes
    no request asked for): it must not carry the next request."""
    if hasattr(select, "poll"):  # no descriptor limit, unlike select() (4,096 threads may run)
        poller = select.poll()
        poller.register(sock, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    return bool(select.select([sock], [], [], 0)[0])


def _failure(exc: BaseException, timeout: float) -> tuple[str, str]:
    """(kind, reason) of an exchange that got no answer."""
    if isinstance(exc, TimeoutError):
        return "timeout", f"no answer within {timeout:g} s"
    if isinstance(exc, ConnectionRefusedError):
        return "refused", "connection refused"
    if isinstance(exc, ConnectionError | http.client.RemoteDisconnected):
        return "closed", "connection closed without an answer"
    if isinstance(exc, http.client.HTTPException):
        return "protocol", f"malformed HTTP answer ({type(exc).__name__})"
    if isinstance(exc, socket.gaierror):
        return "error", f"cannot resolve the host ({exc.strerror})"
    if isinstance(exc, OSError):
        return "error", exc.strerror or type(exc).__name__
    return "error", f"client error ({type(exc).__name__})"


# ---- the platform's checks -------------------------------------------------------------------

def retry_wait(header: str | None, status: int = 429) -> float:
    """Seconds to wait before sending again: Retry-After as seconds, at most 60; when the header
    is absent or unreadable (an HTTP date included: the platform reads seconds), 60 after a 429
    and OTHER_WAIT_S after a 409 or 524."""
    missing = MAX_WAIT_S if status == 429 else OTHER_WAIT_S
    try:
        seconds = float(header) if header is not None else missing
    except ValueError:
        return missing
    return min(seconds, MAX_WAIT_S) if 0 <= seconds else missing


def check_add(sent: dict[str, Any], parsed: Any) -> str | None:
    """Why an Add's 200 body would fail the platform, or None."""
    if not isinstance(parsed, dict):
        return "body is not a JSON object"
    if parsed.get("success") is not True:
        return "success is not true"
    for name in ("request_id", "user_id", "session_id"):
        if parsed.get(name) != sent.get(name):
            return f"{name} is not echoed as sent"
    stored = parsed.get("stored")
    if not isinstance(stored, int) or isinstance(stored, bool):
        return "stored is not an integer"
    return None


def check_search(parsed: Any, top_k: int) -> str | None:
    """Why a Search's 200 body would fail the platform, or None."""
    data = parsed.get("data") if isinstance(parsed, dict) else None
    if not isinstance(data, list):
        return "body has no data list"
    if len(data) > top_k:
        return f"data has {len(data)} items, more than top_k {top_k}"
    for i, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("content"), str):
            return f"data[{i}] has no string content"
        score = item.get("score", 0.0)  # optional, but a number when present
        if not isinstance(score, int | float) or isinstance(score, bool):
            return f"data[{i}].score is not a number"
    return None


def _error_code(body: bytes) -> str:
    """The contract's error code of a refusal, never the body itself (it may echo content)."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return ""
    error = parsed.get("error") if isinstance(parsed, dict) else None
    return f" ({error.get('code')})" if isinstance(error, dict) and error.get("code") else ""


@dataclass(frozen=True)
class Answer:
    """What one logical write came to after the platform's retries."""

    outcome: str
    reason: str = ""
    items: tuple[dict[str, Any], ...] = ()
    ms: float = 0.0


def send(client: Client, tally: Tally, route: str, body: dict[str, Any], label: str, top_k: int,
         stop: threading.Event) -> Answer:
    """One logical write, retried as the platform retries it; counted in `tally`."""
    answer, retried = _send(client, tally, route, body, top_k, stop)
    tally.done(route, label, answer.outcome, answer.reason, retried)
    return answer


def _send(client: Client, tally: Tally, route: str, body: dict[str, Any], top_k: int,
          stop: threading.Event) -> tuple[Answer, str]:
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    seen: Counter[str] = Counter()  # the retried statuses, for the example reason
    for attempt in range(1, MAX_ATTEMPTS + 1):
        if stop.is_set():
            return Answer(FAILED, "not sent: the rehearsal was interrupted"), ""
        got = client.post(PATHS[route], data)
        tally.attempt(route, got.kind, got.ms)
        retried = ", ".join(f"HTTP {s} x{n}" for s, n in seen.items())
        if got.status in RETRIED[route]:
            seen[str(got.status)] += 1
            if attempt == MAX_ATTEMPTS:
                return Answer(FAILED, f"HTTP {got.status} on all {MAX_ATTEMPTS} attempts", ms=got.ms), ""
            wait = retry_wait(got.retry_after, got.status)
            tally.retry(route, wait)
            stop.wait(wait)  # cut short only when the rehearsal is interrupted
            continue
        if got.status is None:
            return Answer(FAILED, got.detail, ms=got.ms), retried
        if got.status != 200:
            return Answer(FAILED, f"HTTP {got.status}{_error_code(got.body)}", ms=got.ms), retried
        try:
            parsed = json.loads(got.body)
        except ValueError:
            return Answer(FAILED, "200 whose body is not JSON", ms=got.ms), retried
        problem = check_add(body, parsed) if route == "add" else check_search(parsed, top_k)
        if problem:
            return Answer(FAILED, f"200 whose {problem}", ms=got.ms), retried
        items = tuple(parsed["data"]) if route == "search" else ()
        return Answer(OK if attempt == 1 else OK_AFTER_RETRY, items=items, ms=got.ms), retried
    raise AssertionError("unreachable: the last attempt returns")


# ---- the run ---------------------------------------------------------------------------------

def digest(contents: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(contents).encode("utf-8")).hexdigest()


def planned(settings: Settings, data: Data) -> int:
    """Logical writes a run sends: every Add, and every question once (at each stage, streaming)."""
    total = 0
    for c in data.conversations:
        asked = len(stage_parts(c.adds, settings.stages)) if settings.streaming else 1
        total += len(c.adds) + asked * len(c.questions)
    return total


class Rehearsal:
    """The Adds and Searches of one rehearsal over two shared pools, and what came back."""

    def __init__(self, settings: Settings, data: Data, client: Client,
                 keep: set[tuple[int, int]], step: Callable[[], None]) -> None:
        self.settings, self.data, self.client = settings, data, client
        self.tally = Tally()
        self.stop = threading.Event()
        self.scored: dict[tuple[int, int], Scored] = {}
        self.kept: dict[tuple[int, int], list[str]] = {}  # contents of the questions to prompt
        self._keep, self._step = keep, step
        self._lock = threading.Lock()
        self.error: BaseException | None = None
        self.add_pool = cf.ThreadPoolExecutor(settings.add_concurrency, "rehearse-add")
        self.search_pool = cf.ThreadPoolExecutor(settings.search_concurrency, "rehearse-search")

    def run(self) -> None:
        try:
            if self.settings.streaming:
                self._streaming()
            else:
                self._plain()
        finally:
            self.stop.set()  # jobs not yet started return at once (an interrupt lands here)
            self.add_pool.shutdown(cancel_futures=True)
            self.search_pool.shutdown(cancel_futures=True)

    def add(self, body: dict[str, Any]) -> None:
        send(self.client, self.tally, "add", body, str(body.get("request_id")), self.settings.top_k,
             self.stop)
        self._step()

    def add_in_order(self, adds: Sequence[dict[str, Any]]) -> None:
        for body in adds:
            self.add(body)

    def search(self, ci: int, qi: int, scored: bool) -> None:
        conversation = self.data.conversations[ci]
        q = conversation.questions[qi]
        answer = send(self.client, self.tally, "search",
                      search_body(conversation.user_id, q, self.settings.top_k),
                      f"{conversation.user_id} {q.qid}", self.settings.top_k, self.stop)
        if scored:
            self._score(ci, qi, answer)
        self._step()

    def _score(self, ci: int, qi: int, answer: Answer) -> None:
        conversation = self.data.conversations[ci]
        q = conversation.questions[qi]
        contents = [item["content"] for item in answer.items]
        outcome = runner.Outcome(conversation.user_id, q,
                                 tuple(metrics.results_from_items(answer.items)), answer.ms)
        failed = answer.outcome == FAILED
        scored = Scored(conversation.user_id, q.qid, None if failed else len(contents),
                        None if failed else digest(contents), runner.score([outcome])[0],
                        answer.reason if failed else "")
        with self._lock:
            self.scored[(ci, qi)] = scored
            if (ci, qi) in self._keep and not failed:
                self.kept[(ci, qi)] = contents

    def shuffled(self, ci: int, adds: Sequence[dict[str, Any]], stage: int = 0) -> list[dict[str, Any]]:
        """A conversation's Adds (of one stage) in the order they are sent: file order with
        --in-order, else a shuffle by the seed, the user and the stage (the same in every run
        with that seed)."""
        order = list(adds)
        if not self.settings.in_order:
            user = self.data.conversations[ci].user_id
            random.Random(f"{self.settings.seed}:{user}:{stage}").shuffle(order)
        return order

    def _plain(self) -> None:
        """Every Add (a conversation's in parallel, shuffled), then every question once."""
        if self.settings.in_order:
            jobs = [self.add_pool.submit(self.add_in_order, c.adds) for c in self.data.conversations]
        else:
            jobs = [self.add_pool.submit(self.add, body) for ci, c in enumerate(self.data.conversations)
                    for body in self.shuffled(ci, c.adds)]
        _wait(jobs)
        _wait([self.search_pool.submit(self.search, ci, qi, True)
               for ci, c in enumerate(self.data.conversations) for qi in range(len(c.questions))])

    def _streaming(self) -> None:
        """Every conversation through its stages at once: a stage's Adds, then its questions,
        then the next stage; the pools interleave the conversations."""
        finished = threading.Event()
        left = [len(self.data.conversations)]

        def one_done() -> None:
            with self._lock:
                left[0] -= 1
                if left[0] == 0:
                    finished.set()

        for ci, conversation in enumerate(self.data.conversations):
            _Stages(self, ci, stage_parts(conversation.adds, self.settings.stages), one_done,
                    self._broken).next_stage()
        while not finished.wait(0.2):  # short waits, so an interrupt is seen
            if self.error is not None:
                raise self.error

    def _broken(self, exc: BaseException) -> None:
        """A conversation could not move on (a fault of this client, not of the server): the run
        stops and says so rather than waiting for it."""
        with self._lock:
            self.error = self.error or exc


class _Stages:
    """One conversation's way through its stages, moved on by the completion of its requests."""

    def __init__(self, run: Rehearsal, ci: int, parts: list[list[dict[str, Any]]],
                 done: Callable[[], None], broken: Callable[[BaseException], None]) -> None:
        self.run, self.ci, self.parts, self.done, self.broken = run, ci, parts, done, broken
        self.stage = 0

    def next_stage(self) -> None:
        adds = self.run.shuffled(self.ci, self.parts[self.stage], self.stage)
        if self.run.settings.in_order:
            jobs = [self.run.add_pool.submit(self.run.add_in_order, adds)] if adds else []
        else:
            jobs = [self.run.add_pool.submit(self.run.add, body) for body in adds]
        _then(jobs, self._ask, self.broken)

    def _ask(self) -> None:
        last = self.stage == len(self.parts) - 1
        count = len(self.run.data.conversations[self.ci].questions)
        _then([self.run.search_pool.submit(self.run.search, self.ci, qi, last) for qi in range(count)],
              self._after, self.broken)

    def _after(self) -> None:
        self.stage += 1
        if self.stage < len(self.parts):
            self.next_stage()
        else:
            self.done()


def _then(jobs: list[cf.Future[None]], then: Callable[[], None],
          broken: Callable[[BaseException], None]) -> None:
    """Call `then` once every job has finished (at once when there are none); `broken` with what
    a job or `then` raised (a callback's exception would otherwise be logged with a traceback and
    lost). A job cancelled by an interrupt calls neither: the run is over then."""
    if not jobs:
        _guarded(then, broken)
        return
    left = [len(jobs)]
    lock = threading.Lock()

    def finished(job: cf.Future[None]) -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if job.cancelled():
            return
        if job.exception() is not None:
            broken(job.exception())  # type: ignore[arg-type]
        elif last:
            _guarded(then, broken)

    for job in jobs:
        job.add_done_callback(finished)


def _guarded(then: Callable[[], None], broken: Callable[[BaseException], None]) -> None:
    try:
        then()
    except Exception as exc:
        broken(exc)


def _wait(jobs: list[cf.Future[None]]) -> None:
    for job in jobs:
        job.result()


def described(data: Data) -> dict[str, Any]:
    """What the report says of the data and of the client's rules, beside the counts."""
    questions = [q for c in data.conversations for q in c.questions]
    sets: dict[str, int] = {}
    for name in data.datasets:
        sets[name] = sets.get(name, 0) + 1
    return {"data": {"conversations": len(data.conversations), "datasets": sets,
                     "adds": sum(len(c.adds) for c in data.conversations),
                     "messages": sum(c.message_count for c in data.conversations),
                     "questions": len(questions),
                     "questions_with_options": sum(1 for q in questions if q.options)},
            "client": {"max_attempts": MAX_ATTEMPTS, "max_wait_s": MAX_WAIT_S,
                       "retried": {route: sorted(codes) for route, codes in RETRIED.items()}}}


# ---- the command -----------------------------------------------------------------------------

class Meter(Protocol):
    """What shows a run's progress (progress.Progress, given by the command line)."""

    def step(self, done: int) -> None: ...

    def finish(self) -> None: ...


class _Unseen:
    def step(self, done: int) -> None:
        pass

    def finish(self) -> None:
        pass


@dataclass(frozen=True)
class Done:
    """A finished rehearsal: its report, where it was written, and why it stopped early ("" when
    it ran to the end)."""

    report: dict[str, Any]
    path: Path
    aborted: str = ""


def rehearse(settings: Settings, meter: Callable[[int], Meter] | None = None) -> Done:
    """Load the data, check that something listens, run, write the report, answers and prompts.
    DataError when the data cannot be used (nothing is sent then); OSError when --out cannot be
    made (before anything is sent)."""
    data = load_data(settings.data, settings.limit_users)
    client = Client(settings.url, settings.api_key, settings.timeout)
    folder = Path(settings.out)
    folder.mkdir(parents=True, exist_ok=True)
    picked = rehearsal_report.pick(data.datasets, [len(c.questions) for c in data.conversations],
                                   settings.prompts)
    total = planned(settings, data)
    shown = meter(total) if meter else _Unseen()
    count, lock = [0], threading.Lock()

    def step() -> None:
        with lock:
            count[0] += 1
            shown.step(count[0])

    run = Rehearsal(settings, data, client, set(picked), step)
    started = time.perf_counter()
    aborted = client.probe() or ""  # nothing listens: said once, rather than once per request
    if not aborted:
        try:
            run.run()
        except KeyboardInterrupt:
            aborted = "interrupted"
        except Exception as exc:  # a fault of this client, not of the server: one line, report kept
            aborted = f"the rehearsal itself failed ({type(exc).__name__}: {exc})"
        finally:
            shown.finish()
            client.close()
    seconds = time.perf_counter() - started
    scored = [run.scored[key] for key in sorted(run.scored)]  # data order, whatever finished first
    prompts = rehearsal_report.write_prompts(folder, [
        Prompt(data.conversations[ci].user_id, data.conversations[ci].questions[qi].qid,
               data.conversations[ci].questions[qi].question,
               tuple(run.kept[(ci, qi)]) if (ci, qi) in run.kept else None)
        for ci, qi in picked if (ci, qi) in run.scored])
    finished = sum(sum(c.values()) for c in run.tally.outcomes.values())
    report = rehearsal_report.report(settings.shown(), settings.url, seconds, run.tally, scored, prompts,
                                     described(data), aborted, unsent=total - finished)
    return Done(report, rehearsal_report.write(folder, report, scored), aborted)
