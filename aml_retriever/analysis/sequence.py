"""Where an Add stands among its conversation's Adds, read from its request id: the order two
messages of one session said at the same instant take when their Adds differ.

A conversation's order is its messages' timestamps, then their order in their Add. Messages of
one session that share a timestamp (a sender that stamps a whole session with its date, a
clock's resolution) and came in different Adds need one more key, and their arrival is none: a
leaderboard's client sends a conversation's Adds in parallel. Senders number their writes
(`conv-26-session_3-1`, `req-0042`), so the last number in the request id is the sender's order;
an id without one counts 0 (arrival then decides, as before). Deterministic, read from the id
alone: no stored message changes when an Add comes in.
"""

from __future__ import annotations

import re

# The last run of ASCII digits of a request id, at most this many of its last digits (a request
# id is at most 256 characters; 15 digits fit the 8 bytes SQLite stores an integer in).
_LAST_NUMBER = re.compile(r"([0-9]+)[^0-9]*\Z")
MOST_DIGITS = 15


def request_order(request_id: str) -> int:
    """The last number a request id writes (0 for none): `s3-12` -> 12, `req-0042b` -> 42."""
    found = _LAST_NUMBER.search(request_id)
    return int(found.group(1)[-MOST_DIGITS:]) if found else 0
