"""The gate between opening a user file and removing it (storage/gate.py): a deletion never
unlinks a file while a connection to it is being opened, in this process or another."""

from __future__ import annotations

import fcntl
import os
import threading
import time
import zlib
from pathlib import Path

from aml_retriever.storage.gate import GATE_FILE, STRIPES
from aml_retriever.storage.store import Store


def paused_open(store: Store) -> tuple[threading.Event, threading.Event]:
    """Make the next opening of a user file stop halfway (after connecting, before its first
    read), until told to go on."""
    entered, proceed = threading.Event(), threading.Event()
    schema = store._connections._schema
    bring = schema.bring_user_file

    def slow(*args, **kwargs):
        if not entered.is_set():
            entered.set()
            assert proceed.wait(10)
        return bring(*args, **kwargs)

    schema.bring_user_file = slow  # type: ignore[method-assign]
    return entered, proceed


def unused_file(tmp_path: Path) -> tuple[Store, Path]:
    """A store whose user "ana" has a file that no connection holds."""
    store = Store(tmp_path / "aml.db")
    with store.connection("ana", create=True):
        pass
    store.release_idle()
    return store, store.shard_path("ana")


def test_a_file_being_opened_is_not_removed_under_it(tmp_path: Path) -> None:
    store, path = unused_file(tmp_path)
    assert store.remove_emptied("ana") and not path.exists()  # control: an unused file goes

    with store.connection("ana", create=True):
        pass
    store.release_idle()
    entered, proceed = paused_open(store)
    seen: dict[str, object] = {}

    def request() -> None:
        with store.connection("ana", create=False) as conn:
            seen["current"] = store._connections.current(conn)

    def deletion() -> None:
        seen["removed"] = store.remove_emptied("ana")

    opener = threading.Thread(target=request)
    opener.start()
    assert entered.wait(10)
    remover = threading.Thread(target=deletion)
    remover.start()
    time.sleep(0.2)
    assert "removed" not in seen  # the removal waits for the opening
    proceed.set()
    opener.join(10)
    remover.join(10)
    # Opened on the file at its path, then removed only if given back by then.
    assert seen["current"] is True and path.exists() is not seen["removed"]
    store.close()


def test_an_opening_in_another_process_holds_back_a_removal(tmp_path: Path) -> None:
    store, path = unused_file(tmp_path)
    stripe = zlib.crc32(path.name.encode()) % STRIPES
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # another process of the store, opening the file: holds its byte shared
        try:
            fd = os.open(store.shard_dir / GATE_FILE, os.O_RDWR)
            fcntl.lockf(fd, fcntl.LOCK_SH, 1, stripe)
            os.write(write, b"x")
            time.sleep(0.5)
        finally:
            os.write(write, b"!")  # (never reached pytest's code again in the child)
            os._exit(0)
    assert os.read(read, 1) == b"x"
    started = time.monotonic()
    assert store.remove_emptied("ana")
    waited = time.monotonic() - started
    os.waitpid(child, 0)
    assert waited > 0.3 and not path.exists()
    store.close()
