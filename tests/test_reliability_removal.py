"""A user removed by unlinking its files (the deletion of a full disk or a damaged file) is
removed for every process of the store: none serves the deleted text again, an Add after it is
kept, and the space comes back (issue found by an outside tester: with two processes, 15-23 of
40 Searches still returned the deleted user's secret, and 13-16 of 30 later Adds were lost)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from conftest import Client, start_app
from reliability_support import user_file

SECRET = "the vault code is 4417-harbour"


def held_deleted(path: Path) -> bool:
    """Whether this process holds a file descriptor on `path` after it was unlinked."""
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(path)) and target.endswith("(deleted)"):
            return True
    return False


def test_a_user_unlinked_by_one_process_is_gone_for_the_other(tmp_path):
    first, second = start_app(tmp_path), start_app(tmp_path)  # two servers on one store
    a, b = Client(first.port), Client(second.port)
    try:
        assert a.add("victim", "r1", [SECRET, "and some tea"]).status == 200
        assert b.add("bystander", "r1", ["tea and harbour views"]).status == 200
        for _ in range(3):  # the second server pools a connection to the victim's file
            assert SECRET in b.contents("victim", "vault code")
        path = user_file(tmp_path / "aml.db", "victim")
        assert first.store.remove_user_files("victim") == 3  # the full-disk deletion: unlinked
        for _ in range(40):
            fresh = Client(second.port)
            assert SECRET not in " ".join(fresh.contents("victim", "vault code"))
            fresh.close()
        for i in range(30):
            assert b.add("victim", f"after{i}", [f"after the deletion {i}"]).status == 200
        assert "tea and harbour views" in b.contents("bystander", "harbour")  # control
        deadline = time.monotonic() + 5
        while held_deleted(path) and time.monotonic() < deadline:
            time.sleep(0.1)  # the checkpoint loop closes what another process removed
        assert not held_deleted(path)
    finally:
        a.close()
        b.close()
        first.stop()
        second.stop()
    again = start_app(tmp_path)
    try:
        kept = Client(again.port).request("GET", "/users/victim/messages?limit=100").body["messages"]
        assert len(kept) == 30 and not any(SECRET in m["content"] for m in kept)
    finally:
        again.stop()
