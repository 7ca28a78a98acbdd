"""In-process experiments: one or more retrieval configurations over one or more seeds.

A task is one seed (or one set of replay files) and every configuration to try on it. Ranking
signals only change query-time ranking, so a store is built once per distinct index identity
(`RetrievalConfig.index_identity()`, the settings in `signals.INDEX_SETTINGS`) and every
configuration sharing it searches that same store through its own MemoryService. Tasks run in
separate processes when `jobs` > 1 (each builds its own stores in its own directory).
"""

from __future__ import annotations

import concurrent.futures as cf
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.evaluation import dataset, runner, synthetic
from aml_retriever.evaluation.backends import InProcess
from aml_retriever.evaluation.reference import BigramBM25

# The name the reference's results go under, beside the configurations tried.
REFERENCE = "reference"


@dataclass(frozen=True)
class Source:
    """Where a task's conversations come from: a synthetic seed, or replay/dataset files."""

    label: str
    suite: str = "mixed"
    scale: str = "small"
    difficulty: str = "mixed"
    seed: int = 1
    paths: tuple[str, ...] = ()

    def load(self) -> tuple[list[dataset.Conversation], dict[str, Any]]:
        if self.paths:
            conversations = dataset.load_many(self.paths)
            return conversations, {"files": list(self.paths), "users": len(conversations),
                                   "messages": sum(c.message_count for c in conversations),
                                   "questions": sum(len(c.questions) for c in conversations)}
        return synthetic.generate(self.suite, self.scale, self.difficulty, self.seed)


def synthetic_sources(suite: str, scale: str, difficulty: str, seeds: Sequence[int]) -> list[Source]:
    return [Source(f"seed{s}", suite, scale, difficulty, s) for s in seeds]


@dataclass(frozen=True)
class Task:
    source: Source
    configs: tuple[tuple[str, RetrievalConfig], ...]
    top_k: int = runner.DEFAULT_TOP_K
    store_root: str | None = None  # None: a temporary directory, removed afterwards
    quiet: bool = False
    keep_records: bool = True
    reference: bool = False  # also answer with the bigram BM25 reference (config REFERENCE)
    answer_window_tokens: int = 0  # the setting of the same name (0: ranked evidence only)
    reader_view: bool = False  # the setting of the same name


def run_task(task: Task) -> dict[str, Any]:
    """Build the stores of one source, search them under every configuration, score."""
    started = time.perf_counter()
    progress = None if task.quiet else sys.stderr
    conversations, meta = task.source.load()
    root = Path(task.store_root) if task.store_root else Path(tempfile.mkdtemp(prefix="aml-eval-"))
    by_identity: dict[str, list[tuple[str, RetrievalConfig]]] = {}
    for name, config in task.configs:
        by_identity.setdefault(config.index_identity(), []).append((name, config))
    out: dict[str, Any] = {"label": task.source.label, "meta": meta, "adds": {}, "configs": {}}
    try:
        for identity, members in by_identity.items():
            path = root / f"{task.source.label}-{identity}" / "aml.db"
            builder = InProcess(path, members[0][1])
            try:
                stats = runner.add_all(builder, conversations, progress=progress,
                                       label=f"[{task.source.label}] add")
            finally:
                builder.close()
            out["adds"][identity] = stats.as_dict()
            for name, config in members:
                backend = InProcess(path, config, task.answer_window_tokens, task.reader_view)
                try:
                    outcomes = runner.search_all(backend, conversations, task.top_k, progress=progress,
                                                 label=f"[{task.source.label}] search {name}")
                finally:
                    backend.close()
                records = runner.score(outcomes)
                entry: dict[str, Any] = {"summary": runner.summarise(records)}
                if task.keep_records:
                    entry["records"] = records
                out["configs"][name] = entry
        if task.reference:
            out["configs"][REFERENCE] = _reference_entry(task, conversations, progress)
    finally:
        if not task.store_root:
            shutil.rmtree(root, ignore_errors=True)
    out["seconds"] = round(time.perf_counter() - started, 2)
    return out


def _reference_entry(task: Task, conversations: Sequence[dataset.Conversation],
                     progress: Any) -> dict[str, Any]:
    """The same questions answered by the plain reference (reference.py), scored alike."""
    backend = BigramBM25()
    runner.add_all(backend, conversations, progress=None)
    outcomes = runner.search_all(backend, conversations, task.top_k, progress=progress,
                                 label=f"[{task.source.label}] search {REFERENCE}")
    return {"summary": runner.summarise(runner.score(outcomes))}


def run_tasks(tasks: Sequence[Task], jobs: int = 1) -> list[dict[str, Any]]:
    """Every task, in order; in `jobs` processes when there is more than one task."""
    if jobs <= 1 or len(tasks) <= 1:
        return [run_task(t) for t in tasks]
    with cf.ProcessPoolExecutor(min(jobs, len(tasks))) as pool:
        return list(pool.map(run_task, tasks))


def by_config(task_results: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """{config name: [summary of each task]} in task order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for result in task_results:
        for name, entry in result["configs"].items():
            out.setdefault(name, []).append(entry["summary"])
    return out
