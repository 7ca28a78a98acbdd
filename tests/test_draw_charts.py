"""scripts/draw_charts.py draws well-formed, deterministic SVG from result files, one series per
system, each point where its value puts it; the documents show the committed charts and the
commands that redraw them."""

from __future__ import annotations

import importlib.util
import json
import math
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
SVG = "{http://www.w3.org/2000/svg}"
CHARTS = ("evidence_by_words.svg", "search_latency.svg", "add_throughput.svg")


@pytest.fixture(scope="module")
def charts() -> ModuleType:
    spec = importlib.util.spec_from_file_location("draw_charts", ROOT / "scripts" / "draw_charts.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["draw_charts"] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules["draw_charts"]
    return module


def summary(n: int, curve: dict[int, float]) -> dict:
    return {"groups": {"all": {"n": n, "R@5": {"mean": 0.4},
                               **{f"b@{w}w": {"mean": v, "min": v, "max": v} for w, v in curve.items()}}}}


ENV = {"cpus": 2, "loadavg_start": 1.5, "loadavg_end": 2.25, "python": "3.11.7", "sqlite": "3.40.1",
       "aml_retriever": "0.7.0", "commit": "abc1234"}


def write_results(base: Path, ours_at_100: float = 0.5) -> tuple[Path, Path]:
    """Tiny result files: two suites (one without a reference), a search and an add benchmark."""
    eval_out, bench_out = base / "eval_out", base / "bench_out"
    eval_out.mkdir(parents=True)
    bench_out.mkdir()
    (eval_out / "eval-mixed-medium-mixed.json").write_text(json.dumps({
        "summary": summary(12, {100: ours_at_100, 1000: 0.75, 5000: 1.0}),
        "reference": summary(12, {100: 0.25, 1000: 0.5, 5000: 0.5})}))
    (eval_out / "locomo-dev.json").write_text(json.dumps(
        {"summary": summary(10, {200: 0.5, 500: 0.6, 1000: 0.7, 2000: 0.8})}))
    latency = {str(size): {f"{path} k={k}": {"p50": base_ms * size / 1000 * (2 if k == 100 else 1)}
                           for path, base_ms in (("full", 1.5), ("lexical", 0.5), ("floor", 0.2))
                           for k in (10, 100)} for size in (1000, 10000)}
    (bench_out / "search.json").write_text(json.dumps({
        "latency_ms": latency, "store_total": {"messages": 50000, "users": 50},
        "params": {"queries": 50, "rounds": 2}, "env": ENV}))
    (bench_out / "add.json").write_text(json.dumps({"env": ENV, "lengths": [
        {"words": w, "adds": 10, "synchronous": "FULL", "stats": {
            path: {"msg_per_s": rate / w, "words_per_s": rate}
            for path, rate in (("service", 5e4), ("searchable", 4e5), ("bare", 1e6))}}
        for w in (10, 50, 300, 1000)]}))
    return eval_out, bench_out


def draw(charts: ModuleType, base: Path, **kwargs: float) -> Path:
    eval_out, bench_out = write_results(base, **kwargs)
    out = base / "charts"
    assert charts.main(["--eval-out", str(eval_out), "--bench-out", str(bench_out),
                        "--charts", str(out)]) == 0
    return out


def panels(path: Path) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """{panel title: {series label: [(x, y) of each point of its line]}} of a drawn chart; each
    point also has its own marker."""
    root = ET.parse(path).getroot()
    out = {}
    for panel in root.iter(f"{SVG}g"):
        if panel.get("class") != "panel":
            continue
        series = {}
        for group in panel.iter(f"{SVG}g"):
            if group.get("class") == "series":
                line = group.find(f"{SVG}path")
                assert line is not None
                points = [(float(x), float(y)) for x, y in re.findall(r"[ML]([\d.]+),([\d.]+)",
                                                                      line.get("d", ""))]
                assert len(group.findall(f"{SVG}g")) == len(points)  # one marker a point
                series[group.get("data-series")] = points
        out[panel.get("data-title")] = series
    return out


def test_each_chart_is_svg_with_one_series_per_system(charts, tmp_path):
    out = draw(charts, tmp_path)
    for name in CHARTS:
        root = ET.parse(out / name).getroot()
        assert root.tag == f"{SVG}svg" and root.find(f"{SVG}title") is not None
    evidence = panels(out / "evidence_by_words.svg")
    assert list(evidence) == ["LoCoMo dev (10 questions)", "synthetic mixed (12 questions)"]
    assert list(evidence["synthetic mixed (12 questions)"]) == ["aml_retriever",
                                                                "bigram BM25 reference"]
    assert list(evidence["LoCoMo dev (10 questions)"]) == ["aml_retriever"]  # no reference ran
    assert len(evidence["LoCoMo dev (10 questions)"]["aml_retriever"]) == 4
    search = panels(out / "search_latency.svg")
    assert list(search) == ["top_k 10", "top_k 100"]
    assert all(len(series) == 3 and all(len(p) == 2 for p in series.values())
               for series in search.values())
    add = panels(out / "add_throughput.svg")
    assert list(add) == ["messages a second", "words a second"] and len(add["words a second"]) == 3


def test_points_are_placed_by_their_values(charts, tmp_path):
    evidence = panels(draw(charts, tmp_path) / "evidence_by_words.svg")["synthetic mixed (12 questions)"]
    (x100, y_half), (x1000, y_75), (x5000, y_one) = evidence["aml_retriever"]
    assert x100 < x1000 < x5000 and y_one < y_75 < y_half  # right for more words, up for more found
    assert x1000 - x100 == pytest.approx((x5000 - x1000) / math.log10(5), rel=0.01)  # log x
    reference = evidence["bigram BM25 reference"]
    assert reference[1][1] == pytest.approx(y_half) and reference[0][1] > y_half


def test_the_same_results_give_the_same_bytes(charts, tmp_path):
    first = draw(charts, tmp_path / "a")
    second = draw(charts, tmp_path / "b")
    changed = draw(charts, tmp_path / "c", ours_at_100=0.6)
    for name in CHARTS:
        assert (first / name).read_bytes() == (second / name).read_bytes()
    assert (first / "evidence_by_words.svg").read_bytes() != (changed / "evidence_by_words.svg").read_bytes()


def test_missing_results_name_the_command_that_writes_them(charts, tmp_path, capsys):
    assert charts.main(["--eval-out", str(tmp_path / "none"), "--bench-out", str(tmp_path / "none"),
                        "--charts", str(tmp_path / "charts")]) == 1
    err = capsys.readouterr().err
    assert "--name locomo-dev" in err and "python3 bench/bench_search.py" in err
    assert not (tmp_path / "charts").exists()


def test_labels_from_files_are_escaped_text(charts):
    chart = charts.Chart("a <b> & c", (charts.Panel("<p>", (charts.Series(
        "<script>x</script>", ((1.0, 1.0), (10.0, 2.0)), "#000000"),), "x & y", "y"),), 1)
    root = ET.fromstring(charts.render(chart))
    assert root.find(f"{SVG}title").text == "a <b> & c"
    assert not list(root.iter(f"{SVG}script"))


def test_the_documents_show_the_committed_charts_and_how_to_redraw_them(charts):
    eval_md = (ROOT / "docs" / "EVAL.md").read_text()
    bench_md = (ROOT / "docs" / "BENCHMARKS.md").read_text()
    for doc, names in ((eval_md, CHARTS[:1]), (bench_md, CHARTS[1:])):
        assert "python3 scripts/draw_charts.py" in doc
        for name in names:
            assert f"](charts/{name})" in doc
            root = ET.parse(ROOT / "docs" / "charts" / name).getroot()
            assert root.tag == f"{SVG}svg"
    for _, _, command in charts.EVAL_PANELS:
        assert command in eval_md, command
    committed = panels(ROOT / "docs" / "charts" / "evidence_by_words.svg")
    assert len(committed) == len(charts.EVAL_PANELS)
    assert all(list(s) == ["aml_retriever", "bigram BM25 reference"] for s in committed.values())
    assert re.search(r"b@100w .* b@5000w|100 to 5,000", eval_md)
