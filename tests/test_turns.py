"""Turns at the service (http/turns.py): at most `slots` at once, and the next turn to the
waiting user with the fewest running, so one user's many slow requests cannot keep another's
waiting behind all of them."""

from __future__ import annotations

import threading
import time

from aml_retriever.http.turns import Turns


def run_all(turns: Turns, holder: threading.Event, users: list[str]) -> list[str]:
    """One request of 'a' holds the only turn; `users`' requests arrive in order and wait; then
    it lets go. The order they ran in."""
    ran: list[str] = []
    started = threading.Event()

    def first() -> None:
        with turns.turn("a"):
            started.set()
            holder.wait()

    def request(user: str) -> None:
        with turns.turn(user):
            ran.append(user)

    threads = [threading.Thread(target=first)]
    threads[0].start()
    started.wait()
    for user in users:
        threads.append(threading.Thread(target=request, args=(user,)))
        threads[-1].start()
        time.sleep(0.02)  # arrive in this order
    holder.set()
    for thread in threads:
        thread.join(10)
    return ran


def test_a_user_waiting_behind_anothers_many_requests_goes_next():
    assert run_all(Turns(1), threading.Event(), ["a", "a", "a", "b", "a"]) == ["b", "a", "a", "a", "a"]


def test_one_users_requests_keep_their_order_and_users_alternate():
    assert run_all(Turns(1), threading.Event(), ["a", "a", "a"]) == ["a", "a", "a"]  # control
    assert run_all(Turns(1), threading.Event(), ["a", "a", "b", "b", "c"]) == ["b", "c", "a", "b", "a"]


def test_no_more_than_the_slots_run_at_once():
    turns, lock, running, most = Turns(2), threading.Lock(), [0], [0]

    def request(user: str) -> None:
        with turns.turn(user):
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.01)
            with lock:
                running[0] -= 1

    threads = [threading.Thread(target=request, args=(f"u{i % 3}",)) for i in range(30)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert most[0] == 2
