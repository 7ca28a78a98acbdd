"""Page cursors a client cannot forge: what a cursor carries, with a keyed MAC over it.

A cursor names a position in a listing; one edited by hand could name a position the listing
never gave (or a number no SQLite integer holds). Signed, an edited cursor is refused as a
whole (400 naming `cursor`) before anything in it is read.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

# 128 bits of HMAC-SHA-256: far beyond guessing, and short enough for a URL.
TAG_BYTES = 16


def seal(key: bytes, data: bytes) -> str:
    """The cursor of `data`: urlsafe base64 of the data and its tag, unpadded."""
    tag = hmac.new(key, data, hashlib.sha256).digest()[:TAG_BYTES]
    return base64.urlsafe_b64encode(data + tag).decode("ascii").rstrip("=")


def unseal(key: bytes, cursor: str) -> bytes | None:
    """The data a cursor carries, or None when it was not sealed with `key` or was changed."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):
        return None
    data, tag = raw[:-TAG_BYTES], raw[-TAG_BYTES:]
    expected = hmac.new(key, data, hashlib.sha256).digest()[:TAG_BYTES]
    return data if len(raw) > TAG_BYTES and hmac.compare_digest(tag, expected) else None
