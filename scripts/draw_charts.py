#!/usr/bin/env python3
"""Draw the documentation's charts as SVG from the result files the project's own commands write.

- docs/charts/evidence_by_words.svg (docs/EVAL.md): evidence found against words read, b@W for W
  from 100 to 5,000, for aml_retriever and the reference the evaluation runs beside it, one panel
  per suite, from eval_out/<name>.json (`scripts/run_eval.py ... --reference`; EVAL_PANELS below
  names the command that writes each file);
- docs/charts/search_latency.svg (docs/BENCHMARKS.md): Search p50 against the user's memory
  size, from bench_out/search.json (`bench/bench_search.py`);
- docs/charts/add_throughput.svg (docs/BENCHMARKS.md): Adds against message length, from
  bench_out/add.json (`bench/bench_add.py`).

A panel whose result file is missing is left out, and the command that writes it is printed on
stderr. Standard library only, SVG written by hand: the same result files give the same bytes.

Usage:
    python3 scripts/draw_charts.py
    python3 scripts/draw_charts.py --eval-out eval_out --bench-out bench_out --charts docs/charts

Exit status: 0 when at least one chart was drawn, 1 when no result file was found, 2 on a usage
error.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

ROOT = Path(__file__).resolve().parent.parent

# Okabe-Ito colours: told apart with the common colour-vision deficiencies, and in grey print by
# the dash and the marker each series also has.
BLUE, VERMILLION, GREEN, PURPLE, ORANGE, SKY = (
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9")
DASHED = "7 4"
MARKERS = ("circle", "square", "triangle", "diamond")

# Layout in pixels: panels of PANEL_W x PANEL_H, the plot inside them after the margins.
PANEL_W, PANEL_H = 300, 240
LEFT, RIGHT, TOP, BOTTOM = 62, 14, 30, 46
PAGE_MARGIN, TITLE_H, LEGEND_ROW_H, NOTE_H = 16, 34, 22, 16
FONT = "Helvetica, Arial, sans-serif"
CHAR_W = 6.6  # the mean advance of a 12 px sans-serif character, for laying out the legend
NOTE_CHAR_W = 5.4  # the same at the notes' 11 px, for wrapping them

# (result file stem in --eval-out, panel title, the command that writes the file)
EVAL_PANELS = (
    ("locomo-dev", "LoCoMo dev",
     "python3 scripts/run_eval.py --replay ../shared/eval/replay/ --top-k 100 --reference "
     "--name locomo-dev"),
    ("beam-dev", "BEAM dev",
     "python3 scripts/run_eval.py --replay ../shared/eval/external/data/beam/100K "
     "../shared/eval/external/data/beam/500K --top-k 100 --reference --name beam-dev"),
    ("memdaily-x10-dev", "MemDaily x10 dev",
     "python3 scripts/run_eval.py --replay ../shared/eval/external/data/memdaily_x10 --top-k 100 "
     "--reference --name memdaily-x10-dev"),
    ("memdaily-dev", "MemDaily dev, no filler",
     "python3 scripts/run_eval.py --replay ../shared/eval/external/data/memdaily --top-k 100 "
     "--reference --name memdaily-dev"),
    ("eval-mixed-medium-mixed", "synthetic mixed",
     "python3 scripts/run_eval.py --suite mixed --scale medium --difficulty mixed --seeds 1,2,3 "
     "--top-k 100 --reference"),
    ("eval-long_turn-medium-mixed", "synthetic long_turn",
     "python3 scripts/run_eval.py --suite long_turn --scale medium --seeds 1,2,3 --top-k 100 "
     "--reference"),
    ("eval-chinese-medium-mixed", "synthetic chinese",
     "python3 scripts/run_eval.py --suite chinese --scale medium --seeds 1,2,3 --top-k 100 "
     "--reference"),
)
# What each summary of a result file is called on the chart, and how it is drawn.
EVAL_SYSTEMS = (("summary", "aml_retriever", BLUE, ""),
                ("reference", "bigram BM25 reference", VERMILLION, DASHED))


# ---- what is drawn ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Series:
    label: str
    points: tuple[tuple[float, float], ...]
    colour: str
    dash: str = ""


@dataclass(frozen=True)
class Panel:
    title: str
    series: tuple[Series, ...]
    x_label: str
    y_label: str
    x_log: bool = True
    y_log: bool = False
    y_range: tuple[float, float] | None = None  # None: from the data


@dataclass(frozen=True)
class Chart:
    title: str
    panels: tuple[Panel, ...]
    columns: int
    notes: tuple[str, ...] = ()


# ---- scales and ticks ------------------------------------------------------------------------


@dataclass(frozen=True)
class Scale:
    """Data values onto pixels along one axis; `flip` for y, which grows downwards in SVG."""

    low: float
    high: float
    log: bool
    start: float
    length: float
    flip: bool = False

    def __call__(self, value: float) -> float:
        if self.log:
            share = (math.log10(value) - math.log10(self.low)) / (
                math.log10(self.high) - math.log10(self.low))
        else:
            share = (value - self.low) / (self.high - self.low)
        return self.start + (1 - share if self.flip else share) * self.length


def log_range(values: Sequence[float]) -> tuple[float, float]:
    """The 1-2-5 steps just around the values (at least one step apart)."""
    steps = [m * 10.0 ** d for d in range(-3, 10) for m in (1, 2, 5)]
    low = max(s for s in steps if s <= min(values))
    high = min(s for s in steps if s >= max(values))
    return (low, high) if high > low else (low, steps[steps.index(low) + 1])


def linear_range(values: Sequence[float]) -> tuple[float, float]:
    step = nice_step(max(values) - min(values) or abs(max(values)) or 1.0)
    return math.floor(min(values) / step) * step, math.ceil(max(values) / step) * step


def nice_step(span: float) -> float:
    raw = span / 5
    magnitude = 10.0 ** math.floor(math.log10(raw))
    return next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw * 0.999)


def ticks(low: float, high: float, log: bool) -> list[float]:
    if log:  # 1-2-5 in each decade; past three decades, the powers of ten alone
        steps = (1, 2, 5) if math.log10(high / low) <= 3 else (1,)
        return [m * 10.0 ** d for d in range(math.floor(math.log10(low)) - 1,
                                              math.ceil(math.log10(high)) + 1)
                for m in steps if low * 0.999 <= m * 10.0 ** d <= high * 1.001]
    step = nice_step(high - low)
    count = round((high - low) / step)
    return [low + i * step for i in range(count + 1)]


def number(value: float) -> str:
    """A tick label: 0.05; 0.5; 20; 500; 5k; 2.5k; 5M."""
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return number(value / size) + suffix
    if abs(value - round(value)) < 1e-9 * max(1.0, abs(value)):
        return f"{round(value)}"
    return f"{value:.3f}".rstrip("0")


def wrapped(line: str, width: float) -> list[str]:
    """A note broken into lines that fit the chart's width."""
    most, out, current = int(width / NOTE_CHAR_W), [], ""
    for word in line.split():
        if current and len(current) + 1 + len(word) > most:
            out.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    return [*out, current] if current else out


def px(value: float) -> str:
    return f"{value:.1f}"


# ---- SVG ---------------------------------------------------------------------------------------


def marker(kind: str, x: float, y: float, colour: str) -> str:
    if kind == "circle":
        return f'<circle cx="{px(x)}" cy="{px(y)}" r="3.5" fill="{colour}"/>'
    if kind == "square":
        return f'<rect x="{px(x - 3.2)}" y="{px(y - 3.2)}" width="6.4" height="6.4" fill="{colour}"/>'
    if kind == "triangle":
        return (f'<path d="M{px(x)},{px(y - 4.2)} L{px(x + 4)},{px(y + 3)} L{px(x - 4)},{px(y + 3)} Z"'
                f' fill="{colour}"/>')
    return (f'<path d="M{px(x)},{px(y - 4.5)} L{px(x + 4.5)},{px(y)} L{px(x)},{px(y + 4.5)} '
            f'L{px(x - 4.5)},{px(y)} Z" fill="{colour}"/>')


def text(x: float, y: float, content: str, size: int = 12, anchor: str = "start",
         weight: str = "normal", fill: str = "#222", rotate: bool = False) -> str:
    attributes = f'x="{px(x)}" y="{px(y)}" font-size="{size}" text-anchor="{anchor}" fill="{fill}"'
    if weight != "normal":
        attributes += f' font-weight="{weight}"'
    if rotate:
        attributes += f' transform="rotate(-90 {px(x)} {px(y)})"'
    return f"<text {attributes}>{escape(content)}</text>"


def draw_panel(panel: Panel, left: float, top: float, markers: dict[str, str]) -> list[str]:
    """One panel: its title, axes with ticks, grid and labels, and every series."""
    plot_x, plot_y = left + LEFT, top + TOP
    plot_w, plot_h = PANEL_W - LEFT - RIGHT, PANEL_H - TOP - BOTTOM
    xs = [x for s in panel.series for x, _ in s.points]
    ys = [y for s in panel.series for _, y in s.points]
    x_low, x_high = log_range(xs) if panel.x_log else linear_range(xs)
    y_low, y_high = panel.y_range or (log_range(ys) if panel.y_log else linear_range(ys))
    sx = Scale(x_low, x_high, panel.x_log, plot_x, plot_w)
    sy = Scale(y_low, y_high, panel.y_log, plot_y, plot_h, flip=True)
    out = [f'<g class="panel" data-title={quoteattr(panel.title)}>',
           text(plot_x + plot_w / 2, top + 18, panel.title, 13, "middle", "bold")]
    for value in ticks(y_low, y_high, panel.y_log):
        out += [f'<line x1="{px(plot_x)}" y1="{px(sy(value))}" x2="{px(plot_x + plot_w)}" '
                f'y2="{px(sy(value))}" stroke="#e3e3e3"/>',
                text(plot_x - 6, sy(value) + 4, number(value), 11, "end", fill="#444")]
    for value in ticks(x_low, x_high, panel.x_log):
        out += [f'<line x1="{px(sx(value))}" y1="{px(plot_y)}" x2="{px(sx(value))}" '
                f'y2="{px(plot_y + plot_h)}" stroke="#e3e3e3"/>',
                text(sx(value), plot_y + plot_h + 15, number(value), 11, "middle", fill="#444")]
    out += [f'<path d="M{px(plot_x)},{px(plot_y)} V{px(plot_y + plot_h)} H{px(plot_x + plot_w)}" '
            'fill="none" stroke="#444"/>',
            text(plot_x + plot_w / 2, top + PANEL_H - 8, panel.x_label, 12, "middle"),
            text(left + 14, plot_y + plot_h / 2, panel.y_label, 12, "middle", rotate=True)]
    for series in panel.series:
        out += draw_series(series, [(sx(x), sy(y)) for x, y in series.points], markers[series.label])
    return [*out, "</g>"]


def draw_series(series: Series, points: list[tuple[float, float]], kind: str) -> list[str]:
    """A series' line and a marker at each point, the value in the marker's tooltip."""
    dash = f' stroke-dasharray="{series.dash}"' if series.dash else ""
    path = " ".join(f"{'M' if i == 0 else 'L'}{px(x)},{px(y)}" for i, (x, y) in enumerate(points))
    out = [f'<g class="series" data-series={quoteattr(series.label)}>',
           f'<path d="{path}" fill="none" stroke="{series.colour}" stroke-width="2"{dash}/>']
    for (x, y), (vx, vy) in zip(points, series.points, strict=True):
        out.append(f"<g>{marker(kind, x, y, series.colour)}"
                   f"<title>{escape(f'{series.label}: {number(vx)} -> {vy:.3g}')}</title></g>")
    return [*out, "</g>"]


def legend(chart: Chart, width: float, top: float,
           markers: dict[str, str]) -> tuple[list[str], int]:
    """One entry per series label (in order of first appearance), wrapped to the width; the
    entries and the number of rows they take."""
    entries: dict[str, Series] = {}
    for panel in chart.panels:
        for series in panel.series:
            entries.setdefault(series.label, series)
    out, x, row = ['<g class="legend">'], float(PAGE_MARGIN), 0
    for label, series in entries.items():
        needed = 58 + len(label) * CHAR_W
        if x + needed > width - PAGE_MARGIN and x > PAGE_MARGIN:
            x, row = PAGE_MARGIN, row + 1
        y = top + 14 + row * LEGEND_ROW_H
        dash = f' stroke-dasharray="{series.dash}"' if series.dash else ""
        out += [f'<line x1="{px(x)}" y1="{px(y - 4)}" x2="{px(x + 32)}" y2="{px(y - 4)}" '
                f'stroke="{series.colour}" stroke-width="2"{dash}/>',
                marker(markers[label], x + 16, y - 4, series.colour), text(x + 40, y, label)]
        x += needed
    return [*out, "</g>"], row + 1


def render(chart: Chart) -> str:
    """The chart as an SVG document (a white background: readable on dark pages too)."""
    columns = min(chart.columns, len(chart.panels))
    rows = math.ceil(len(chart.panels) / columns)
    width = 2 * PAGE_MARGIN + columns * PANEL_W
    labels = list(dict.fromkeys(s.label for p in chart.panels for s in p.series))
    markers = {label: MARKERS[i % len(MARKERS)] for i, label in enumerate(labels)}
    legend_parts, legend_rows = legend(chart, width, PAGE_MARGIN + TITLE_H, markers)
    panels_top = PAGE_MARGIN + TITLE_H + legend_rows * LEGEND_ROW_H + 8
    notes = [part for note in chart.notes for part in wrapped(note, width - 2 * PAGE_MARGIN)]
    height = panels_top + rows * PANEL_H + len(notes) * NOTE_H + PAGE_MARGIN
    body = [f'<rect width="{width}" height="{px(height)}" fill="#ffffff"/>',
            text(PAGE_MARGIN, PAGE_MARGIN + 18, chart.title, 16, weight="bold"), *legend_parts]
    for i, panel in enumerate(chart.panels):
        body += draw_panel(panel, PAGE_MARGIN + (i % columns) * PANEL_W,
                           panels_top + (i // columns) * PANEL_H, markers)
    for i, note in enumerate(notes):
        body.append(text(PAGE_MARGIN, panels_top + rows * PANEL_H + (i + 0.7) * NOTE_H, note, 11,
                         fill="#555"))
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{px(height)}" '
            f'viewBox="0 0 {width} {px(height)}" font-family="{FONT}" role="img" '
            f"aria-label={quoteattr(chart.title)}>")
    return "\n".join([head, f"<title>{escape(chart.title)}</title>", *body, "</svg>"]) + "\n"


# ---- charts from result files ------------------------------------------------------------------


def mean(cell: Any) -> float:
    """A metric as the result files keep it: a number, or a spread over seeds."""
    return float(cell["mean"] if isinstance(cell, dict) else cell)


def budget_points(summary: dict[str, Any]) -> tuple[tuple[float, float], ...]:
    row = summary["groups"]["all"]
    budgets = sorted(int(key[2:-1]) for key in row if key.startswith("b@") and key.endswith("w"))
    return tuple((float(w), mean(row[f"b@{w}w"])) for w in budgets)


def evidence_chart(results: dict[str, dict[str, Any]]) -> Chart:
    """One panel per suite that has a result file, each system of the file a series."""
    panels = []
    for stem, title, _ in EVAL_PANELS:
        data = results.get(stem)
        if data is None:
            continue
        series = tuple(Series(label, budget_points(data[key]), colour, dash)
                       for key, label, colour, dash in EVAL_SYSTEMS if key in data)
        n = data["summary"]["groups"]["all"]["n"]
        panels.append(Panel(f"{title} ({n:,} questions)", series, "words read",
                            "evidence found (b@W)", y_range=(0.0, 1.0)))
    return Chart("Evidence found against words read, top_k 100", tuple(panels), columns=3, notes=(
        "b@W: the share of a question's evidence messages read in full within the first W words "
        "of the results, over the questions with evidence (synthetic suites: the mean of seeds "
        "1-3).",
        "Drawn by python3 scripts/draw_charts.py from eval_out/*.json; docs/EVAL.md gives the "
        "command that writes each file."))


def environment_note(env: dict[str, Any]) -> str:
    return (f"{env['cpus']} cores shared with other work (load average {env['loadavg_start']:.1f} "
            f"at start, {env['loadavg_end']:.1f} at end): absolute times are noisy; Python "
            f"{env['python']}, SQLite {env['sqlite']}, aml_retriever {env['aml_retriever']} at "
            f"{env['commit']}.")


def search_chart(report: dict[str, Any]) -> Chart:
    sizes = sorted(int(size) for size in report["latency_ms"])
    paths = (("full", "Search, every signal", BLUE, ""), ("lexical", "Search, lexical only", GREEN,
             "2 3"), ("floor", "one FTS5 query (the floor)", VERMILLION, DASHED))
    panels = []
    for k in (10, 100):
        series = tuple(Series(label, tuple((float(size), report["latency_ms"][str(size)]
                                            [f"{path} k={k}"]["p50"]) for size in sizes),
                              colour, dash) for path, label, colour, dash in paths)
        panels.append(Panel(f"top_k {k}", series, "messages in the user's memory",
                            "p50 ms", y_log=True))
    total = report["store_total"]
    return Chart("Search latency against memory size", tuple(panels), columns=2, notes=(
        f"bench/bench_search.py: p50 of {report['params']['queries']} questions x "
        f"{report['params']['rounds']} rounds, each user in a store of {total['messages']:,} "
        f"messages of {total['users']:,} users.", environment_note(report["env"])))


def add_chart(report: dict[str, Any]) -> Chart:
    rows = sorted(report["lengths"], key=lambda r: r["words"])
    paths = (("service", "Add (the service)", BLUE, ""),
             ("searchable", "bare INSERT + FTS5 row", GREEN, "2 3"),
             ("bare", "bare INSERT (the floor)", VERMILLION, DASHED))
    panels = tuple(Panel(title, tuple(Series(label, tuple((float(r["words"]), r["stats"][path][key])
                                                          for r in rows), colour, dash)
                                      for path, label, colour, dash in paths),
                         "words a message", unit, y_log=True)
                   for title, key, unit in (("messages a second", "msg_per_s", "messages / s"),
                                            ("words a second", "words_per_s", "words / s")))
    first = rows[0]
    return Chart("Add throughput against message length", panels, columns=2, notes=(
        f"bench/bench_add.py: {first['adds']:,} Adds of 20 messages per path and length, "
        f"synchronous={first['synchronous']}, in-process, one file per user.",
        environment_note(report["env"])))


# (file name, result file stem in --bench-out, the key the chart needs, chart, writing command)
BENCH_CHARTS: tuple[tuple[str, str, str, Callable[[dict[str, Any]], Chart], str], ...] = (
    ("search_latency.svg", "search", "latency_ms", search_chart, "python3 bench/bench_search.py"),
    ("add_throughput.svg", "add", "lengths", add_chart, "python3 bench/bench_add.py"))


# ---- command line ------------------------------------------------------------------------------


def read(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def draw(eval_out: Path, bench_out: Path, charts: Path) -> list[Path]:
    """Every chart that has results, written under `charts`; what is missing said on stderr."""
    written = []
    results = {}
    for stem, title, command in EVAL_PANELS:
        data = read(eval_out / f"{stem}.json")
        if data is None:
            print(f"draw_charts: no {eval_out / stem}.json, so no {title} panel; write it with: "
                  f"{command}", file=sys.stderr)
        else:
            results[stem] = data
    drawn = [("evidence_by_words.svg", evidence_chart(results))] if results else []
    for name, stem, needed, build, command in BENCH_CHARTS:
        report = read(bench_out / f"{stem}.json")
        if report is None or not report.get(needed):
            print(f"draw_charts: no {needed} in {bench_out / stem}.json, so no {name}; write it "
                  f"with: {command}", file=sys.stderr)
        else:
            drawn.append((name, build(report)))
    for name, chart in drawn:
        charts.mkdir(parents=True, exist_ok=True)
        (charts / name).write_text(render(chart), encoding="utf-8")
        written.append(charts / name)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="draw_charts.py", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--eval-out", type=Path, default=ROOT / "eval_out",
                        help="where run_eval.py wrote its results")
    parser.add_argument("--bench-out", type=Path, default=ROOT / "bench_out",
                        help="where the benchmarks wrote their results")
    parser.add_argument("--charts", type=Path, default=ROOT / "docs" / "charts",
                        help="where the SVG files go")
    args = parser.parse_args(argv)
    written = draw(args.eval_out, args.bench_out, args.charts)
    for path in written:
        print(f"wrote {path}")
    return 0 if written else 1


if __name__ == "__main__":
    sys.exit(main())
