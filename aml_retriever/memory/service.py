"""The memory service: what transports call. A facade over its parts, one concern each: the Add
path (writes.py), Search and reads of stored messages (reads.py), deleting a user and forgetting
messages (removal.py), and the upkeep of the whole store (upkeep.py)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from aml_retriever import __version__
from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.engine.candidates import Term
from aml_retriever.engine.held import HELD_BYTES, HeldUsers
from aml_retriever.memory.listing import Listing
from aml_retriever.memory.reads import Reads
from aml_retriever.memory.removal import Removal
from aml_retriever.memory.upkeep import Upkeep
from aml_retriever.memory.validation import AddRequest, SearchRequest
from aml_retriever.memory.writes import DEFAULT_STAMP, Stamp, Writes
from aml_retriever.storage.store import Store
from aml_retriever.storage.timeline import CURRENT, ReadFilter


class MemoryService:
    """The store and the settings, and the parts that act on them. The parts read both through
    the service on every call, so a setting changed here holds for all of them at once."""

    def __init__(self, store: Store, provenance: bool = True,
                 retrieval: RetrievalConfig | None = None,
                 default_max_words: int | None = None, answer_window_tokens: int = 0,
                 reader_view: bool = False, held_bytes: int = HELD_BYTES) -> None:
        self.store = store
        self.provenance = provenance
        self.retrieval = retrieval or RetrievalConfig()
        self.default_max_words = default_max_words  # the budget of a Search that names none
        # Above 0: every Search fills the reader's window after its ranked evidence (window.py).
        self.answer_window_tokens = answer_window_tokens
        # Each message an answer returns shown with its day, time and speaker (reader_view.py).
        self.reader_view = reader_view
        # What Searches read of the users searched, kept for their next Searches (held.py).
        self.held = HeldUsers(held_bytes)
        self.writes = Writes(self)
        self.reads = Reads(self)
        self.removal = Removal(self)
        self.upkeep = Upkeep(self)

    @classmethod
    def open(cls, path: str, retrieval: RetrievalConfig | None = None, provenance: bool = True,
             synchronous: str = "FULL") -> MemoryService:
        """A service over the store at `path` (created if absent): the in-process entry point."""
        retrieval = retrieval or RetrievalConfig()
        return cls(Store(path, synchronous, retrieval), provenance, retrieval)

    def close(self) -> None:
        self.store.close()

    @staticmethod
    def health() -> dict[str, Any]:
        return {"status": "ok", "version": __version__}

    # ---- Add: writes.py -------------------------------------------------------------------

    def add(self, request: AddRequest, actor: str = "http") -> dict[str, Any]:
        return self.writes.add(request, actor)

    def store_request(self, conn: sqlite3.Connection, request: AddRequest, payload_hash: str,
                      received_ms: int, stamp: Stamp = DEFAULT_STAMP) -> tuple[int, int]:
        return self.writes.store_request(conn, request, payload_hash, received_ms, stamp)

    # ---- Search and single messages: reads.py ---------------------------------------------

    def search(self, request: SearchRequest, statements: bool = False) -> dict[str, Any]:
        return self.reads.search(request, statements)

    def messages(self, user_id: str, ids: Sequence[int]) -> list[dict[str, Any]]:
        return self.reads.messages(user_id, ids)

    def messages_of_request(self, user_id: str, request_id: str) -> list[dict[str, Any]]:
        return self.reads.messages_of_request(user_id, request_id)

    def messages_with_content(self, user_id: str, content: str) -> list[dict[str, Any]]:
        return self.reads.messages_with_content(user_id, content)

    def proposed(self, user_id: str, limit: int) -> list[dict[str, Any]]:
        return self.reads.proposed(user_id, limit)

    def recent(self, user_id: str, limit: int, visible: ReadFilter = CURRENT,
               before: tuple[int, int] | None = None) -> list[dict[str, Any]]:
        return self.reads.recent(user_id, limit, visible, before)

    def holds(self, user_id: str) -> bool:
        """Whether the store holds the user: from its first Add (a file) until it is deleted. A
        user whose every message was forgotten is held, with an empty memory."""
        with self.store.connection(user_id, create=False) as conn:
            return conn is not None

    def audit(self, user_id: str, after: int, limit: int, newest: bool = False) -> dict[str, Any]:
        return self.reads.audit(user_id, after, limit, newest)

    def document_counts(self, user_id: str, terms: Sequence[Term]) -> tuple[int, list[int]]:
        return self.reads.document_counts(user_id, terms)

    # ---- who is who in a memory: listing.py -----------------------------------------------

    def speakers(self, user_id: str) -> dict[str, Any]:
        """The names the user's conversation gives its roles, with their evidence, and the
        names found but not attached (GET /users/{user_id}/speakers)."""
        return Listing(self.store).speakers(user_id)

    # ---- delete and forget: removal.py ----------------------------------------------------

    def delete_user(self, user_id: str, actor: str = "http") -> dict[str, Any]:
        return self.removal.delete_user(user_id, actor)

    def forget(self, user_id: str, message_ids: Sequence[int], reason: str,
               actor: str = "http",
               check: Callable[[sqlite3.Connection], None] | None = None) -> dict[str, Any]:
        return self.removal.forget(user_id, message_ids, reason, actor, check)

    # ---- every user file: upkeep.py -------------------------------------------------------

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> dict[str, int]:
        return self.upkeep.reindex(progress)

    def stats(self) -> dict[str, Any]:
        return self.upkeep.stats()
