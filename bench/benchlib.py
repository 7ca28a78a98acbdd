"""What every benchmark here shares: timestamped progress on stderr, and the run-report-write
main loop (work directory, kept or removed; JSON and Markdown in bench_out/; the table on stdout;
exit 1 when the benchmark's target was missed)."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
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
