"""Parameter scan: a grid over the numeric retrieval settings, ranked by one metric.

The scannable names are derived from `RetrievalConfig`: `weight_<signal>` for every signal in
`signals.SIGNALS`, and every other numeric field (`rrf_k`, `candidate_depth`, `window_sizes`,
...), typed by its default value. A grid is the cartesian product of the values given per name;
each point is `RetrievalConfig().with_values(...)`. Points are ranked by the chosen metric's mean
over seeds, with a guard: a point whose mean Recall@20 falls below the default configuration's
ranks after every point that keeps it.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aml_retriever.common.signals import SIGNAL_NAMES, RetrievalConfig
from aml_retriever.evaluation import metrics, report
from aml_retriever.evaluation.ablation import metric_of

DEFAULT = "default"
GUARD_METRIC = "R@20"
# More points than this is almost always a typo in a grid (and hours of runs).
MAX_POINTS = 400


def scannable() -> dict[str, Any]:
    """Every scannable name and its default value."""
    base = RetrievalConfig()
    names: dict[str, Any] = {f"weight_{n}": base.weight(n) for n in SIGNAL_NAMES}
    for f in dataclasses.fields(RetrievalConfig):
        value = getattr(base, f.name)
        if f.name != "weights" and isinstance(value, int | float | tuple):
            names[f.name] = value
    return names


def parse_value(name: str, text: str, default: Any) -> Any:
    """One grid value, typed like the setting's default. Tuples are written with '+' (3+5)."""
    try:
        if isinstance(default, tuple):
            return tuple(int(part) for part in text.split("+"))
        if isinstance(default, int) and not isinstance(default, bool):
            return int(text)
        return float(text)
    except ValueError:
        kind = "integers joined by '+'" if isinstance(default, tuple) else type(default).__name__
        raise ValueError(f"{name} takes {kind}, not {text!r}") from None


def parse_grid(specs: Sequence[str]) -> dict[str, list[Any]]:
    """`name=v1,v2,...` specs as {name: [values]}; unknown names are refused with the list."""
    known = scannable()
    grid: dict[str, list[Any]] = {}
    for spec in specs:
        name, sep, values = spec.partition("=")
        name = name.strip()
        if not sep or not values.strip():
            raise ValueError(f"grid spec {spec!r} must look like name=v1,v2")
        if name not in known:
            raise ValueError(f"unknown setting {name!r}; scannable: {', '.join(known)}")
        grid[name] = [parse_value(name, v.strip(), known[name]) for v in values.split(",") if v.strip()]
    return grid


def point_name(values: Mapping[str, Any]) -> str:
    def show(v: Any) -> str:
        if isinstance(v, tuple):
            return "+".join(str(x) for x in v)
        return f"{v:g}" if isinstance(v, float) else str(v)
    return ",".join(f"{k}={show(v)}" for k, v in values.items()) or DEFAULT


def configs(grid: Mapping[str, Sequence[Any]],
            base: RetrievalConfig | None = None) -> list[tuple[str, RetrievalConfig]]:
    """The default first, then every point of the grid (a point equal to the default is skipped)."""
    base = base or RetrievalConfig()
    names = list(grid)
    points = list(itertools.product(*(grid[n] for n in names)))
    if len(points) > MAX_POINTS:
        raise ValueError(f"the grid has {len(points)} points; at most {MAX_POINTS}")
    out = [(DEFAULT, base)]
    for point in points:
        values = dict(zip(names, point, strict=True))
        config = base.with_values(**values)
        if config != base:
            out.append((point_name(values), config))
    return out


@dataclass(frozen=True)
class Ranked:
    name: str
    metric: metrics.Spread
    guard: metrics.Spread
    guard_delta: float
    passes: bool


def rank(per_config: Mapping[str, Sequence[Mapping[str, Any]]], metric: str,
         tolerance: float = 0.0) -> list[Ranked]:
    """Points by the metric's mean over seeds, best first; those failing the guard last."""
    def spread_of(name: str, key: str) -> metrics.Spread:
        values = [metric_of(s, key) for s in per_config[name]]
        return metrics.spread([v for v in values if v is not None] or [0.0])

    floor = spread_of(DEFAULT, GUARD_METRIC).mean
    out = []
    for name in per_config:
        guard = spread_of(name, GUARD_METRIC)
        delta = guard.mean - floor
        out.append(Ranked(name, spread_of(name, metric), guard, delta, delta >= -tolerance - 1e-12))
    return sorted(out, key=lambda r: (not r.passes, -r.metric.mean, r.name != DEFAULT, r.name))


def markdown(ranked: Sequence[Ranked], metric: str, title: str, command: str) -> str:
    rows = []
    for i, r in enumerate(ranked, start=1):
        rows.append([str(i), f"`{r.name}`", f"{r.metric.mean:.3f} [{r.metric.low:.3f}, {r.metric.high:.3f}]",
                     f"{r.guard.mean:.3f}", report.fmt(r.guard_delta, signed=True),
                     "ok" if r.passes else "drops R@20"])
    table = report.table(["rank", "configuration", f"{metric} mean [min, max]", GUARD_METRIC,
                          f"{GUARD_METRIC} vs default", "guard"], rows)
    return "\n".join([f"# {title}", "", f"`{command}`", "",
                      f"Ranked by {metric} over all answerable questions; a configuration whose "
                      f"mean {GUARD_METRIC} is below the default's ranks last.", "", table, ""])
