"""What the parts of the memory service share: the service they belong to, as far as they read it
(`Service`), and their common base (`Part`). The facade is service.py; the parts are writes.py,
reads.py, removal.py and upkeep.py."""

from __future__ import annotations

from typing import Protocol

from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.storage.store import Store


class Service(Protocol):
    """What a part reads of its service: the store, and the settings a caller may change on a live
    service (tests do)."""

    store: Store
    retrieval: RetrievalConfig
    provenance: bool
    default_max_words: int | None
    answer_window_tokens: int
    reader_view: bool


class Part:
    """One concern of the memory service. It reads the store and the settings through its service
    on every call, never a copy, so that a setting changed on the service holds for every part."""

    def __init__(self, service: Service) -> None:
        self.service = service

    @property
    def store(self) -> Store:
        return self.service.store

    @property
    def retrieval(self) -> RetrievalConfig:
        return self.service.retrieval
