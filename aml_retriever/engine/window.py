"""The answer window: after the ranked evidence, the parts of the user's memory most likely to
hold what the ranking missed, up to the reader's window.

A reader that answers from the first N tokens of a Search's results (the leaderboard's reads
117,760 of a top_k 100 answer) answers best with the strongest evidence first and as much of the
conversation as fits after it. So a Search with `answer_window_tokens` keeps the front of its
ranking as it is and then adds *context items*: runs of the user's messages not yet returned,
each a whole message or consecutive whole messages of one session, every message at most once in
the whole answer, until the window is full or the answer holds `top_k` items.

The order context is chosen in (measured on the development sets, top_k 100, window 117,760
tokens; evidence inside the window, LoCoMo / BEAM 100K / BEAM 500K / MemDaily x10):
  1. the 20 best hits, hit by hit in rank order: the hit's own messages (a ranked item past
     those kept is context too), then the messages 1, 2 and 3 away in its session: an answer
     often sits next to the turn that names the question's words;
  2. every other ranked hit's own messages, so no evidence the ranking returns today is lost;
  3. the user's own turns in the sessions the ranking touched (sessions weighed by the sum of
     1/sqrt(rank) of their hits): most questions ask what the user said (BEAM: 78% of evidence);
     for a question that names a speaker the conversation knows by their role, that role's;
  4. every hit's messages and those 1 and 2 away;
  5. the rest of those sessions, nearest a hit first;
  6. everything else, oldest session first.
Whole sessions in ranking order alone reached 1.000 / .966 / .721 / 1.000: on users of long
sessions they spend the window on little. Each hit with its neighbours 1 away, then the users'
turns, then 2 away: 1.000 / .982 / .768 / 1.000. The order above: 1.000 / .995 / .811 / 1.000
(the ranked part alone: .924 / .926 / .747 / .998).

It reads one row per visible message without its text (id, session, time, role, token count
stored at Add time), then the texts of the messages it returns.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from aml_retriever.analysis.tokens import estimate_tokens
from aml_retriever.storage.timeline import ReadFilter

# Ranked items kept before the context: until they hold KEEP_WORDS words and KEEP_MIN items, at
# most KEEP_MAX, so the agent regime's measures (the first 1,000 words, the first hits: b@1000w,
# MRR) are today's while item slots are left for context. Keeping all top_k items left none on
# large memories (BEAM 500K: .759); keeping 10 to 50 reached .794.
KEEP_WORDS = 1000
KEEP_MIN = 10
KEEP_MAX = 50
# What a reader spends on an item besides its content (its id, time, role, separators), counted
# against the window so that the last item is not cut.
ITEM_TOKENS = 16
# What the reader's prompt holds besides the items: its instructions and answer template (the
# leaderboard's are 73 to 374 tokens; this leaves room for one a little longer), then the
# question and its options, counted as the items are (`prompt_tokens`).
PROMPT_RESERVE = 400
# What the reader's view (memory/reader_view.py) adds to a message at most but for the dates it
# writes out: a day and time, a name and a role ("[Mon 8 May 2023, 13:56 UTC] Caroline (user): ",
# 19 tokens by the estimate; a name of three words and a long role, 30). The fill counts it for
# each message; the items as rendered are then counted again, exactly (`within`).
VIEW_LINE_TOKENS = 30
# The turns of the question's speakers, when it names none: the user's own (BEAM: 78% of the
# evidence is the user's turns).
USERS = frozenset({"user"})
# Messages tried in a row that did not fit what is left of the window before the fill stops:
# the rest of a long memory is then all too large.
GIVE_UP_AFTER = 400
# A step of the order: (kind, how many of the best hits it starts from, how far around each).
Phase = tuple[str, int, int]
ORDER: tuple[Phase, ...] = (("near", 20, 3), ("near", 100, 0), ("users", 100, 0),
                            ("near", 100, 2), ("sessions", 100, 0), ("time", 0, 0))


def prompt_tokens(query: str, options: Sequence[str]) -> int:
    """What the reader's prompt spends besides the items: PROMPT_RESERVE, the question and its
    options."""
    return PROMPT_RESERVE + estimate_tokens(query) + sum(estimate_tokens(o) for o in options)


def within(items: list[tuple[dict[str, Any], Any]], tokens: list[int],
           budget: int) -> list[tuple[dict[str, Any], Any]]:
    """The context items, in order, that `budget` tokens hold, each item its `tokens` and
    ITEM_TOKENS: the fill counted a message in the reader's view at most what the view adds but
    for its dates, which only the rendered message tells."""
    kept_items = []
    for item, count in zip(items, tokens, strict=True):
        budget -= count + ITEM_TOKENS
        if budget < 0:
            break
        kept_items.append(item)
    return kept_items


class Message(NamedTuple):
    """A visible message as the fill reads it: no text. A tuple: the fill makes one for every
    visible message (1,000 to 1,400 a Search on BEAM 500K dev users), and a frozen dataclass
    took four times as long to make."""

    id: int
    session_id: str
    timestamp_ms: int
    role: str
    tokens: int


@dataclass(frozen=True)
class Memory:
    """The user's visible messages: sessions in time order, each in conversation order."""

    messages: dict[int, Message]
    sessions: tuple[tuple[int, ...], ...]

    @classmethod
    def read(cls, conn: sqlite3.Connection, read: ReadFilter, session_id: str | None) -> Memory:
        where, params = read.clause()
        if session_id is not None:
            where, params = f"{where} AND session_id = ?", [*params, session_id]
        messages: dict[int, Message] = {}
        by_session: dict[str, list[int]] = {}
        for mid, session, ts, role, tokens, content in conn.execute(
                "SELECT id, session_id, timestamp_ms, role, tokens, CASE WHEN tokens IS NULL "
                f"THEN content END FROM messages WHERE {where} "
                "ORDER BY session_id, timestamp_ms, id", params):
            # A file upgraded from before the stored estimate (migration 6) until `reindex`.
            count = tokens if tokens is not None else estimate_tokens(content)
            messages[mid] = Message(mid, session, ts, role, count)
            by_session.setdefault(session, []).append(mid)
        order = sorted(by_session.values(), key=lambda ids: (messages[ids[0]].timestamp_ms, ids[0]))
        return cls(messages, tuple(tuple(ids) for ids in order))


def kept(word_counts: Iterable[int], top_k: int) -> tuple[int, int]:
    """How many of the ranked items an answer window keeps (KEEP_WORDS, KEEP_MIN, KEEP_MAX), and
    their words. Reads the counts, best item first, only as far as it keeps: counting a long
    reply's words is not free, and most of a top_k 100 answer is never kept."""
    counts = iter(word_counts)
    n = words = 0
    while n < min(KEEP_MAX, top_k) and not (n >= KEEP_MIN and words >= KEEP_WORDS):
        count = next(counts, None)
        if count is None:
            break
        n += 1
        words += count
    return n, words


def context(memory: Memory, hits: Sequence[Sequence[int]], returned: set[int], budget: int,
            slots: int, users: frozenset[str] = USERS, per_message: int = 0) -> list[list[int]]:
    """Runs of messages not in `returned` (ids in conversation order), in the order their first
    message was chosen, within `budget` tokens (each run's messages, each with `per_message`
    more, plus ITEM_TOKENS) and `slots` runs. `hits`: the ranked items' messages, best first;
    `users`: the roles whose turns the "users" phase takes (the question's speakers'). A run may
    step over messages the ranked part holds: its ids are exactly the messages it carries."""
    where = {m: (s, p) for s, ids in enumerate(memory.sessions) for p, m in enumerate(ids)}
    taken: dict[tuple[int, int], int] = {}  # position -> the order it was chosen in
    runs = refused = 0
    for s, p in _candidates(memory, hits, where, users):
        if budget <= 0 or refused >= GIVE_UP_AFTER:
            break
        m = memory.sessions[s][p]
        if (s, p) in taken or m in returned:
            continue
        joins = _touches(memory, taken, returned, s, p, -1) + _touches(memory, taken, returned, s, p, 1)
        opens = 1 - joins  # 1 opens a run, 0 extends one, -1 joins two
        if opens == 1 and runs >= slots:
            continue  # no item left to open: only extensions and joins from now on
        cost = memory.messages[m].tokens + 1 + per_message + ITEM_TOKENS * opens  # + the separator
        if cost > budget:
            refused += 1
            continue
        refused = 0
        taken[(s, p)] = len(taken)
        runs += opens
        budget -= cost
    return _runs(memory, taken, returned)


def _touches(memory: Memory, taken: dict[tuple[int, int], int], returned: set[int], s: int,
             p: int, step: int) -> int:
    """Whether the message at (s, p) meets a chosen one `step` away, past returned ones."""
    ids, q = memory.sessions[s], p + step
    while 0 <= q < len(ids) and (s, q) not in taken and ids[q] in returned:
        q += step
    return int(0 <= q < len(ids) and (s, q) in taken)


def _runs(memory: Memory, taken: dict[tuple[int, int], int],
          returned: set[int]) -> list[list[int]]:
    found: list[tuple[int, list[int]]] = []
    for s, ids in enumerate(memory.sessions):
        run: list[int] = []
        first = 0
        for p, m in enumerate(ids):
            if (s, p) in taken:
                first = min(first, taken[(s, p)]) if run else taken[(s, p)]
                run.append(m)
            elif run and m not in returned:
                found.append((first, run))
                run = []
        if run:
            found.append((first, run))
    return [run for _, run in sorted(found, key=lambda entry: entry[0])]


def _candidates(memory: Memory, hits: Sequence[Sequence[int]], where: dict[int, tuple[int, int]],
                users: frozenset[str]) -> Iterator[tuple[int, int]]:
    """Every position in the order ORDER tries them (a position may come more than once)."""
    placed = [[where[m] for m in ids if m in where] for ids in hits]
    placed = [ps for ps in placed if ps]
    for kind, best, radius in ORDER:
        if kind == "near":
            yield from _near(memory, placed[:best], radius)
        elif kind == "users":
            yield from ((s, p) for s, p in _sessions(memory, placed[:best])
                        if memory.messages[memory.sessions[s][p]].role in users)
        elif kind == "sessions":
            yield from _sessions(memory, placed[:best])
        else:
            for s, ids in enumerate(memory.sessions):
                yield from ((s, p) for p in range(len(ids)))


def _near(memory: Memory, placed: Sequence[Sequence[tuple[int, int]]],
          radius: int) -> Iterator[tuple[int, int]]:
    """Hit by hit in rank order: the hit's own messages (those of ranked items past the ones
    kept are context too), then its neighbours one message away, two, ... out to `radius`."""
    for ps in placed:
        s, n = ps[0][0], len(memory.sessions[ps[0][0]])
        lo, hi = min(p for _, p in ps), max(p for _, p in ps)
        yield from ((s, p) for p in range(lo, hi + 1))
        for d in range(1, radius + 1):
            if lo - d >= 0:
                yield s, lo - d
            if hi + d < n:
                yield s, hi + d


def _sessions(memory: Memory,
              placed: Sequence[Sequence[tuple[int, int]]]) -> Iterator[tuple[int, int]]:
    """The sessions holding hits, heaviest first (the sum of 1/sqrt(rank) of their hits); in
    each, the messages nearest a hit first."""
    weight: dict[int, float] = {}
    centres: dict[int, list[int]] = {}
    for rank, ps in enumerate(placed, 1):
        s = ps[0][0]
        weight[s] = weight.get(s, 0.0) + rank ** -0.5
        centres.setdefault(s, []).extend(p for _, p in ps)
    for s in sorted(weight, key=lambda session: (-weight[session], session)):
        distance = _distances(len(memory.sessions[s]), centres[s])
        yield from ((s, p) for p in sorted(range(len(distance)), key=lambda q: (distance[q], q)))


def _distances(n: int, centres: Sequence[int]) -> list[int]:
    """Each position's distance to the nearest centre (two sweeps)."""
    distance = [n + 1] * n
    for c in centres:
        distance[c] = 0
    for p in range(1, n):
        distance[p] = min(distance[p], distance[p - 1] + 1)
    for p in range(n - 2, -1, -1):
        distance[p] = min(distance[p], distance[p + 1] + 1)
    return distance
