"""The answer window: after the ranked evidence, the parts of the user's memory most likely to
hold what the ranking missed, up to the reader's window.

A reader that answers from the first N tokens of a Search's results (the leaderboard's reads
117,760 of a top_k 100 answer) answers best with the strongest evidence first and as much of the
conversation as fits after it. So a Search with `answer_window_tokens` keeps the front of its
ranking as it is and then adds *context items*: one item a session, holding the messages of that
session the fill chose, whole and in conversation order (where it leaves messages out between
two it holds, a line GAP_LINE says so), every message at most once in the whole answer, until
the window is full or the answer holds `top_k` items. Items follow one another in the order
their first message was chosen.

The order messages are chosen in (measured on the development sets, top_k 100, window 117,760
tokens, the reader's view on; evidence inside the window, BEAM 500K):
  1. the 20 best hits' own messages (those of ranked items past the kept front);
  2. the user's own turns in the sessions the ranking touched (sessions weighed by the sum of
     1/sqrt(rank) of their hits), nearest a hit first: most questions ask what the user said
     (BEAM: 78% of evidence); for a question that names a speaker the conversation knows by
     their role, that role's;
  3. those turns in every other session, oldest first;
  4. every other hit's own messages;
  5. the 20 best hits' neighbours out to 3 messages away, then every hit's out to 2;
  6. the rest of the sessions hit, nearest a hit first;
  7. everything else, oldest session first.
With runs of consecutive messages as items (100 items: too few for single turns, and a run that
holds several user turns carries the long replies between them) and the neighbours first: .795.
One item a session: .827; every hit's own messages and the users' turns first: .873; the turns
of every session next: .876; each message's reader's view counted as rendered rather than at its
most, and the estimate's margin taken once for the answer rather than per message: .915; the
users' turns before all but the 20 best hits (the ranked 21 to 100 are mostly long replies, and
filled the window first): .940. BEAM 100K .980 -> .991; LoCoMo and MemDaily x10 1.000 throughout.

What it reads is bounded by the window, not by the memory: the messages' outlines (`Outline`:
no text) are read through the conversation index a page at a time, from the hits outward and
from a session's start, as the order walks to them, and never more than READ_LIMIT of them;
then the texts of the messages it returns.
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from aml_retriever.analysis.tokens import pieces
from aml_retriever.engine.held import text_bytes
from aml_retriever.storage.store import rows_in
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
# question and its options, counted as the items are (`prompt_pieces`).
PROMPT_RESERVE = 400
# The line an item holds where it leaves out messages of its session, and what it costs with
# the newline before it.
GAP_LINE = "…"
GAP_PIECES = pieces(GAP_LINE) + 1
# The turns of the question's speakers, when it names none: the user's own (BEAM: 78% of the
# evidence is the user's turns).
USERS = frozenset({"user"})
# Messages tried in a row that did not fit what is left of the window before the fill stops:
# the rest of a long memory is then all too large.
GIVE_UP_AFTER = 400
# The most message outlines one fill reads: a window of 117,760 tokens holds at most ~40,000
# messages of a few words (4 pieces with its separator, 3 with neither), and a fill walks past
# about as many as it takes (another role's turns, messages already returned). On the
# development sets a fill reads at most 1,400 (every message of a BEAM 500K user); here the
# cost of one is ~2 us, so a fill's reads cost at most ~0.1 s whatever the memory holds.
READ_LIMIT = 50_000
# Outlines read at a time from the conversation index where a walk needs the next message, and
# twice that between two hits of one session (the walks out from both meet there). The order
# walks out from up to 100 hits at once, most of them a few steps: pages that doubled as a walk
# went on read twice the rows the fill needed (7,800 for 2,070 chosen), and took 166 against
# 141 ms a windowed Search of a 100,000-message session (bench_window_size); 8 a page, 179 ms. A
# memory of at most WHOLE messages is read in one query instead: every user of the development
# sets (at most 1,400 visible messages), where the pages cost more than the rows.
PAGE = 16
WHOLE = 4_096
# Turns of other roles read in a row before the fill stops looking for the users' turns across
# the memory (the "all users" step): twice what a memory read whole holds, so every development
# user is read through.
SCAN_MISSES = 2 * WHOLE
# A step of the order: (kind, how many of the best hits it starts from, how far around each).
Phase = tuple[str, int, int]
ORDER: tuple[Phase, ...] = (("near", 20, 0), ("users", 100, 0), ("all users", 0, 0),
                            ("near", 100, 0), ("near", 20, 3), ("near", 100, 2),
                            ("sessions", 100, 0), ("time", 0, 0))


def prompt_pieces(query: str, options: Sequence[str]) -> int:
    """What the reader's prompt spends besides the items: PROMPT_RESERVE, the question and its
    options (analysis/tokens.pieces)."""
    return PROMPT_RESERVE + pieces(query) + sum(pieces(o) for o in options)


class Line(NamedTuple):
    """A visible message as the fill reads it: no text. A tuple: the fill makes one for every
    message it walks past, and a frozen dataclass took four times as long to make."""

    id: int
    session_id: str
    timestamp_ms: int
    said: int  # its Add's place among its session's Adds (analysis/sequence.py)
    role: str
    tokens: int  # analysis/tokens.pieces of its text, stored at Add
    marks: int
    told: str | None


# What the fill reads of a message, as a Line; `tokens` NULL in a file upgraded from before the
# stored estimate (migration 6) until `reindex`: -1 here, estimated from the text then.
_COLUMNS = "id, session_id, timestamp_ms, said, role, coalesce(tokens, -1), marks, told"
_UNREAD = -1  # a neighbour not read yet (None: there is none, the session ends)


class Outline:
    """The user's visible messages as the fill walks them: each message's outline and its
    neighbours in its session, read from the conversation index a page at a time when a walk
    reaches what is not read yet, at most READ_LIMIT in all."""

    def __init__(self, conn: sqlite3.Connection, read: ReadFilter, session_id: str | None,
                 limit: int | None = None) -> None:
        self.conn, self.session_id = conn, session_id
        self.limit = READ_LIMIT if limit is None else limit
        self.where, self.params = read.clause()
        self.lines: dict[int, Line] = {}
        self.links: dict[tuple[int, int], int | None] = {}  # (message, -1 or 1) -> neighbour
        self.firsts: dict[str, int | None] | None = None  # every session's first, once all is read
        self.places: dict[int, int] = {}  # conversation order, once all is read (a sort key)
        self._sessions_in_order: list[str] = []  # every session, oldest first, once all is read
        self._starts: dict[str, int | None] = {}  # each session's first message, once read
        self.rows_read = 0
        if self._messages_at_most(WHOLE):
            self._read_whole()

    def _messages_at_most(self, most: int) -> bool:
        """Whether the memory (the session searched) holds at most `most` messages, hidden ones
        counted: an index count that stops past `most`."""
        if self.session_id is None:
            sql, params = "SELECT 1 FROM messages LIMIT ?", [most + 1]
        else:
            sql, params = ("SELECT 1 FROM messages INDEXED BY messages_by_session WHERE "
                           "session_id = ? LIMIT ?", [self.session_id, most + 1])
        return self.conn.execute(f"SELECT count(*) FROM ({sql})", params).fetchone()[0] <= most

    def _read_whole(self) -> None:
        """Every visible message's outline in one query, each linked to its neighbours."""
        where, params = self.where, list(self.params)
        if self.session_id is not None:
            where, params = f"session_id = ? AND {where}", [self.session_id, *params]
        read = self._lines(f"SELECT {_COLUMNS} FROM messages INDEXED BY messages_by_session "
                           f"WHERE {where} ORDER BY session_id, timestamp_ms, said, id", params)
        self.places = {m: i for i, m in enumerate(read)}
        self.firsts = {}
        before: int | None = None
        for m in read:
            session = self.lines[m].session_id
            if before is not None and self.lines[before].session_id == session:
                self.links[(before, 1)], self.links[(m, -1)] = m, before
            else:
                if before is not None:
                    self.links[(before, 1)] = None
                self.links[(m, -1)] = None
                self.firsts[session] = m
            before = m
        if before is not None:
            self.links[(before, 1)] = None
        self._sessions_in_order = [session for (session,) in self.conn.execute(
            "SELECT session_id FROM sessions INDEXED BY sessions_by_time ORDER BY first_ms, "
            "session_id")]

    @property
    def whole(self) -> bool:
        """Whether every visible message is read (`WHOLE`): nothing a fill does changes it or
        reads through its connection then, so it may be held for the next Searches of the same
        state (engine/held.py), whatever connection they lease."""
        return self.firsts is not None

    def load(self, ids: Sequence[int]) -> None:
        """Read the outlines of these messages (the ranked hits'), those visible (all of them
        read already when the outline is whole)."""
        if self.whole:
            return
        missing = [m for m in dict.fromkeys(ids) if m not in self.lines]
        for start in range(0, len(missing), 500):
            chunk = missing[start:start + 500]
            self._lines(f"SELECT {_COLUMNS} FROM messages WHERE id IN "
                        f"({','.join('?' * len(chunk))}) AND {self.where}",
                        [*chunk, *self.params])

    def step(self, m: int, direction: int) -> int | None:
        """The message after `m` in its session (`direction` 1) or before it (-1); None at the
        session's end, or once the fill has read READ_LIMIT outlines."""
        found = self.links.get((m, direction), _UNREAD)
        if found == _UNREAD:
            line = self.lines[m]
            later = direction > 0
            self._page(line.session_id, (line.timestamp_ms, line.said, line.id), later, m)
            found = self.links.get((m, direction))
        return found

    def between(self, a: int, b: int) -> None:
        """Read, in one query, the messages between two of one session (`a` before `b`), up to
        2 * PAGE, linked in order from `a`, and to `b` when that is all of them: the walks
        out from neighbouring hits meet there, and paged walker by walker (four queries a gap)
        they cost a Search ~50 ms over 100 hits in one session of 100,000 messages."""
        if (a, 1) in self.links or self.rows_read >= self.limit:
            return
        size = 2 * PAGE
        first, last = self.lines[a], self.lines[b]
        read = self._lines(
            f"SELECT {_COLUMNS} FROM messages INDEXED BY messages_by_session WHERE session_id = ? "
            f"AND {self.where} AND (timestamp_ms, said, id) > (?, ?, ?) "
            f"AND (timestamp_ms, said, id) < (?, ?, ?) ORDER BY timestamp_ms, said, id LIMIT {size}",
            [first.session_id, *self.params, first.timestamp_ms, first.said, a,
             last.timestamp_ms, last.said, b])
        chain = [a, *read, b] if len(read) < size else [a, *read]
        for x, y in itertools.pairwise(chain):
            self.links[(x, 1)], self.links[(y, -1)] = y, x

    def first(self, session_id: str) -> int | None:
        """The first visible message of a session (known once read, past READ_LIMIT too: a
        later walk of the session goes along the links read before)."""
        if self.firsts is not None:
            return self.firsts.get(session_id)
        if session_id not in self._starts:
            read = self._page(session_id, None, True, None)
            if not read and self.rows_read >= self.limit:
                return None  # not read, and no more may be: not known to be empty
            self._starts[session_id] = read[0] if read else None
        return self._starts[session_id]

    def sessions(self) -> Iterator[str]:
        """The user's sessions (one, for a Search of one session), oldest first, by index."""
        if self.session_id is not None:
            yield self.session_id
            return
        if self.firsts is not None:  # read whole: its sessions are known, in the same order
            yield from self._sessions_in_order
            return
        after = (-(2 ** 63), "")
        while True:
            rows = self.conn.execute(
                "SELECT first_ms, session_id FROM sessions INDEXED BY sessions_by_time "
                "WHERE (first_ms, session_id) > (?, ?) ORDER BY first_ms, session_id LIMIT 64",
                after).fetchall()
            yield from (session for _, session in rows)
            if len(rows) < 64:
                return
            after = rows[-1]

    def _page(self, session_id: str, start: tuple[int, int, int] | None, later: bool,
              origin: int | None) -> list[int]:
        """Read the next page of a session's messages after (or before) `start` (from its start
        when None), and link them in order to `origin`, the message the walk stands on."""
        if self.rows_read >= self.limit:
            return []
        direction = 1 if later else -1
        where, params = f"session_id = ? AND {self.where}", [session_id, *self.params]
        if start is not None:
            where += (" AND (timestamp_ms, said, id) > (?, ?, ?)" if later
                      else " AND (timestamp_ms, said, id) < (?, ?, ?)")
            params += list(start)
        order = "timestamp_ms, said, id" if later else "timestamp_ms DESC, said DESC, id DESC"
        read = self._lines(f"SELECT {_COLUMNS} FROM messages INDEXED BY messages_by_session "
                           f"WHERE {where} ORDER BY {order} LIMIT {PAGE}", params)
        chain = ([origin] if origin is not None else []) + read
        for a, b in itertools.pairwise(chain):
            self.links[(a, direction)] = b
            self.links[(b, -direction)] = a
        if len(read) < PAGE and chain:
            self.links[(chain[-1], direction)] = None  # the session ends there
        if start is None and read:
            self.links[(read[0], -1)] = None
        return read

    def _lines(self, sql: str, params: list[object]) -> list[int]:
        """Read outlines as Lines (made at C speed: a Python loop over the rows took 6 us each)."""
        lines = list(map(Line._make, self.conn.execute(sql, params)))
        unestimated = [line.id for line in lines if line.tokens < 0]
        if unestimated:
            texts = dict(rows_in(self.conn, "SELECT id, content FROM messages WHERE id", unestimated))
            lines = [line._replace(tokens=pieces(texts[line.id])) if line.tokens < 0 else line
                     for line in lines]
        self.lines.update((line.id, line) for line in lines)
        self.rows_read += len(lines)
        return [line.id for line in lines]


def outline_bytes(outline: Outline) -> int:
    """What a whole outline held for the next Searches costs: each line (a tuple of eight and
    its ints), its two links and its place (tracemalloc, BEAM dev users: 420 to 470 bytes a
    message, of which its session's and role's strings about 116), and its strings measured: each
    line's are its own (as SQLite returns them), and a session id or a role may be 256
    characters."""
    return 4096 + 344 * len(outline.lines) + sum(
        text_bytes(line.session_id) + text_bytes(line.role) + text_bytes(line.told)
        for line in outline.lines.values())


class Block(NamedTuple):
    """A context item: messages of one session, in conversation order; `gaps`: the indexes of
    the messages a GAP_LINE goes before (the session's messages between are left out);
    `reasons`: why each message was chosen (REASONS)."""

    ids: list[int]
    gaps: frozenset[int]
    reasons: list[str]


# Why a message was chosen, by the step of ORDER that chose it (`explain` says it).
REASONS = {("near", False): "a ranked hit", ("near", True): "beside a ranked hit",
           ("users", False): "the speaker's turn, in a session the ranking hit",
           ("all users", False): "the speaker's turn", ("sessions", False): "in a session the "
           "ranking hit", ("time", False): "the rest of the memory"}


class Costs(NamedTuple):
    """What the fill counts besides a message's own pieces and its separator: what the reader's
    view adds to its line (`line`), to an item each day it opens (`day`) and to an item's first
    line (`first`: its turn); what a gap costs (`gap`: the reader's view says what it stands for,
    and the turn of the line after it)."""

    line: Callable[[Line], int] = lambda line: 0
    day: int = 0
    gap: int = GAP_PIECES
    first: int = 0


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


class _Fill:
    """The messages chosen so far, by session, and what they cost."""

    def __init__(self, outline: Outline, returned: set[int], budget: int, slots: int,
                 costs: Costs) -> None:
        self.outline, self.returned, self.budget, self.slots = outline, returned, budget, slots
        self.costs = costs
        self.order: dict[int, str] = {}  # message -> why it was chosen, in the order chosen
        self.blocks: dict[str, int] = {}  # session -> when its block opened
        self.days: set[tuple[str, int]] = set()  # (session, day) a day line is counted for
        self.refused = 0

    def offer(self, m: int, reason: str) -> None:
        """Choose `m` if it is not in the answer yet and fits what is left."""
        if m in self.order or m in self.returned:
            return
        line = self.outline.lines[m]
        opens = line.session_id not in self.blocks
        if opens and len(self.blocks) >= self.slots:
            return  # no item left to open: only the sessions open take more
        day = (line.session_id, line.timestamp_ms // 86_400_000)
        cost = line.tokens + 1 + self.costs.line(line) + (day not in self.days) * self.costs.day
        if opens:
            cost += ITEM_TOKENS + self.costs.first
        else:  # a message beside one chosen closes a gap, one beside none opens one
            joins = sum(self.outline.links.get((m, d)) in self.order for d in (-1, 1))
            cost += self.costs.gap * (1 - joins)
        if cost > self.budget:
            self.refused += 1
            return
        self.refused = 0
        self.budget -= cost
        self.order[m] = reason
        self.days.add(day)
        if opens:
            self.blocks[line.session_id] = len(self.blocks)

    @property
    def done(self) -> bool:
        return self.budget <= 0 or self.refused >= GIVE_UP_AFTER

    def result(self) -> list[Block]:
        by_session: dict[str, list[int]] = {}
        for m in self.order:
            by_session.setdefault(self.outline.lines[m].session_id, []).append(m)
        return [_block(self.outline, sorted(by_session[session],
                                            key=_place(self.outline)), self.order)
                for session in sorted(by_session, key=self.blocks.__getitem__)]


def _block(outline: Outline, ids: list[int], reasons: dict[int, str]) -> Block:
    """The item of these messages of one session (in conversation order), with its gaps."""
    gaps = frozenset(i for i in range(1, len(ids)) if outline.links.get((ids[i], -1)) != ids[i - 1])
    return Block(ids, gaps, [reasons[m] for m in ids])


def once(outline: Outline, blocks: list[Block], contents: dict[int, str],
         seen: set[str]) -> list[Block]:
    """The items without a message whose text the answer holds already (`seen`: the ranked
    front's, then each item's in order): a text stored in several sessions is returned once,
    where it is best placed. Its share of the window goes unused."""
    kept = []
    for block in blocks:
        ids = []
        for m in block.ids:
            if contents[m] not in seen:
                seen.add(contents[m])
                ids.append(m)
        if ids:
            kept.append(_block(outline, ids, dict(zip(block.ids, block.reasons, strict=True))))
    return kept


def context(outline: Outline, hits: Sequence[Sequence[int]], returned: set[int], budget: int,
            slots: int, users: frozenset[str] = USERS, costs: Costs | None = None) -> list[Block]:
    """Context items of messages not in `returned`, within `budget` pieces (each message's, its
    separator and what `costs` adds; ITEM_TOKENS an item; `costs.gap` a gap) and `slots` items.
    `hits`: the ranked items' messages, best first; `users`: the roles whose turns the "users"
    phases take (the question's speakers'). Without a hit, the users' turns and then the rest,
    oldest first: a question whose words the memory does not hold may still be answered by it
    (LoCoMo dev: "What console does Nate own?", the memory says "Xbox"; in window .993 without)."""
    outline.load([m for ids in hits for m in ids])
    placed = [[m for m in ids if m in outline.lines] for ids in hits]
    placed = [ids for ids in placed if ids]
    fill = _Fill(outline, returned, budget, slots, costs or Costs())
    for m, reason in _candidates(outline, placed, users):
        if fill.done:
            break
        fill.offer(m, reason)
    return fill.result()


def _candidates(outline: Outline, placed: Sequence[Sequence[int]],
                users: frozenset[str]) -> Iterator[tuple[int, str]]:
    """Every message in the order ORDER tries them, with why (a message may come more than
    once)."""
    for kind, best, radius in ORDER:
        reason = REASONS[(kind, radius > 0)]
        if kind == "near":
            found: Iterator[int] = _near(outline, placed[:best], radius)
        elif kind == "users":
            found = (m for m in _sessions(outline, placed[:best])
                     if outline.lines[m].role in users)
        elif kind == "sessions":
            found = _sessions(outline, placed[:best])
        elif kind == "all users":  # every session, oldest first, the users' turns
            found = _roles(outline, users)
        else:  # "time": every message, every session oldest first
            found = (m for session in outline.sessions()
                     for m in _walk(outline, outline.first(session), 1))
        yield from ((m, reason) for m in found)


def _roles(outline: Outline, users: frozenset[str]) -> Iterator[int]:
    """The users' turns of every session, oldest first; given up after SCAN_MISSES messages
    in a row of other roles, so that a memory without them leaves the reading to the last
    step: one session of 100,000 assistant turns read 50,000 outlines here (360 ms), found
    none, and left the last step no outline to read: it answered nothing."""
    misses = 0
    for session in outline.sessions():
        for m in _walk(outline, outline.first(session), 1):
            if outline.lines[m].role in users:
                misses = 0
                yield m
            else:
                misses += 1
                if misses >= SCAN_MISSES:
                    return


def _place(outline: Outline) -> Callable[[int], Any]:
    """A sort key of where a message stands in its session: conversation order is time, then
    its Add's place, then its order in its Add (said.py); the index of the whole read when all
    is read (a dict lookup: sorting by a Python function cost a windowed Search ~3 ms)."""
    if outline.firsts is not None:
        return outline.places.__getitem__
    return lambda m: (outline.lines[m].timestamp_ms, outline.lines[m].said, m)


def _walk(outline: Outline, m: int | None, direction: int) -> Iterator[int]:
    """`m` and the messages after it (or before), to the session's end."""
    links = outline.links
    while m is not None:
        yield m
        n = links.get((m, direction), _UNREAD)
        m = outline.step(m, direction) if n == _UNREAD else n


def _near(outline: Outline, placed: Sequence[Sequence[int]], radius: int) -> Iterator[int]:
    """Hit by hit in rank order: the hit's own messages (those of ranked items past the ones
    kept are context too), then its neighbours one message away, two, ... out to `radius`."""
    for ids in placed:
        yield from ids
        ends: list[int | None] = [min(ids, key=_place(outline)), max(ids, key=_place(outline))]
        for _ in range(radius):
            for side, direction in ((0, -1), (1, 1)):
                if ends[side] is not None:
                    ends[side] = outline.step(ends[side], direction)
                    if ends[side] is not None:
                        yield ends[side]


def _sessions(outline: Outline, placed: Sequence[Sequence[int]]) -> Iterator[int]:
    """The sessions holding hits, heaviest first (the sum of 1/sqrt(rank) of their hits); in
    each, the messages nearest a hit first (ties: the earlier first)."""
    weight: dict[str, float] = {}
    centres: dict[str, list[int]] = {}
    for rank, ids in enumerate(placed, 1):
        session = outline.lines[ids[0]].session_id
        weight[session] = weight.get(session, 0.0) + rank ** -0.5
        centres.setdefault(session, []).extend(ids)
    for session in sorted(weight, key=lambda s: (-weight[s], s)):
        yield from _outward(outline, centres[session])


def _outward(outline: Outline, centres: Sequence[int]) -> Iterator[int]:
    """A session's messages by their distance to the nearest of `centres` (at one distance, in
    the order of their centres), each once: a walker goes out each way from each centre, one
    message a round, and stops where another has been. Read as it goes: a fill that is full
    after a few rounds reads no further."""
    key = _place(outline)
    links = outline.links
    seen = set(centres)
    ordered = sorted(seen, key=key)
    yield from ordered
    if outline.firsts is None:  # paged: the gaps between neighbouring centres in one query each
        for a, b in itertools.pairwise(ordered):
            outline.between(a, b)
    walkers = [(m, d) for m in sorted(seen, key=key) for d in (-1, 1)]
    while walkers:  # one round: each walker a step, in the order of their centres
        moved = []
        for m, direction in walkers:
            n = links.get((m, direction), _UNREAD)
            if n == _UNREAD:
                n = outline.step(m, direction)
            if n is not None and n not in seen:
                seen.add(n)
                moved.append((n, direction))
                yield n
        walkers = moved
