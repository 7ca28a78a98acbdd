"""Run the whole benchmark suite and judge every target of the speed-and-scale issue in one table.

What it does
------------
Runs each benchmark as its own process (so none inherits another's caches, threads or memory),
in an order that builds the shared store of other users once and reuses it (search, isolation,
footprint), with one work directory for all of them:

- bench_search.py     Search p50 vs one FTS5 query, users of 1k/10k/100k in a 1M-message store
- bench_isolation.py  a user's Search alone vs among 1M messages of other users
- bench_add.py        in-process Add throughput vs raw SQLite inserts of the same messages,
                      and by message length (10 to 1,000 words)
- bench_http.py       the real server: HTTP overhead, Search/Add/mix throughput with 1/4/16 clients
- bench_footprint.py  bytes per message, Search over random users and server RSS at 10k/100k/1M
- bench_lifecycle.py  recall and Search with the lifecycle filters on vs bypassed
- bench_long.py       top_k 100 Search and Adds of long messages vs one FTS5 query and a naive service
- bench_cluster.py    shards behind HAProxy: Search/Add throughput on 1 vs 2 shards, added latency

then reads their JSON results and writes `bench_out/summary.md`: each target, the measured value
and the verdict. `--quick` runs every benchmark at small sizes (a smoke run of a few minutes; its
verdicts are indicative only, the targets are stated for the full sizes); the default is the
issue's full sizes (the 1M-message store takes a few minutes to build, once per kept workdir).

Usage
-----
    python3 bench/run_all.py --quick                            # a few minutes
    python3 bench/run_all.py --workdir /var/tmp/bench --keep    # full sizes, stores kept
    python3 bench/run_all.py --only search,footprint --workdir /var/tmp/bench --keep

Progress of every benchmark goes to stderr; their tables to bench_out/<name>.md, the summary to
bench_out/summary.md (and stdout). Exit status: 0 when every benchmark ran, whatever its verdicts
(a missed target is a FAIL in the table, not an error: on a busy machine a quick run misses some);
1 when a benchmark could not run (it crashed, or wrote no result); 2 on a usage error. Standard
library only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from benchlib import environment, environment_line, log

Row = tuple[str, str, str]  # (target, measured, verdict)


@dataclass(frozen=True)
class Bench:
    name: str  # bench_NAME.py, bench_out/NAME.json
    quick: tuple[str, ...]  # arguments of the smoke run
    full: tuple[str, ...]  # arguments of the full run (the sizes)
    rows: Callable[[dict[str, Any]], list[Row]]


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def search_rows(r: dict[str, Any]) -> list[Row]:
    total, max_ratio = r["store_total"]["messages"], r["params"]["max_ratio"]
    rows = []
    for row in r["ratios"]:
        latency, k = r["latency_ms"][str(row["size"])], row["top_k"]
        rows.append((f"Search p50 <= {max_ratio:g}x one FTS5 query: {row['size']:,}-message "
                     f"user, top_k {k}, store of {total:,} messages",
                     f"{row['full_floor']:.2f}x ({latency[f'full k={k}']['p50']:.2f} ms vs "
                     f"{latency[f'floor k={k}']['p50']:.2f} ms)", _verdict(row["passed"])))
    return rows


def isolation_rows(r: dict[str, Any]) -> list[Row]:
    warm, p = r["latency_ms"]["warm"], r["params"]
    return [(f"Search p50 among {p['others']:,} messages of other users <= {p['max_ratio']:g}x "
             f"alone ({p['user_messages']:,}-message user), identical results",
             f"{r['p50_ratio']:.2f}x ({warm['crowded: svc.search']['p50']:.2f} vs "
             f"{warm['alone: svc.search']['p50']:.2f} ms), results "
             f"{'identical' if r['results_check']['identical'] else 'DIFFER'}",
             _verdict(r["passed"]))]


def add_rows(r: dict[str, Any]) -> list[Row]:
    out = []
    for row in r["ratios"]:
        stats = r["stats"]
        service, bare = stats[f"service {row['synchronous']}"], stats[f"bare {row['synchronous']}"]
        target = (f"in-process Add >= {r['params']['min_ratio']:.0%} of bare SQLite inserts "
                  f"(msg/s, synchronous={row['synchronous']})")
        measured = (f"{row['service_bare']:.1%} ({service['msg_per_s']:,.0f} vs "
                    f"{bare['msg_per_s']:,.0f} msg/s); {row['service_searchable']:.1%} of "
                    "bare + FTS5")
        out.append((target, measured, _verdict(row["passed"]) if row["judged"]
                    else f"{_verdict(row['passed'])} (not judged)"))
    return out


def http_rows(r: dict[str, Any]) -> list[Row]:
    p, over = r["params"], r["overhead_ms"]
    rows = [(f"HTTP overhead at p50 <= {p['max_overhead_ms']:g} ms (1 keep-alive client)",
             f"{r['http_overhead_ms']:.2f} ms ({over['HTTP Search']['p50']:.2f} vs "
             f"{over['in-process Search']['p50']:.2f} ms in-process)",
             _verdict(r["verdicts"]["http_overhead"]))]
    rate = r["add_rate_4_clients"]
    rows.append((f"Adds over HTTP, 4 clients, 20-message Adds >= {p['min_add_rate']:,} msg/s",
                 "not measured" if rate is None else f"{rate:,.0f} msg/s",
                 _verdict(r["verdicts"]["add_rate_4_clients"])))
    if r["errors"]:
        rows.append(("no failed requests under load", f"{r['errors']} failed", "FAIL"))
    return rows


def footprint_rows(r: dict[str, Any]) -> list[Row]:
    p, rows = r["params"], []
    for s in r["sizes"]:
        rows.append((f"database <= {p['max_bytes_ratio']:g}x raw content bytes, "
                     f"{s['messages']:,} messages ({s['users']:,} users)",
                     f"{s['ratio']:.2f}x ({s['bytes_per_message']:,.0f} vs "
                     f"{s['content_per_message']:,.0f} bytes a message)",
                     _verdict(s["passed_bytes"])))
    one = r["one_message"]
    rows.append(("a user of one short message <= 64 KiB on disk",
                 f"{one['bytes']:,} bytes ({one['pages']} pages of {one['page_size']:,})",
                 _verdict(one["passed"])))
    for s in r["sizes"]:
        m = s["server"]
        rows.append((f"server RSS <= {p['max_rss_mb']:g} MB serving {s['messages']:,} messages "
                     f"({s['users']:,} users)",
                     f"peak {m['hwm_mb']:.0f} MB (idle {m['idle_mb']:.0f} MB, after "
                     f"{m['requests']:,} requests {m['rss_mb']:.0f} MB)",
                     _verdict(s["passed_rss"])))
    return rows


def cluster_rows(r: dict[str, Any]) -> list[Row]:
    if "skipped" in r:
        return [("shards behind HAProxy", f"not measured: {r['skipped']}", "PASS (not judged)")]
    p, added, ratios, v = r["params"], r["added_ms"], r["ratios"], r["verdicts"]
    rows = [(f"HAProxy adds <= {p['max_added_ms']:g} ms to a Search at p50",
             f"{added['p50']:.2f} ms (p99 {added['p99']:.2f} ms)", _verdict(v["added_p50"]))]
    for workload, label in (("search", "Searches"), ("add", "Adds")):
        rows.append((f"{label}/s with {p['clients']} clients: 2 shards >= "
                     f"{p['min_ratio']:g}x 1 shard", f"{ratios[workload]['median']:.2f}x",
                     _verdict(v[f"{workload}_ratio"])))
    return rows


def lifecycle_rows(r: dict[str, Any]) -> list[Row]:
    p = r["params"]
    return [(f"{row['read']} with the lifecycle filters <= {p['max_ratio']:g}x bypassed "
             f"({p['statements']:,}-statement memory)", f"{row['ratio']:.3f}x",
             _verdict(row["passed"])) for row in r["ratios"]]


def long_rows(r: dict[str, Any]) -> list[Row]:
    return [(v["what"] + (f" <= {v['target']:g}x" if v["lower_is_better"] else f" >= {v['target']:.0%}"),
             f"{v['value']:.2f}x" if v["lower_is_better"] else f"{v['value']:.1%}",
             _verdict(v["passed"])) for v in r["verdicts"]]


QUICK_OTHERS = "50000"
BENCHES = (
    Bench("search", ("--sizes", "1000,10000", "--others", QUICK_OTHERS, "--queries", "50",
                     "--rounds", "2"), (), search_rows),
    Bench("isolation", ("--others", QUICK_OTHERS, "--queries", "50", "--rounds", "3",
                        "--reopen-rounds", "1"), (), isolation_rows),
    Bench("footprint", ("--sizes", f"10000,{QUICK_OTHERS}", "--searches", "200",
                        "--rss-requests", "1000"), (), footprint_rows),
    Bench("add", ("--adds", "200", "--length-adds", "10"), (), add_rows),
    Bench("http", ("--users", "4", "--user-messages", "500", "--seconds", "2", "--queries", "50",
                   "--rounds", "2"), (), http_rows),
    Bench("lifecycle", ("--statements", "500", "--messages", "2000", "--queries", "50",
                        "--rounds", "2"), (), lifecycle_rows),
    Bench("long", ("--quick",), ("--sizes", "1000,10000,100000"), long_rows),
    Bench("cluster", ("--users", "4", "--user-messages", "500", "--seconds", "2", "--rounds", "1",
                      "--queries", "50"), (), cluster_rows),
)


def run_bench(bench: Bench, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """One benchmark in its own process; its tables go to bench_out, its progress to stderr."""
    argv = [sys.executable, str(BENCH_DIR / f"bench_{bench.name}.py"),
            *(bench.quick if args.quick else bench.full),
            "--out", str(args.out), "--workdir", str(workdir), "--keep"]
    log(f"== bench_{bench.name}.py {' '.join(argv[2:])}")
    result = args.out / f"{bench.name}.json"
    result.unlink(missing_ok=True)  # a result left by an earlier run must not pass for this one's
    started = time.perf_counter()
    code = subprocess.run(argv, cwd=REPO_ROOT, stdout=subprocess.DEVNULL).returncode
    seconds = time.perf_counter() - started
    log(f"== bench_{bench.name}.py exited {code} after {seconds:,.0f} s")
    ran = code in (0, 1) and result.exists()  # each script exits 1 when it misses its target
    rows: list[Row] = (bench.rows(json.loads(result.read_text())) if ran else
                       [(f"bench_{bench.name}.py runs", f"exit status {code}, no result", "ERROR")])
    return {"name": bench.name, "exit": code, "seconds": seconds, "rows": rows, "ran": ran}


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def markdown(runs: list[dict[str, Any]], quick: bool, out: Path, env: dict[str, Any]) -> str:
    mode = ("quick (small sizes: a smoke run; verdicts are indicative, the targets are stated for "
            "the full sizes)" if quick else "full (the issue's sizes)")
    lines = ["# Benchmark summary", "", f"Mode: {mode}. Run on {time.strftime('%Y-%m-%d %H:%M')}.",
             "", "| benchmark | target | measured | verdict |", "|---|---|---|---|"]
    for run in runs:
        for target, measured, verdict in run["rows"]:
            lines.append(f"| {run['name']} | {target} | {measured} | {_said(verdict, quick)} |")
    lines += ["", "| benchmark | exit status | wall time s | details |", "|---|---:|---:|---|"]
    for run in runs:
        missed = " (a target missed)" if run["exit"] == 1 and run["ran"] else ""
        lines.append(f"| {run['name']} | {run['exit']}{missed} | {run['seconds']:,.0f} | "
                     f"{_shown(out / (run['name'] + '.md'))} |")
    verdicts = [verdict for run in runs for _, _, verdict in run["rows"]]
    met = sum(1 for v in verdicts if v == "PASS" or v.endswith("(not judged)"))
    broken = [run["name"] for run in runs if not run["ran"]]
    sizes = (" at the quick sizes (indicative: the targets are stated for the full sizes, which "
             "`bench/run_all.py` without --quick judges)") if quick else ""
    lines += ["", f"{met} of {len(verdicts)} targets met{sizes}"
              + (f"; could not run: {', '.join(broken)}." if broken else "."),
              "", environment_line(env), ""]
    return "\n".join(lines)


def _said(verdict: str, quick: bool) -> str:
    """A verdict as the summary says it: a quick run's miss is indicative, not a failure (a
    newcomer read "FAIL" rows, then an exit status of 0, as a broken install)."""
    return "below target (indicative)" if quick and verdict == "FAIL" else verdict


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="run_all.py", description="Run every benchmark and summarise the targets.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="small sizes: a smoke run of a few minutes")
    parser.add_argument("--only", default="",
                        help="comma-separated benchmarks to run (default: all of "
                             f"{', '.join(b.name for b in BENCHES)})")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench_out",
                        help="directory for every result and summary.md")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="one work directory for every benchmark (the shared store of other "
                             "users is built there once); default: a new temporary directory")
    parser.add_argument("--keep", action="store_true",
                        help="keep the stores for the next run with the same --workdir")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = set(names) - {b.name for b in BENCHES}
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    args.benches = [b for b in BENCHES if not names or b.name in names]
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    loadavg_start = os.getloadavg()[0]
    made_temp = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="bench_all_")) if made_temp else args.workdir
    existed = {p.name for p in workdir.iterdir()} if workdir.exists() else set()
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        runs = [run_bench(bench, args, workdir) for bench in args.benches]
    finally:
        if made_temp and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        elif not args.keep:  # remove what this run made, keep what was there before
            for path in workdir.iterdir():
                if path.name not in existed:
                    shutil.rmtree(path, ignore_errors=True)
        else:
            log(f"kept the stores in {workdir}")
    text = markdown(runs, args.quick, args.out, environment(loadavg_start))
    (args.out / "summary.md").write_text(text)
    print(text)
    log(f"wrote {args.out / 'summary.md'}")
    return 0 if all(run["ran"] for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
