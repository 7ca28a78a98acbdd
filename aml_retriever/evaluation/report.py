"""Markdown tables and result files for evaluation runs (formatting only, no measurement)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aml_retriever.evaluation import metrics

MAIN_COLUMNS = ("R@1", "R@5", "R@10", "R@20", "R@50", "R@100", "all@20", "MRR", "nDCG@10",
                "b@200w", "b@500w", "b@1000w", "b@2000w", "in window", *metrics.READER_KEYS)
CATEGORY_COLUMNS = ("R@1", "R@5", "R@20", "all@20", "MRR", "b@500w", "b@1000w", *metrics.READER_KEYS)


def _value(cell: Any) -> float | None:
    """A metric cell as a number: a plain float (one run) or the mean of a seed spread."""
    if isinstance(cell, dict):
        return cell.get("mean")
    return cell if isinstance(cell, int | float) else None


def fmt(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _label(group: str) -> str:
    return "**all answerable**" if group == "all" else re.sub(r"(suite|category|difficulty):", "", group)


def metrics_table(summary: dict[str, Any], categories: bool = False) -> str:
    """One row per group (all, suites, difficulties; or suite/category rows)."""
    columns = CATEGORY_COLUMNS if categories else MAIN_COLUMNS
    rows = []
    for group, row in summary["groups"].items():
        if ("/" in group) != categories:
            continue
        rows.append([_label(group), str(row["n"]), *(fmt(_value(row.get(c))) for c in columns),
                     f"{_value(row.get('words@5')) or 0:.0f}", f"{_value(row.get('words')) or 0:.0f}"])
    return table(["", "n", *columns, "words@5", "words"], rows)


def adversarial_line(summary: dict[str, Any]) -> str:
    adv = summary["adversarial"]
    if not adv.get("n"):
        return "Adversarial questions without evidence (answer not in memory): none in this run."
    return (f"Adversarial (answer not in memory): n={adv['n']}, confidence AUROC "
            f"{fmt(_value(adv.get('confidence_auroc')))} (1.0: every answerable question's top score "
            f"beats every adversarial one of the same user), empty results "
            f"{fmt(_value(adv.get('empty_rate')))}, mean results {fmt(_value(adv.get('mean_results')))}.")


def seed_ranges(summary: dict[str, Any], keys: Sequence[str] = ("R@5", "R@20", "MRR", "b@1000w")) -> str:
    row = summary["groups"].get("all")
    if not row or row.get("seeds", 1) < 2:
        return ""
    parts = [f"{k} {row[k]['min']:.3f}-{row[k]['max']:.3f}" for k in keys if isinstance(row.get(k), dict)]
    return f"Range over {row['seeds']} seeds (all answerable): " + ", ".join(parts) + "."


def run_markdown(title: str, summary: dict[str, Any], notes: Sequence[str] = ()) -> str:
    parts = [f"# {title}", "", *notes, "", metrics_table(summary), "", seed_ranges(summary), "",
             adversarial_line(summary), "", "## By category", "", metrics_table(summary, categories=True)]
    return "\n".join(p for p in parts if p is not None).replace("\n\n\n", "\n\n") + "\n"


def write(out_dir: str | Path, name: str, data: dict[str, Any], markdown: str,
          records: Sequence[dict[str, Any]] = ()) -> Path:
    """<out>/<name>.json, <name>.md and, when there are records, <name>.questions.jsonl."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    (out / f"{name}.md").write_text(markdown, encoding="utf-8")
    if records:
        with open(out / f"{name}.questions.jsonl", "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def delta_table(rows: Sequence[tuple[str, dict[str, metrics.Spread | None]]], columns: Sequence[str]) -> str:
    """Rows of (name, {column: spread of the deltas over seeds}) as `+mean [min, max]` cells."""
    body = []
    for name, cells in rows:
        row = [name]
        for column in columns:
            cell = cells.get(column)
            row.append("-" if cell is None else
                       f"{cell.mean:+.3f} [{cell.low:+.3f}, {cell.high:+.3f}]")
        body.append(row)
    return table(["configuration", *columns], body)
