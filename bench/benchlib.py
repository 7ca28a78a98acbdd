"""What every benchmark here shares: latency samples and their statistics, timestamped progress
on stderr, and the run-report-write main loop (work directory, kept or removed; JSON and Markdown
in bench_out/; the table on stdout; exit 1 when the benchmark's target was missed)."""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def log(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def run_and_report(name: str, args: Any, run: Callable[[Any, Path], dict[str, Any]],
                   markdown: Callable[[dict[str, Any]], str]) -> int:
    made_temp = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix=f"bench_{name}_")) if made_temp else args.workdir
    root = workdir / f"bench_{name}"
    try:
        report = run(args, root)
    finally:
        if not args.keep:
            shutil.rmtree(workdir if made_temp else root, ignore_errors=True)
        else:
            log(f"kept the stores in {root}")
    text = markdown(report)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.out / f"{name}.md").write_text(text)
    print(text)
    log(f"wrote {args.out / f'{name}.json'} and {args.out / f'{name}.md'}")
    return 0 if report["passed"] else 1


@dataclass
class Samples:
    """Latencies of one path, in nanoseconds, in the order taken (one per query and round)."""
    label: str
    ns: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, float | int]:
        ms = sorted(n / 1e6 for n in self.ns)
        return {"p50": percentile(ms, 50), "p95": percentile(ms, 95), "p99": percentile(ms, 99),
                "mean": statistics.fmean(ms), "min": ms[0], "max": ms[-1], "samples": len(ms)}


def percentile(sorted_ms: list[float], pct: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), on sorted values."""
    if len(sorted_ms) == 1:
        return sorted_ms[0]
    pos = (len(sorted_ms) - 1) * pct / 100
    low = int(pos)
    high = min(low + 1, len(sorted_ms) - 1)
    return sorted_ms[low] + (sorted_ms[high] - sorted_ms[low]) * (pos - low)


def paired_ratio(numerator: Samples, denominator: Samples) -> float:
    """Median over (query, round) of the ratio of two paths' times for the same call: less
    sensitive to noise than a ratio of separately taken percentiles."""
    return statistics.median(a / b for a, b in zip(numerator.ns, denominator.ns, strict=True)
                             if b > 0)
