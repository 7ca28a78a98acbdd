"""The Adds bench/bench_add.py times: every timed Add distinct, users served round-robin for any
count, and the message-length mode's messages exactly as long as asked."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def bench_add() -> Iterator[ModuleType]:
    sys.path.insert(0, str(BENCH))
    try:
        import bench_add

        yield bench_add
    finally:
        sys.path.remove(str(BENCH))


@pytest.mark.parametrize("users,adds", [(4, 50), (4, 200), (3, 7), (1, 5), (4, 3)])
def test_timed_adds_are_distinct_and_round_robin_for_any_count(bench_add, users, adds):
    first, timed = bench_add.all_adds(1, users, adds)
    assert len(first) == users and len(timed) == adds
    assert [a.user_id for a in timed] == [first[i % users].user_id for i in range(adds)]
    keys = [(a.user_id, a.request_id) for a in [*first, *timed]]
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("words", [10, 50, 300])
def test_sized_messages_hold_exactly_the_words_asked(bench_add, words):
    first, timed = bench_add.round_robin(
        lambda user, count: bench_add.sized_adds(7, user, count, words), 2, 5)
    messages = [m for add in [*first, *timed] for m in add.messages]
    assert len(messages) == 7 * bench_add.ADD_SIZE
    assert {len(m.content.split()) for m in messages} == {words}
