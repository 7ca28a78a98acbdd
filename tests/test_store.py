"""The store refuses what it did not write, migrates what it did, and keeps its WALs small."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from old_schema import LAST_WITH_WINDOW_ROWS, take_back, write_old_user
from reliability_support import broken_adds, integrity, open_user

from aml_retriever.analysis.sequence import request_order
from aml_retriever.common.errors import StoreError, UserStoreDamaged
from aml_retriever.common.signals import FORMER_INDEX_SETTINGS, RetrievalConfig
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import AddRequest, Message, SearchRequest
from aml_retriever.storage import catalog, pool
from aml_retriever.storage.migrations import (
    _MESSAGES_V14,
    CATALOG_MIGRATIONS,
    CATALOG_SCHEMA,
    KEYS_FUNCTION,
    MESSAGE_COLUMNS_V14,
    ORDER_FUNCTION,
    SHARD_MIGRATIONS,
    SHARD_SCHEMA,
    signal_keys_of,
)
from aml_retriever.storage.pages import COMPACT_FREE_SHARE, USER_PAGE_SIZE, compact
from aml_retriever.storage.store import Store


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
    from aml_retriever.memory.validation import SearchRequest

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


def test_a_refusal_names_the_index_setting_that_changed(tmp_path):
    """It showed two hashes; it names the setting and both values (a store from before they were
    kept says so), and the store's own settings open it (the control)."""
    Store(tmp_path / "aml.db").close()
    other = RetrievalConfig().with_values(segment_gap_minutes=60.0)
    with pytest.raises(StoreError, match=r"segment_gap_minutes 30\.0 there, 60\.0 here"):
        Store(tmp_path / "aml.db", retrieval=other)
    Store(tmp_path / "aml.db").close()
    conn = sqlite3.connect(tmp_path / "aml.db")
    conn.execute("DELETE FROM meta WHERE key = 'index_settings'")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="written before they were kept"):
        Store(tmp_path / "aml.db", retrieval=other)


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
    with pytest.raises(UserStoreDamaged, match="newer") as refused, \
            store.connection("alice", create=False):
        pass
    assert str(path) not in str(refused.value) and path.exists()  # named by nothing, left in place
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
        assert conn.execute("PRAGMA soft_heap_limit").fetchone()[0] == pool.SQLITE_HEAP_LIMIT


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


def test_idle_connections_are_bounded_however_many_users(tmp_path):
    store = Store(tmp_path / "aml.db", idle_connections=4)
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
    from aml_retriever.memory.validation import SearchRequest

    monkeypatch.chdir(tmp_path)
    service = MemoryService(Store("./aml.db"))
    add(service, "alice", "r1", "relative path pelican")
    found = service.search(SearchRequest("pelican", "alice", 5, (), None))["data"]
    assert [r["content"] for r in found] == ["relative path pelican"]
    assert service.stats()["messages"] == 1
    assert service.delete_user("alice")["deleted"]["messages"] == 1
    assert (tmp_path / "aml.db").exists()
    service.close()


T0 = 1_700_000_000_000
OLD_ADDS = [
    ("r1", "s1", [("user", "Which band did you see in Lisbon?", T0),
                  ("assistant", "Radiohead, at the arena.", T0 + 60_000)]),
    ("r2", "s2", [("user", "an unrelated note about gardening", T0)]),
    # Sent late, but said between the two turns of r1: the conversation order puts it there.
    ("r3", "s1", [("user", "The tickets were a birthday gift.", T0 + 30_000)]),
]


@pytest.mark.parametrize("version", [1, 2, LAST_WITH_WINDOW_ROWS])
def test_a_user_file_of_an_earlier_version_upgrades_on_open_and_keeps_answering(tmp_path, version):
    db = tmp_path / "aml.db"
    write_old_user(db, "alice", version, OLD_ADDS)
    old = open_user(db, "alice")
    assert old.execute("SELECT count(*) FROM window_members").fetchone()[0] == 4  # control
    old.close()
    current = MemoryService.open(str(db))
    try:
        found = current.search(SearchRequest("band Lisbon Radiohead", "alice", 5, (), None))["data"]
        assert found[0]["content"] == ("Which band did you see in Lisbon?\nThe tickets were a "
                                       "birthday gift.\nRadiohead, at the arena.")
        assert found[0]["id"] == "w2-1-4-2"
        assert [m["content"] for m in current.messages_of_request("alice", "r1")] == [
            "Which band did you see in Lisbon?", "Radiohead, at the arena."]
        assert [m["id"] for m in current.messages_of_request("alice", "r3")] == ["m4"]
        current.add(AddRequest("r4", "alice", "s1", (Message("user", "Great show.", T0 + 90_000),)))
        conn = open_user(db, "alice")
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(SHARD_MIGRATIONS)
        assert broken_adds(conn) == [] and integrity(conn) == []
        assert conn.execute("SELECT prev_id FROM messages WHERE id = 5").fetchone() == (2,)
        names = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
        assert not names & {"window_members", "messages_by_request", "messages_by_segment"}
        columns = {row[1] for row in conn.execute("PRAGMA table_info(messages)")}
        assert not columns & {"request_id", "position"}
        assert {kind for (kind,) in conn.execute("SELECT kind FROM views")} == {"segment"}
        conn.close()
    finally:
        current.close()


def test_a_store_recorded_with_window_sizes_in_its_identity_opens_when_they_match(tmp_path):
    db = tmp_path / "aml.db"
    MemoryService.open(str(db)).close()

    def record(config: RetrievalConfig) -> None:
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'index_identity'", (
            catalog.index_identity(config.index_identity(FORMER_INDEX_SETTINGS)),))
        conn.close()

    record(RetrievalConfig().with_values(window_sizes=(2,)))
    with pytest.raises(StoreError, match="run `reindex`"):  # control: other sizes, not taken
        MemoryService.open(str(db))
    record(RetrievalConfig())
    MemoryService.open(str(db)).close()
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT value FROM meta WHERE key = 'index_identity'").fetchone() == (
        catalog.index_identity(RetrievalConfig().index_identity()),)
    conn.close()


def schema_shape(conn: sqlite3.Connection) -> dict[str, object]:
    """Every table, column, index and full-text definition of a file, as SQLite reports them."""
    objects = conn.execute("SELECT type, name, tbl_name FROM sqlite_master ORDER BY name").fetchall()
    return {
        "objects": objects,
        "columns": {name: conn.execute(f"PRAGMA table_xinfo('{name}')").fetchall()
                    for kind, name, _ in objects if kind == "table"},
        "indexes": {name: (conn.execute(f"PRAGMA index_list('{name}')").fetchall(),
                           [conn.execute(f"PRAGMA index_xinfo('{index[1]}')").fetchall()
                            for index in conn.execute(f"PRAGMA index_list('{name}')")])
                    for kind, name, _ in objects if kind == "table"},
        "virtual": [" ".join(sql.split()) for (sql,) in conn.execute(
            "SELECT sql FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL%'")],
    }


@pytest.mark.parametrize(("schema", "migrations"), [(SHARD_SCHEMA, SHARD_MIGRATIONS),
                                                    (CATALOG_SCHEMA, CATALOG_MIGRATIONS)])
def test_a_new_file_gets_the_schema_every_migration_together_makes(schema, migrations):
    fresh, migrated = sqlite3.connect(":memory:"), sqlite3.connect(":memory:")
    migrated.create_function(KEYS_FUNCTION, 1, signal_keys_of)  # as Schema.migrate does
    migrated.create_function(ORDER_FUNCTION, 1, request_order)
    fresh.executescript(schema)
    for script in migrations:
        migrated.executescript(script)
    assert schema_shape(fresh) == schema_shape(migrated)
    assert len(schema_shape(fresh)["objects"]) > 1  # control: there is a schema to compare


def test_an_upgrade_drops_the_stored_features_and_keeps_every_message_and_answer(tmp_path):
    """Shard migration 14: a file of schema 13 (each message's features as JSON) loses the
    column and nothing else: every id, the id sequence past a forgotten one, the indexes, the
    answers; a speaker is still dropped with the last message that names it."""
    db = tmp_path / "aml.db"
    service = MemoryService.open(str(db))
    add(service, "u", "r1", "Ana: I moved to Lisbon in May 2023.", "Ben: 12 cats, quite a lot!",
        "Cyd: Lisbon is lovely in May.", "Ana: And the cats?")
    service.forget("u", [2], "forget")  # Ben's only message
    question = SearchRequest("Lisbon cats May", "u", 10, (), None)
    before = service.search(question)["data"]
    path = service.store.shard_path("u")
    service.close()
    take_back(path, 13)
    old = open_user(db, "u")
    assert "features" in [row[1] for row in old.execute("PRAGMA table_info(messages)")]  # control
    indexes = old.execute("SELECT name FROM sqlite_master WHERE type = 'index' ORDER BY 1").fetchall()
    old.close()
    service = MemoryService.open(str(db))
    try:
        assert service.search(question)["data"] == before
        conn = open_user(db, "u")
        assert "features" not in [row[1] for row in conn.execute("PRAGMA table_info(messages)")]
        assert conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' "
                            "ORDER BY 1").fetchall() == indexes
        assert conn.execute("SELECT id FROM messages ORDER BY id").fetchall() == [(1,), (3,), (4,)]
        assert integrity(conn) == []
        conn.close()
        service.forget("u", [3], "forget")  # Cyd's only message: Cyd goes, Ana stays
        add(service, "u", "r2", "Dee: hello")
        conn = open_user(db, "u")
        assert conn.execute("SELECT speaker FROM speakers ORDER BY 1").fetchall() == [("ana",), ("dee",)]
        assert conn.execute("SELECT max(id) FROM messages").fetchone() == (5,)  # 2 and 3 unused
        conn.close()
    finally:
        service.close()


def test_migration_14_copies_every_column_of_the_table_it_makes():
    """A column its copy left out would be filled with its default in every upgraded file."""
    conn = sqlite3.connect(":memory:")
    conn.execute(_MESSAGES_V14)
    assert [row[1] for row in conn.execute("PRAGMA table_info(messages)")] == \
        MESSAGE_COLUMNS_V14.split(", ")
    conn.close()


def test_reindex_compacts_the_pages_an_upgrade_left_free_and_only_those(tmp_path):
    """Migration 14 copies the messages table, and the old copy's pages stay free in the file:
    `reindex` gives them back (`compacted`), keeping every message and answer; a file with few
    free pages is left as it is."""
    db = tmp_path / "aml.db"
    service = MemoryService.open(str(db))
    for request in range(8):
        add(service, "u", f"r{request}", *(f"Message {request}-{n}: the lighthouse keeper wrote "
                                           f"about storms, gulls and {n} lanterns." for n in range(40)))
    add(service, "small", "r1", "Hello from a small user.")
    question = SearchRequest("lighthouse lanterns storms", "u", 10, (), None)
    before = service.search(question)["data"]
    path = service.store.shard_path("u")
    service.close()
    take_back(path, 13)
    service = MemoryService.open(str(db))
    assert service.search(question)["data"] == before  # the upgrade
    service.close()

    def pages() -> tuple[int, int]:
        conn = open_user(db, "u")
        try:
            return (conn.execute("PRAGMA page_count").fetchone()[0],
                    conn.execute("PRAGMA freelist_count").fetchone()[0])
        finally:
            conn.close()

    upgraded, free = pages()
    assert free >= upgraded * COMPACT_FREE_SHARE  # control: the upgrade left them
    service = MemoryService(Store(str(db), reindexing=True))
    try:
        assert service.reindex() == {"users": 2, "messages": 321, "resized": 0, "compacted": 1}
        assert service.search(question)["data"] == before
    finally:
        service.close()
    compacted, free = pages()
    assert free == 0 and compacted < upgraded * (1 - COMPACT_FREE_SHARE)
    service = MemoryService(Store(str(db), reindexing=True))
    try:  # nothing left to give back
        assert service.reindex() == {"users": 2, "messages": 321, "resized": 0, "compacted": 0}
    finally:
        service.close()
    conn = open_user(db, "u")
    assert integrity(conn) == []
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


@pytest.mark.parametrize(("deleted", "compacted"), [(0.10, False), (0.40, True)])
def test_a_file_is_compacted_only_when_a_quarter_of_it_is_free(tmp_path, deleted, compacted):
    conn = sqlite3.connect(tmp_path / "user.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, body BLOB)")
    conn.executemany("INSERT INTO rows (body) VALUES (?)", [(bytes(1500),) for _ in range(200)])
    conn.execute("DELETE FROM rows WHERE id <= ?", (int(200 * deleted),))
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    assert free > 0  # control: some pages are free either way
    assert compact(conn) is compacted
    assert conn.execute("PRAGMA freelist_count").fetchone()[0] == (0 if compacted else free)
    assert conn.execute("SELECT count(*) FROM rows").fetchone()[0] == 200 - int(200 * deleted)
    conn.close()


def test_the_upgrade_keeps_the_id_sequence_so_a_forgotten_id_is_never_reused(tmp_path):
    db = tmp_path / "aml.db"
    write_old_user(db, "alice", LAST_WITH_WINDOW_ROWS, OLD_ADDS[:1])
    old = open_user(db, "alice")
    old.execute("UPDATE sqlite_sequence SET seq = 40 WHERE name = 'messages'")  # 3..40 forgotten
    old.close()
    current = MemoryService.open(str(db))
    try:
        current.add(AddRequest("r9", "alice", "s1", (Message("user", "after the upgrade", None),)))
        assert [m["id"] for m in current.messages_of_request("alice", "r9")] == ["m41"]
    finally:
        current.close()


def test_a_new_user_file_has_small_pages_and_one_made_before_keeps_its_own(tmp_path):
    """A user of one short message takes at most 64 KB on disk after a graceful close (each of
    its tables and indexes a page of pages.USER_PAGE_SIZE); a file made with SQLite's default
    4 KiB pages keeps them, and is read and written as before (the control), until `reindex`
    rewrites it with the smaller page, its messages intact."""
    path = tmp_path / "aml.db"
    service = MemoryService(Store(path))
    add(service, "one", "r1", "Hello, I moved to Lisbon last week.")
    service.close()
    service = MemoryService(Store(path))
    older = service.store.shard_path("older")
    older.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(older) as made_before:  # an empty file as SQLite made them before
        made_before.execute("PRAGMA page_size = 4096")
        made_before.execute("PRAGMA journal_mode = WAL")
    add(service, "older", "r1", "Hello again from the older file.")
    found = service.search(SearchRequest("older file", "older", 10, (), None))["data"]
    one = service.store.shard_path("one")
    service.close()
    assert [item["content"] for item in found] == ["Hello again from the older file."]
    pages = {}
    for user, file in (("one", one), ("older", older)):
        with sqlite3.connect(file) as conn:
            pages[user] = conn.execute("PRAGMA page_size").fetchone()[0]
    assert pages == {"one": USER_PAGE_SIZE, "older": 4096}
    assert one.stat().st_size <= 64 * 1024
    service = MemoryService(Store(path, reindexing=True))  # reindex rewrites the older file
    assert service.reindex() == {"users": 2, "messages": 2, "resized": 1, "compacted": 0}
    found = service.search(SearchRequest("older file", "older", 10, (), None))["data"]
    service.close()
    assert [item["content"] for item in found] == ["Hello again from the older file."]
    with sqlite3.connect(older) as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == USER_PAGE_SIZE
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
