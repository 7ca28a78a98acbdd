"""The store refuses what it did not write, migrates what it did, and keeps its WALs small."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from aml_retriever import store as store_module
from aml_retriever.errors import StoreError
from aml_retriever.migrations import SHARD_MIGRATIONS
from aml_retriever.service import MemoryService
from aml_retriever.store import Store
from aml_retriever.validation import AddRequest, Message, SearchRequest


def add(service: MemoryService, user: str, request_id: str, *contents: str) -> None:
    service.add(AddRequest(request_id, user, "s1",
                           tuple(Message("user", c, 1_700_000_000_000) for c in contents)))


def test_a_new_store_records_its_format_and_index_identity(tmp_path):
    Store(tmp_path / "aml.db").close()
    conn = sqlite3.connect(tmp_path / "aml.db")
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    assert meta["format"] == "aml_retriever-store" and len(meta["index_identity"]) == 16
    assert conn.execute("PRAGMA user_version").fetchone()[0] >= 1


def test_reopening_a_store_keeps_its_data(tmp_path):
    store = Store(tmp_path / "aml.db")
    add(MemoryService(store), "alice", "r1", "persistent puffin")
    store.close()
    again = Store(tmp_path / "aml.db")
    from aml_retriever.validation import SearchRequest

    found = MemoryService(again).search(SearchRequest("puffin", "alice", 5, (), None))["data"]
    assert [r["content"] for r in found] == ["persistent puffin"]


def test_a_store_from_a_newer_version_is_refused(tmp_path):
    Store(tmp_path / "aml.db").close()
    conn = sqlite3.connect(tmp_path / "aml.db")
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer aml_retriever"):
        Store(tmp_path / "aml.db")


def test_a_store_indexed_with_other_settings_is_refused(tmp_path):
    Store(tmp_path / "aml.db").close()
    conn = sqlite3.connect(tmp_path / "aml.db")
    conn.execute("UPDATE meta SET value = 'other' WHERE key = 'index_identity'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="indexed with other settings"):
        Store(tmp_path / "aml.db")


def test_another_sqlite_database_is_refused_and_left_untouched(tmp_path):
    conn = sqlite3.connect(tmp_path / "app.db")
    conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not an aml_retriever store"):
        Store(tmp_path / "app.db")
    tables = sqlite3.connect(tmp_path / "app.db").execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("invoices",)]


def test_a_user_file_from_a_newer_version_is_refused(tmp_path):
    store = Store(tmp_path / "aml.db")
    add(MemoryService(store), "alice", "r1", "x")
    path = store.shard_path("alice")
    store.close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {len(SHARD_MIGRATIONS) + 1}")
    conn.commit()
    conn.close()
    store = Store(tmp_path / "aml.db")
    with pytest.raises(StoreError, match="newer"), store.connection("alice", create=False):
        pass
    with store.connection("bob", create=True) as conn:
        assert conn is not None  # control: other users still work


def test_user_files_are_wal_with_secure_delete_and_full_sync(tmp_path):
    store = Store(tmp_path / "aml.db")
    with store.connection("alice", create=True) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA secure_delete").fetchone()[0] == 1
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_sqlite_memory_is_bounded_for_the_whole_process(tmp_path):
    store = Store(tmp_path / "aml.db")
    with store.connection("alice", create=True) as conn:
        assert conn.execute("PRAGMA soft_heap_limit").fetchone()[0] == store_module.SQLITE_HEAP_LIMIT


def test_planned_checkpoint_truncates_the_wal_of_written_files(tmp_path):
    store = Store(tmp_path / "aml.db")
    service = MemoryService(store)
    for i in range(50):
        add(service, "alice", f"r{i}", *[f"message {i} {j} with some words" for j in range(20)])
    wal = store.shard_path("alice").with_name(store.shard_path("alice").name + "-wal")
    assert wal.stat().st_size > 0  # control: writes went to the WAL
    assert store.checkpoint_dirty() == 0
    assert wal.stat().st_size == 0


def test_checkpoint_waits_for_a_reader_then_succeeds(tmp_path):
    store = Store(tmp_path / "aml.db")
    service = MemoryService(store)
    add(service, "alice", "r0", "first")
    store.checkpoint_dirty()
    reader = sqlite3.connect(store.shard_path("alice"), isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM messages").fetchone()
    add(service, "alice", "r1", "second")
    assert store.checkpoint_dirty() == 1  # the reader holds the WAL
    reader.execute("COMMIT")
    reader.close()
    assert store.checkpoint_dirty() == 0


def test_a_connection_given_back_serves_the_next_lease_from_any_thread(tmp_path):
    store = Store(tmp_path / "aml.db")
    with store.connection("alice", create=True) as first:
        with store.connection("alice", create=False) as second:
            assert second is not None and second is not first  # leases at once never share
    seen = []

    def lease() -> None:
        with store.connection("alice", create=False) as conn:
            seen.append(conn)

    thread = threading.Thread(target=lease)
    thread.start()
    thread.join()
    assert seen[0] in (first, second)


def test_no_connection_is_ever_leased_to_two_threads_at_once(tmp_path):
    store = Store(tmp_path / "aml.db")
    with store.connection("alice", create=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS probe (n INTEGER)")
    held: set[int] = set()
    clashes: list[int] = []
    lock = threading.Lock()

    def lease_many() -> None:
        for _ in range(300):
            with store.connection("alice", create=False) as leased:
                with lock:
                    if id(leased) in held:
                        clashes.append(id(leased))
                    held.add(id(leased))
                leased.execute("SELECT count(*) FROM probe").fetchone()
                with lock:
                    held.discard(id(leased))

    threads = [threading.Thread(target=lease_many) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert clashes == []
    assert 1 <= len(store._all_connections) <= 8  # reused, not one per lease


def test_idle_connections_are_bounded_however_many_users(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "IDLE_CONNECTIONS", 4)
    store = Store(tmp_path / "aml.db")
    for i in range(12):
        with store.connection(f"user-{i}", create=True) as conn:
            conn.execute("SELECT 1")
    assert len(store._all_connections) == 4
    with store.connection("user-0", create=False) as conn:  # control: an evicted user reopens
        assert conn is not None and conn.execute("PRAGMA user_version").fetchone()[0] > 0


def test_a_block_that_fails_mid_transaction_does_not_return_its_connection(tmp_path):
    store = Store(tmp_path / "aml.db")
    with pytest.raises(RuntimeError), store.connection("alice", create=True) as conn:
        conn.execute("BEGIN")
        raise RuntimeError("failed inside the transaction")
    with store.connection("alice", create=False) as fresh:
        assert fresh is not conn and not fresh.in_transaction


def test_a_relative_store_path_works_for_every_operation(tmp_path, monkeypatch):
    """The default store is the relative ./aml.db: reads open files by URI, which must be absolute."""
    from aml_retriever.validation import SearchRequest

    monkeypatch.chdir(tmp_path)
    service = MemoryService(Store("./aml.db"))
    add(service, "alice", "r1", "relative path pelican")
    found = service.search(SearchRequest("pelican", "alice", 5, (), None))["data"]
    assert [r["content"] for r in found] == ["relative path pelican"]
    assert service.stats()["messages"] == 1
    assert service.delete_user("alice")["deleted"]["messages"] == 1
    assert (tmp_path / "aml.db").exists()
    service.close()


def test_a_user_file_of_an_earlier_version_upgrades_on_open_and_keeps_answering(tmp_path, monkeypatch):
    path = str(tmp_path / "aml.db")
    monkeypatch.setattr(store_module, "SHARD_MIGRATIONS", SHARD_MIGRATIONS[:2])
    old = MemoryService.open(path)
    old.add(AddRequest("r1", "alice", "s1", (Message("user", "the segment index goes", None),)))
    indexes = "SELECT name FROM sqlite_master WHERE type = 'index' AND name = 'messages_by_segment'"
    with old.store.connection("alice", create=False) as conn:
        assert conn.execute(indexes).fetchall() == [("messages_by_segment",)]  # control
    old.close()
    monkeypatch.setattr(store_module, "SHARD_MIGRATIONS", SHARD_MIGRATIONS)
    current = MemoryService.open(path)
    try:
        found = current.search(SearchRequest("segment index", "alice", 5, (), None))["data"]
        assert [r["content"] for r in found] == ["the segment index goes"]
        with current.store.connection("alice", create=False) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == len(SHARD_MIGRATIONS)
            assert conn.execute(indexes).fetchall() == []
    finally:
        current.close()
