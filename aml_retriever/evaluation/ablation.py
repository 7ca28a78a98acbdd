"""Ablation: every ranking signal switched off in turn, against all-on and lexical-only.

The configurations come from `signals.SIGNALS` and `RetrievalConfig.without(name)`, so a signal
added to the table is ablated without touching this file. Each metric is reported as its change
from all-on, per seed, summarised by mean and range over the seeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aml_retriever.common.signals import SIGNALS, RetrievalConfig
from aml_retriever.evaluation import metrics, report

BASELINE = "all-on"
LEXICAL_ONLY = "lexical-only"
# Metrics shown in the delta table; AUROC is the adversarial confidence measure.
DELTA_COLUMNS = ("R@1", "R@5", "R@20", "MRR", "nDCG@10", "b@500w", "b@1000w", "AUROC")


def configs(base: RetrievalConfig | None = None) -> list[tuple[str, RetrievalConfig]]:
    """All-on, lexical-only, then one configuration per signal with that signal off."""
    base = base or RetrievalConfig()
    out = [(BASELINE, base), (LEXICAL_ONLY, RetrievalConfig.lexical_only())]
    out += [(f"-{signal.name}", base.without(signal.name)) for signal in SIGNALS]
    return out


def off_by_default(base: RetrievalConfig | None = None) -> set[str]:
    """Ablation names whose signal already weighs 0 in the base: identical to all-on by design."""
    base = base or RetrievalConfig()
    return {f"-{s.name}" for s in SIGNALS if base.weight(s.name) == 0}


def metric_of(summary: Mapping[str, Any], key: str, group: str = "all") -> float | None:
    if key == "AUROC":
        return summary["adversarial"].get("confidence_auroc")
    row = summary["groups"].get(group)
    return row.get(key) if row else None


DeltaRow = tuple[str, dict[str, metrics.Spread | None]]


def deltas(per_config: Mapping[str, Sequence[Mapping[str, Any]]], columns: Sequence[str] = DELTA_COLUMNS,
           group: str = "all", baseline: str = BASELINE) -> list[DeltaRow]:
    """For every configuration but the baseline: each column's (config - baseline) over the seeds
    (paired by seed), as mean and range; None where a seed lacks the metric."""
    base = per_config[baseline]
    rows = []
    for name, summaries in per_config.items():
        if name == baseline:
            continue
        cells: dict[str, metrics.Spread | None] = {}
        for column in columns:
            diffs = []
            for mine, theirs in zip(summaries, base, strict=True):
                a, b = metric_of(mine, column, group), metric_of(theirs, column, group)
                if a is not None and b is not None:
                    diffs.append(a - b)
            cells[column] = metrics.spread(diffs) if diffs else None
        rows.append((name, cells))
    return rows


def suites_of(summaries: Sequence[Mapping[str, Any]]) -> list[str]:
    names = {g for s in summaries for g in s["groups"] if g.startswith("suite:") and "/" not in g}
    return sorted(names)


def markdown(per_config: Mapping[str, Sequence[Mapping[str, Any]]], title: str, command: str,
             base: RetrievalConfig | None = None) -> str:
    skip = off_by_default(base)
    rows = [(f"{name} (off by default)" if name in skip else name, cells)
            for name, cells in deltas(per_config)]
    seeds = len(per_config[BASELINE])
    lines = [f"# {title}", "", f"`{command}`", "",
             f"Change of each metric against `{BASELINE}` (all answerable questions), mean "
             f"[min, max] over {seeds} seed(s). Negative: the signal helps (switching it off hurts).",
             "", report.delta_table(rows, DELTA_COLUMNS), ""]
    suites = suites_of(per_config[BASELINE])
    if suites:
        lines += ["## Change of R@20 by suite (mean over seeds)", ""]
        header = ["configuration", *(s.removeprefix("suite:") for s in suites)]
        body = []
        for name, _ in rows:
            plain = name.removesuffix(" (off by default)")
            pair = {BASELINE: per_config[BASELINE], plain: per_config[plain]}
            row = [name]
            for suite in suites:
                cell = deltas(pair, ("R@20",), group=suite)[0][1]["R@20"]
                row.append(report.fmt(cell.mean if cell else None, signed=True))
            body.append(row)
        lines += [report.table(header, body), ""]
    return "\n".join(lines)
