"""Moving users between shards: make the bucket map the placement a new list of shards gives.

Only the buckets whose shard changes move (sharding.placement: about 1/N of them when a shard is
added). Each is moved in the order that keeps every guarantee of the API:

1. **hold**: the bucket's map entry becomes `hold` (the map file first, then the running router),
   so its users get 503 with Retry-After, which clients already retry;
2. **drain**: wait until the router has no request of the bucket in flight (its `inflight`
   stick table counts them), so every acknowledged write is in the source file;
3. **checkpoint** the source file, **copy** it with SQLite's backup API to the target store (a
   new file is written under a temporary name and renamed into place once verified);
4. **verify**: the copy passes SQLite's quick_check and holds exactly the source's rows (a digest
   of every table, the index and the audit log included); if not, the bucket goes back to its
   source shard and the move stops;
5. **empty the source**, in one write transaction that first checks the source is still what was
   copied (else it is copied again): the same erasure as a deletion, its freed pages zeroed;
6. **switch** the bucket to the target shard (file, then router).

Every step is safe to repeat, and the map file records what was done: a move interrupted
anywhere is finished by running it again (a held bucket is copied again from whichever shard
still holds its users' rows). At the end the emptied source files are removed, once their
servers have closed them (asked with SIGUSR1); a file a server still holds open stays, empty,
and a later move removes it.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from aml_retriever.cluster.haproxy import Runtime
from aml_retriever.cluster.sharding import (
    BUCKETS,
    HOLD,
    bucket_of_file,
    changing_map,
    fsync_path,
    placement,
    read_map,
    write_map,
)
from aml_retriever.common.errors import ClusterError
from aml_retriever.memory.removal import erase_user_rows, holds_nothing
from aml_retriever.storage.store import Store
from aml_retriever.storage.user_files import remove_unused

# Buckets held at once: about 1.5% of the users wait (503, retry after a second) while their
# files are copied, and each batch waits for the requests in flight only once.
BATCH_BUCKETS = 16
# How often, and how long at most, the mover looks for a held bucket's requests to finish. A
# shard answers in milliseconds; HAProxy gives up on one after its server timeout (60 s).
DRAIN_POLL_S = 0.01
DRAIN_TIMEOUT_S = 90.0
# A source written again after it was copied (a request its client gave up on, finished late)
# is copied again, at most this many times, before the move stops.
COPY_ATTEMPTS = 3
# Times the servers are asked to close their idle files before an emptied file still open is
# left for a later move (a server busy with requests may take longer than one tick to do it).
RELEASE_ATTEMPTS = 3
PARTIAL_SUFFIX = ".moving"

Progress = Callable[[str, Mapping[str, object]], None]


@dataclass(frozen=True)
class Cluster:
    """What the mover needs of a cluster."""
    stores: Mapping[str, Path]  # every shard's store (its catalog file), by shard name
    map_path: Path
    runtime: Runtime
    release: Callable[[], None]  # asks the shard servers to close their idle user files
    settle_s: float  # how long they take to do it (a checkpoint tick and some)


@dataclass
class Route:
    """What moved from one shard to another."""
    source: str  # the shard the map gave the buckets (HOLD: held by a move stopped earlier)
    target: str
    buckets: int = 0
    users: int = 0


@dataclass
class Report:
    buckets_moved: int = 0
    users_moved: int = 0
    files_removed: int = 0
    left_open: list[str] = field(default_factory=list)  # emptied, still open by a server
    left_unexpected: list[str] = field(default_factory=list)  # rows where the map puts none
    routes: dict[tuple[str, str], Route] = field(default_factory=dict)  # (source, target)

    def route(self, source: str, target: str) -> Route:
        return self.routes.setdefault((source, target), Route(source, target))

    def as_dict(self) -> dict[str, object]:
        return {"buckets_moved": self.buckets_moved, "users_moved": self.users_moved,
                "moves": [{"from": r.source, "to": r.target, "buckets": r.buckets,
                           "users": r.users} for _, r in sorted(self.routes.items())],
                "files_removed": self.files_removed,
                "emptied_files_left_open": len(self.left_open),
                "unexpected_files": self.left_unexpected}


def move(cluster: Cluster, shards: Sequence[str], progress: Progress | None = None,
         batch: int = BATCH_BUCKETS) -> Report:
    """Move users until the bucket map is the placement of `shards`; the report of what moved."""
    with changing_map(cluster.map_path):
        return _move(cluster, shards, progress or (lambda event, detail: None), batch)


def _move(cluster: Cluster, shards: Sequence[str], tell: Progress, batch: int) -> Report:
    unknown = sorted(set(shards) - set(cluster.stores))
    if unknown:
        raise ClusterError(f"{unknown[0]} is not a shard of this cluster", "shards")
    missing = sorted(set(shards) - cluster.runtime.backends())
    if missing:
        raise ClusterError(f"the router has no backend {missing[0]}: start the new shards "
                           "(scripts/cluster.sh start --shards N) before moving users", "shards")
    current = read_map(cluster.map_path)
    _sync_router(cluster, current)
    wanted = placement(shards)
    moving = [b for b in range(BUCKETS) if current[b] != wanted[b]]
    report = Report()
    with _stores(cluster.stores) as stores:
        _same_index(stores)
        files = _files_by_bucket(stores)
        for start in range(0, len(moving), batch):
            _move_batch(cluster, stores, files, current, wanted, moving[start:start + batch],
                        report, tell)
        removable = _leftovers(stores, current, report)
    _remove_leftovers(cluster, removable, report, tell)
    return report


def _sync_router(cluster: Cluster, current: dict[int, str]) -> None:
    """The map file is the record: a change written to it but not yet to the router (a move
    stopped between the two) reaches the router first."""
    running = cluster.runtime.buckets(cluster.map_path)
    behind = {b: shard for b, shard in current.items() if running.get(b) != shard}
    if behind:
        cluster.runtime.set_buckets(cluster.map_path, behind)


@contextmanager
def _stores(paths: Mapping[str, Path]) -> Iterator[dict[str, Store]]:
    """Every shard's store, opened beside its running server (whatever settings indexed it),
    closed on the way out: no connection of the mover may outlive the moves."""
    with ExitStack() as stack:
        stores = {}
        for name, path in paths.items():
            stores[name] = Store(path, reindexing=True)
            stack.callback(stores[name].close)
        yield stores


def _same_index(stores: Mapping[str, Store]) -> None:
    """Refuse to move between stores indexed with different settings: the copy would be refused
    on open (or searched with mismatched rows) on the other side."""
    identities = {}
    for name, store in stores.items():
        conn = sqlite3.connect(f"{store.path.as_uri()}?mode=ro", uri=True)
        try:
            identities[name] = conn.execute("SELECT value FROM meta WHERE key = "
                                            "'index_identity'").fetchone()[0]
        finally:
            conn.close()
    if len(set(identities.values())) > 1:
        raise ClusterError("the shards' stores were indexed with different settings ("
                           + ", ".join(f"{n}: {i}" for n, i in sorted(identities.items()))
                           + "); start every shard with the same settings", "shards")


def _files_by_bucket(stores: Mapping[str, Store]) -> dict[str, dict[int, list[str]]]:
    """Every shard's user files (by file name), grouped by bucket."""
    found: dict[str, dict[int, list[str]]] = {}
    for name, store in stores.items():
        by_bucket: dict[int, list[str]] = {}
        for path in store.shard_paths():
            by_bucket.setdefault(bucket_of_file(path.stem), []).append(path.stem)
        found[name] = by_bucket
    return found


def _path(store: Store, name: str) -> Path:
    return store.shard_dir / name[:2] / f"{name}.db"


def _move_batch(cluster: Cluster, stores: Mapping[str, Store], files: dict[str, dict[int, list[str]]],
                current: dict[int, str], wanted: Mapping[int, str], buckets: Sequence[int],
                report: Report, tell: Progress) -> None:
    before = {b: current[b] for b in buckets}
    _set(cluster, current, dict.fromkeys(buckets, HOLD))
    tell("held", {"buckets": list(buckets)})
    try:
        _drain(cluster.runtime, buckets)
    except ClusterError:
        _set(cluster, current, {b: s for b, s in before.items() if s != HOLD})
        raise
    for position, bucket in enumerate(buckets):
        target = wanted[bucket]
        try:
            moved = _move_bucket(stores, files, bucket, target, tell)
        except _Emptying as stopped:
            # Some sources may be emptied already: the bucket stays held until a rerun.
            _set(cluster, current, {b: s for b, s in before.items()
                                    if b in buckets[position + 1:] and s != HOLD})
            raise stopped.__cause__ or stopped from None
        except BaseException:
            # Nothing of the bucket was emptied: its source shard still holds it whole, and the
            # buckets after it were not touched. One held by an earlier run stays held.
            _set(cluster, current, {b: s for b, s in before.items()
                                    if b in buckets[position:] and s != HOLD})
            raise
        _set(cluster, current, {bucket: target})
        files[target].setdefault(bucket, []).extend(
            n for _, n in moved if n not in files[target].get(bucket, []))
        report.buckets_moved += 1
        report.users_moved += len(moved)
        # A bucket held by a move stopped earlier is counted from the shard its files were on.
        source = before[bucket] if before[bucket] != HOLD or not moved else moved[0][0]
        report.route(source, target).buckets += 1
        for shard, _ in moved:
            report.route(shard, target).users += 1
        tell("switched", {"bucket": bucket, "shard": target, "users": len(moved)})


def _set(cluster: Cluster, current: dict[int, str], changes: Mapping[int, str]) -> None:
    """Change buckets: the map file first (the record a restart and a rerun read), then the
    running router."""
    if not changes:
        return
    current.update(changes)
    write_map(cluster.map_path, current)
    cluster.runtime.set_buckets(cluster.map_path, changes)


def _drain(runtime: Runtime, buckets: Sequence[int]) -> None:
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while any(runtime.in_flight().get(b, 0) for b in buckets):
        if time.monotonic() > deadline:
            raise ClusterError(f"requests of buckets {buckets[0]}-{buckets[-1]} were still being "
                               f"answered after {DRAIN_TIMEOUT_S:g} s; nothing was moved")
        time.sleep(DRAIN_POLL_S)


def _move_bucket(stores: Mapping[str, Store], files: Mapping[str, dict[int, list[str]]],
                 bucket: int, target: str, tell: Progress) -> list[tuple[str, str]]:
    """Copy, verify and empty every non-empty file of the bucket on a shard other than
    `target`. Returns the files moved: (source shard, file name). On a failure, the copies made
    are removed (or emptied) and the sources are left whole."""
    sources = [(shard, name) for shard, by_bucket in files.items() if shard != target
               for name in by_bucket.get(bucket, [])
               if not _empty(stores[shard], _path(stores[shard], name))]
    names = [name for _, name in sources]
    if len(set(names)) != len(names):
        twice = next(n for n in names if names.count(n) > 1)
        raise ClusterError(f"user file {twice} holds rows on two shards; which one is the user's "
                           "cannot be told: move it by hand, then run the move again")
    copied: list[tuple[str, str, str, bool]] = []  # (source shard, name, digest, created)
    try:
        for shard, name in sources:
            digest, created = _copy(stores[shard], stores[target], name)
            copied.append((shard, name, digest, created))
            tell("copied", {"bucket": bucket, "from": shard, "to": target})
    except BaseException:
        for _, name, _, created in copied:
            _undo_copy(stores[target], name, created)
        raise
    try:
        for shard, name, digest, _ in copied:
            _empty_source(stores[shard], stores[target], name, digest)
    except BaseException as exc:
        raise _Emptying() from exc
    return [(shard, name) for shard, name, _, _ in copied]


class _Emptying(Exception):
    """A move stopped while emptying a bucket's sources (the cause is the real error)."""


def _empty(store: Store, path: Path) -> bool:
    with store.connection_at(path) as conn:
        return conn is None or holds_nothing(conn)


def _copy(source: Store, target: Store, name: str) -> tuple[str, bool]:
    """Copy one user file to the target store and verify the copy. Returns the digest of what
    was copied, and whether the target file is new (False: an emptied file of the user was
    already there, overwritten in place: its server may hold it open, and SQLite's backup
    writes it as one transaction that server sees like any other)."""
    src_path, dst_path = _path(source, name), _path(target, name)
    with source.connection_at(src_path) as src:
        if src is None:
            raise ClusterError(f"user file {name} vanished from {source.path} during a move")
        source.checkpoint(src)
        digest = _digest(src)
        if dst_path.exists():
            with target.connection_at(dst_path) as dst:
                assert dst is not None
                src.backup(dst)
                _verify(dst, digest, name)
            return digest, False
        dst_path.parent.mkdir(parents=True, exist_ok=True)
        partial = dst_path.with_name(dst_path.name + PARTIAL_SUFFIX)
        _unlink_parts(partial)
        dst = sqlite3.connect(partial, isolation_level=None)
        try:
            src.backup(dst)
            _verify(dst, digest, name)
        except BaseException:
            dst.close()
            _unlink_parts(partial)
            raise
        dst.close()
    fsync_path(partial)
    os.replace(partial, dst_path)
    _unlink_parts(partial)  # its WAL and shared-memory files, if closing left them
    fsync_path(dst_path.parent)
    return digest, True


def _verify(copy: sqlite3.Connection, digest: str, name: str) -> None:
    """The copy must pass SQLite's own check and hold exactly the rows of the source."""
    check = copy.execute("PRAGMA quick_check").fetchone()[0]
    if check != "ok" or _digest(copy) != digest:
        raise ClusterError(f"the copy of user file {name} does not hold what its source holds "
                           f"({'quick_check: ' + check if check != 'ok' else 'rows differ'}); "
                           "the move stopped and the bucket stays on its source shard")


def _digest(conn: sqlite3.Connection) -> str:
    """A hash of every row of every table of a user file (messages, the index, requests,
    sessions, segments, audit log, tombstones, meta and its secret...), in key order."""
    digest = hashlib.sha256()
    tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                          "sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name").fetchall()
    for (table,) in tables:
        digest.update(table.encode() + b"\0")
        for row in conn.execute(f'SELECT * FROM "{table}"'):
            digest.update(repr(row).encode() + b"\n")
    return digest.hexdigest()


def _undo_copy(target: Store, name: str, created: bool) -> None:
    """Take back a copy the move made: a new file is unlinked (no server ever opened it: its
    users were never routed there), a file overwritten in place is emptied again."""
    path = _path(target, name)
    if created:
        _unlink_parts(path)
        return
    with target.connection_at(path) as conn:
        if conn is not None:
            with target.write(conn):
                erase_user_rows(conn)
            target.checkpoint(conn)


def _empty_source(source: Store, target: Store, name: str, digest: str) -> None:
    """Empty the source file if it still holds exactly what was copied, checked and emptied in
    one write transaction; a source written since is copied again."""
    for _ in range(COPY_ATTEMPTS):
        path = _path(source, name)
        with source.connection_at(path) as conn:
            assert conn is not None
            with source.write(conn):
                if _digest(conn) == digest:
                    erase_user_rows(conn)
                    changed = False
                else:
                    changed = True
            if not changed:
                source.checkpoint(conn)
                return
        digest, _ = _copy(source, target, name)
    raise ClusterError(f"user file {name} kept changing on {source.path} while it was moved; "
                       "its bucket stays held: run the move again")


def _leftovers(stores: Mapping[str, Store], current: Mapping[int, str],
               report: Report) -> list[tuple[str, Path]]:
    """The files of buckets their shard does not hold: the emptied ones can go; one that still
    holds rows is reported and left alone (rows the map does not route to)."""
    removable = []
    for shard, store in stores.items():
        for path in store.shard_paths():
            if current[bucket_of_file(path.stem)] == shard:
                continue
            if _empty(store, path):
                removable.append((shard, path))
            else:
                report.left_unexpected.append(f"{shard}:{path.stem}")
    return removable


def _remove_leftovers(cluster: Cluster, removable: Sequence[tuple[str, Path]], report: Report,
                      tell: Progress) -> None:
    """Remove emptied files no server holds open (after asking them to close their idle ones)."""
    left = list(removable)
    for _ in range(RELEASE_ATTEMPTS):
        if not left:
            break
        cluster.release()
        time.sleep(cluster.settle_s)
        still_open = []
        for shard, path in left:
            if remove_unused(path):
                report.files_removed += 1
            else:
                still_open.append((shard, path))
        left = still_open
    report.left_open = [f"{shard}:{path.stem}" for shard, path in left]
    tell("removed", {"files": report.files_removed, "left_open": len(report.left_open)})


def _unlink_parts(path: Path) -> None:
    for part in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
        part.unlink(missing_ok=True)


