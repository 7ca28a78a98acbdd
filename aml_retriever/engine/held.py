"""What a serving process keeps of a user's file between Searches: `Held`, the reads of one
committed state of one file, and `HeldUsers`, the users' held states within a byte budget.

The leaderboard asks hundreds of questions of one user in a row and an agent many of one
project memory, and most of what a Search reads does not depend on its question: a message's
row, its length in index terms and its links; the index's size and each term's count; the
speakers; and, across questions, many of the same terms' lists (BEAM dev, the 538 questions in
order: 31% of the term lists a Search reads were read by an earlier question of the same user,
38% of the time the lists take).

The rules that keep a held read exactly what reading would return:
- A `Held` belongs to one committed state of one file, its `stamp` (storage/generation.py):
  what it holds was read inside a read transaction that saw that state, and it is given only to
  Searches whose read transaction sees the same stamp. Every write moves the stamp, in whatever
  process it is made, so nothing held is used after a write: the next Search starts a new
  `Held`.
- A held value is what the read returned, never changed afterwards (rows, tuples, frozensets),
  and keyed by everything the read depends on (a term's list by its term, depth, session and
  what the read withholds).
- Nothing is shared across users: a `Held` is one file's, looked up by that file's path.

A Search with nothing held (the first of a user, or with holding off) reads everything, as a
Search always did, and holds what it read for the next.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from aml_retriever.storage.generation import Stamp

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# What a held entry costs besides its value: its key and its slot in a dict (a small int or a
# tuple key and the table's share of an entry, CPython 3.11). With the measures of each kind of
# value (rows.py, candidates.py, window.py, and `content_bytes` for speakers and the reader's
# view) and USER_BYTES, the estimate of a user's held state is within 4% of what tracemalloc
# counts Python allocating for it: LoCoMo dev conversation 26 after 50 questions 1.02x, BEAM
# 100K conversation 1 after 20 1.03x, a user of 480 names with roles and session ids of 240
# characters 1.03x (tests/test_held.py). Speakers and the view counted as 64 KiB each, rows as
# 1,024 bytes and their text, they were 1.21x, and 0.87x (up to 0.4x for the speakers alone).
ENTRY_BYTES = 128
# What a value costs when no measure is given: an int, a short tuple, a small object.
SMALL_BYTES = 64
# What holding a user costs besides its values: the `Held`, its dict of kinds and one dict a
# kind, the file's path, the stamp and the user's slot in `HeldUsers` (tracemalloc, 1,000 users
# of twelve kinds: 3,796 bytes a user, of which the entries' ENTRY_BYTES and SMALL_BYTES 2,304).
USER_BYTES = 1536
# The default budget of `HeldUsers`: what a process may hold of all its users together. The
# leaderboard asks a user's questions in a row, so the user asked holds what it needs (a BEAM dev
# user after its 20 questions: 1.6 to 8.2 MiB; a LoCoMo dev user after its 200: 1.5 to 3.1 MiB), and
# 64 MiB keeps a server of 1,000,000 messages within 200 MB (bench_footprint.py: 256 MiB let
# random users' states take it to 317 MB).
HELD_BYTES = 64 * 1024 * 1024


_ABSENT = object()


def small(_: object) -> int:
    return SMALL_BYTES


def text_bytes(text: str | None) -> int:
    """What a held string costs (its object, its characters at their width); nothing for the
    empty string, which every process shares."""
    return sys.getsizeof(text) if text else 0


# Objects every process shares, which holding a value never allocates.
_SHARED = (type(None), bool)


def content_bytes(value: object) -> int:
    """What a value and everything it holds cost, each object once however often it is held:
    strings, numbers, tuples, lists, sets, dicts and objects with their attributes (their
    `__dict__`, or their `__slots__`), walked to the end. For the values whose size is their
    content (a user's speakers: up to MOST_NAMES names with their evidence, a role of 256
    characters), within 10% of what tracemalloc counts (tests/test_held.py). The walk costs
    about 0.3 us an object; it runs once a value is read, never on a held one."""
    seen: set[int] = set()
    stack = [value]
    total = 0
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, _SHARED):
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, (str, bytes, int, float)):
            continue
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (tuple, list, set, frozenset)):
            stack.extend(item)
        else:
            attributes = getattr(item, "__dict__", None)
            if attributes is not None:
                stack.append(attributes)
            stack.extend(getattr(item, name) for name in getattr(type(item), "__slots__", ())
                         if hasattr(item, name))
    return total


class Held:
    """The reads of one committed state (`stamp`) of one user's file, by kind and key. Kept by
    `HeldUsers` for the Searches that follow, or made for one Search alone (`stamp` None)."""

    def __init__(self, stamp: Stamp | None = None) -> None:
        self.stamp = stamp
        # An estimate (USER_BYTES, and `cost` of every value held plus ENTRY_BYTES each):
        # threads holding the same state at once may each count a value both read.
        self.bytes = USER_BYTES
        self._kinds: dict[str, dict[Any, Any]] = {}

    def one(self, kind: str, key: Hashable, read: Callable[[], V],
            cost: Callable[[V], int] = small) -> V:
        """The held value of (kind, key), read and held when there is none yet."""
        held = self._kinds.setdefault(kind, {})
        try:
            return held[key]  # type: ignore[no-any-return]
        except KeyError:
            value = held[key] = read()
            self.bytes += ENTRY_BYTES + cost(value)
            return value

    def many(self, kind: str, keys: Iterable[K], read: Callable[[list[K]], Mapping[K, V]],
             cost: Callable[[V], int] = small) -> dict[K, V]:
        """The held values of these keys of one kind, those not held read together (`read`
        gets the missing keys, in the order given, and returns the values it found). A key the
        read finds nothing for is read again next time."""
        held: dict[Any, Any] = self._kinds.setdefault(kind, {})
        found: dict[K, V] = {}
        missing: list[K] = []
        get = held.get
        for key in keys:
            value = get(key, _ABSENT)
            if value is _ABSENT:
                missing.append(key)
            else:
                found[key] = value
        if missing:
            fresh = read(list(dict.fromkeys(missing)))
            held.update(fresh)  # a value another thread read meanwhile is the same value
            self.bytes += ENTRY_BYTES * len(fresh) + sum(map(cost, fresh.values()))
            found.update(fresh)
        return found

    def get(self, kind: str, key: Hashable) -> Any:
        """The held value of (kind, key), or None."""
        return self._kinds.get(kind, {}).get(key)

    def keep(self, kind: str, key: Hashable, value: V, cost: Callable[[V], int] = small) -> None:
        """Hold a value read along with another (a term's count, from its whole list), or in
        place of one read less far (a term's list read deeper)."""
        held = self._kinds.setdefault(kind, {})
        if key in held:
            self.bytes -= ENTRY_BYTES + cost(held[key])
        held[key] = value
        self.bytes += ENTRY_BYTES + cost(value)


class HeldUsers:
    """The held states of the users a process searched most recently, together within
    `budget` bytes (least recently searched dropped first; a user whose state alone outgrows it
    is held no longer). A budget of 0 holds nothing: every Search reads everything."""

    def __init__(self, budget: int = HELD_BYTES) -> None:
        self.budget = budget
        self._held: OrderedDict[Path, Held] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, path: Path, stamp: Stamp | None) -> Held:
        """The state held of the file at `path` as of `stamp`; a new one when none is (held
        for the next Searches, in place of one of an earlier state). A read of an older state
        than the one held (a transaction begun before a write another Search has seen) gets
        one of its own."""
        if stamp is None or self.budget <= 0:
            return Held()
        with self._lock:
            held = self._held.get(path)
            if held is not None and held.stamp == stamp:
                self._held.move_to_end(path)
                return held
            fresh = Held(stamp)
            if held is None or held.stamp is None or _later(stamp, held.stamp):
                self._held[path] = fresh
                self._held.move_to_end(path)
            return fresh

    def settle(self) -> None:
        """Drop the least recently searched users' states until what is held is within the
        budget (after a Search, which may have held more)."""
        with self._lock:
            total = sum(h.bytes for h in self._held.values())
            while self._held and total > self.budget:
                _, dropped = self._held.popitem(last=False)
                total -= dropped.bytes

    def holds(self, path: Path) -> bool:
        """Whether a state of the file at `path` is held."""
        with self._lock:
            return path in self._held

    def drop(self, path: Path) -> None:
        """Hold nothing more of a file (its user deleted, or no file at its path)."""
        with self._lock:
            self._held.pop(path, None)

    @property
    def held_bytes(self) -> int:
        with self._lock:
            return sum(h.bytes for h in self._held.values())

    @property
    def users(self) -> int:
        with self._lock:
            return len(self._held)


def _later(stamp: Stamp, than: Stamp) -> bool:
    """Whether `stamp` is of a later state than `than`: another file (device, inode or secret),
    or the same file at a later generation."""
    return stamp[:-1] != than[:-1] or stamp.generation > than.generation
