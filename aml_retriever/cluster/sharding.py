"""Which shard holds a user: a fixed bucket of the user id, and a map of buckets to shards.

A user's file is named by the SHA-256 of the user id (store.shard_name), and the router (HAProxy,
deploy/haproxy.cfg) computes the same hash of the id it reads from a request: its first 10 bits
are the user's **bucket**, one of 1,024, and the **bucket map** (a HAProxy map file, changed at
run time through HAProxy's runtime API) names the shard of every bucket. So a user's shard is a
fixed function of the id, never of which shards are up: a dead shard's users get a 503, never
another shard's empty 200. And the bucket of a stored user is read from its file name, so moving
users needs no list of user ids (the files do not hold them).

Buckets go to shards by rendezvous hashing (highest random weight): each bucket goes to the shard
whose hash with it is highest. Adding a shard moves only the buckets the new shard wins (about
1/N of them); removing one moves only its own; the others stay where they are.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from aml_retriever.common.errors import ClusterError
from aml_retriever.storage.user_files import shard_name

# Buckets in all: fixed for the life of a cluster (the map has one line each). 1,024 spreads
# users evenly enough for up to ~64 shards (at 16 shards each holds 64 +- 8 buckets) while a
# move holds one bucket, about 1/1,024 of the users, at a time.
BUCKETS = 1024
# The bucket is the first BUCKET_BITS bits of the SHA-256: HAProxy reads the first two bytes
# as an integer (0-65535) and divides it by 2 ** (16 - BUCKET_BITS).
BUCKET_BITS = 10
BUCKET_DIVISOR = 2 ** (16 - BUCKET_BITS)
# The map value of a bucket being moved: HAProxy answers its users 503 with Retry-After.
HOLD = "hold"
MAP_HEADER = ("# aml_retriever bucket map: bucket shard (or hold: being moved). Written by the "
              "cluster tools; change it with `scripts/cluster.sh move`.\n")


def bucket_of_file(name: str) -> int:
    """The bucket of a user file, from its name (the hex SHA-256 of the user id)."""
    return int(name[:4], 16) // BUCKET_DIVISOR


def bucket_of(user_id: str) -> int:
    """The bucket of a user id, as HAProxy computes it from the id's UTF-8 bytes."""
    return bucket_of_file(shard_name(user_id))


def placement(shards: Sequence[str]) -> dict[int, str]:
    """Every bucket's shard among `shards`, by rendezvous hashing: a fixed function of the names,
    so the same list always gives the same map, and a list one shard longer moves only the
    buckets that shard wins."""
    if not shards:
        raise ValueError("a cluster needs at least one shard")
    if len(set(shards)) != len(shards):
        raise ValueError("shard names must differ")
    return {bucket: max(shards, key=lambda shard: (_weight(shard, bucket), shard))
            for bucket in range(BUCKETS)}


def _weight(shard: str, bucket: int) -> bytes:
    return hashlib.sha256(f"{shard}\x00{bucket}".encode()).digest()[:8]


def shard_of(user_id: str, buckets: Mapping[int, str]) -> str:
    """The shard (or HOLD) the map sends a user's requests to."""
    return buckets[bucket_of(user_id)]


def read_map(path: Path) -> dict[int, str]:
    """A bucket map file: every bucket, each once, to a shard name or HOLD."""
    buckets: dict[int, str] = {}
    for number, line in enumerate(path.read_text(encoding="ascii").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        key, _, value = line.partition(" ")
        if not key.isdigit() or not value or int(key) in buckets or int(key) >= BUCKETS:
            raise ValueError(f"{path}:{number} is not 'bucket shard' for a new bucket below "
                             f"{BUCKETS}")
        buckets[int(key)] = value.strip()
    if len(buckets) != BUCKETS:
        raise ValueError(f"{path} names {len(buckets)} buckets; a bucket map names all {BUCKETS}")
    return buckets


def write_map(path: Path, buckets: Mapping[int, str]) -> None:
    """Replace the map file in one step (a reader sees the old map or the new one, never half),
    durably: the file is the record HAProxy loads on a restart and the mover resumes from."""
    text = MAP_HEADER + "".join(f"{b} {buckets[b]}\n" for b in range(BUCKETS))
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w", encoding="ascii") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, path)
    fsync_path(path.parent)


def fsync_path(path: Path) -> None:
    """Make a file's writes, or a rename or an unlink in a directory, durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def changing_map(path: Path) -> Iterator[None]:
    """Hold the right to change a cluster's placement (move users, reload the router with other
    shards) for the block; a second holder is refused at once, not made to wait."""
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ClusterError("another move (or a start changing the shards) is running on this "
                               "cluster; wait for it to finish", "dir") from None
        yield
    finally:
        os.close(fd)
