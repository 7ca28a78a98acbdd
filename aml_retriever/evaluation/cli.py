"""The evaluation commands behind scripts/run_eval.py, run_scan.py, prepare_public_data.py and
replay.py: each is `main(argv) -> int` (0 done, 1 failed, 2 usage), prints its table on stdout,
progress on stderr, and writes JSON + Markdown under --out (default eval_out/, git-ignored).
"""

from __future__ import annotations

import argparse
import itertools
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aml_retriever.common.signals import RetrievalConfig
from aml_retriever.evaluation import (
    ablation,
    dataset,
    experiment,
    metrics,
    public_data,
    report,
    runner,
    scan,
    synthetic,
)
from aml_retriever.evaluation.backends import EvalError, Http

DEFAULT_OUT = "eval_out"


def _example(command: str) -> str:
    return f"example:\n  {command}\n\nexit codes: 0 success, 1 failure (reason on stderr), 2 usage error"


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("seeds must be integers separated by commas") from None
    if not seeds:
        raise argparse.ArgumentTypeError("give at least one seed")
    return seeds


def _top_k(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 100:
        raise argparse.ArgumentTypeError("top-k must be from 1 to 100 (the contract's range)")
    return value


def _data_arguments(parser: argparse.ArgumentParser) -> None:
    data = parser.add_argument_group("data")
    data.add_argument("--suite", default="mixed", choices=(*synthetic.ALL_SUITES, "mixed"))
    data.add_argument("--scale", default="medium", choices=tuple(synthetic.SCALES))
    data.add_argument("--difficulty", default="mixed", choices=synthetic.DIFFICULTY_CHOICES)
    data.add_argument("--seeds", type=_seeds, default=[1, 2, 3], help="comma-separated (default 1,2,3)")
    data.add_argument("--replay", nargs="+", metavar="FILE",
                      help="replay/dataset files or directories instead of synthetic data")
    parser.add_argument("--top-k", type=_top_k, default=runner.DEFAULT_TOP_K)
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="seeds evaluated in parallel processes (in-process runs)")
    parser.add_argument("--out", default=DEFAULT_OUT, help="directory for results (default eval_out)")
    parser.add_argument("--name", help="file name stem of the results")
    parser.add_argument("--store-dir", help="build stores here and keep them (default: temporary)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--answer-window-tokens", type=int, default=0, metavar="N",
                        help="in-process: fill a reader's window of N tokens after the ranked "
                             "evidence (the setting answer_window_tokens; 117760 is the "
                             "leaderboard's); the reports' 'in window' column reads it")
    parser.add_argument("--reader-view", action="store_true",
                        help="in-process: show each returned message with its day, time and "
                             "speaker (the setting reader_view, on for the leaderboard); the "
                             "reports' 'date visible' and 'speaker visible' columns read it")


def _sources(args: argparse.Namespace) -> list[experiment.Source]:
    if args.replay:
        return [experiment.Source("replay", paths=tuple(args.replay))]
    return experiment.synthetic_sources(args.suite, args.scale, args.difficulty, args.seeds)


def _describe(args: argparse.Namespace) -> str:
    if args.replay:
        return f"replay files {', '.join(args.replay)}"
    return (f"suite {args.suite}, scale {args.scale}, difficulty {args.difficulty}, "
            f"seeds {','.join(map(str, args.seeds))}")


def _command(argv: Sequence[str], script: str) -> str:
    return " ".join(["python3", script, *(shlex.quote(a) for a in argv)])


def _experiment(args: argparse.Namespace,
                configs: list[tuple[str, RetrievalConfig]]) -> list[dict[str, Any]]:
    tasks = [experiment.Task(source, tuple(configs), args.top_k,
                             str(Path(args.store_dir) / source.label) if args.store_dir else None,
                             quiet=args.quiet, reference=getattr(args, "reference", False),
                             answer_window_tokens=args.answer_window_tokens,
                             reader_view=args.reader_view)
             for source in _sources(args)]
    return experiment.run_tasks(tasks, args.jobs)


def _records(results: Sequence[dict[str, Any]], config: str) -> list[dict[str, Any]]:
    return [dict(r, seed_label=res["label"]) for res in results
            for r in res["configs"][config].get("records", [])]


# ---- run_eval --------------------------------------------------------------------------------

def run_eval(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="run_eval.py", epilog=_example(
        "python3 scripts/run_eval.py --suite mixed --scale medium --seeds 1,2,3 --ablation"),
        formatter_class=argparse.RawDescriptionHelpFormatter, description=(
        "Evaluate retrieval on synthetic suites (or replay files), in-process or over HTTP."))
    _data_arguments(parser)
    parser.add_argument("--ablation", action="store_true",
                        help="one run per ranking signal switched off, plus all-on and lexical-only")
    parser.add_argument("--url", help="evaluate a live server instead of the in-process service")
    parser.add_argument("--api-key", default=os.environ.get("AML_API_KEY"))
    parser.add_argument("--user-prefix", default="", help="prefix of user and request ids (HTTP reruns)")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight (HTTP)")
    parser.add_argument("--retries", type=int, default=3, help="retries of a failed request (HTTP)")
    parser.add_argument("--no-keep-alive", action="store_true", help="a new connection per request (HTTP)")
    parser.add_argument("--write-data", metavar="DIR", help="write the generated datasets and stop")
    parser.add_argument("--reference", action="store_true",
                        help="also answer with the plain character-bigram BM25 reference and put "
                             "its table beside ours (in-process)")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if (args.ablation or args.reference) and args.url:
        parser.error("--ablation and --reference need the in-process service")
    started = time.perf_counter()
    try:
        if args.write_data:
            return _write_data(args)
        if args.url:
            return _run_http(args, argv, started)
        configs = ablation.configs() if args.ablation else [(ablation.BASELINE, RetrievalConfig())]
        results = _experiment(args, configs)
    except (EvalError, ValueError, OSError) as exc:
        print(f"run_eval: {exc}", file=sys.stderr)
        return 1
    per_config = experiment.by_config(results)
    seconds = time.perf_counter() - started
    default_stem = "eval-replay" if args.replay else f"eval-{args.suite}-{args.scale}-{args.difficulty}"
    stem = args.name or default_stem
    command = _command(argv, "scripts/run_eval.py")
    summary = runner.combine_seeds(per_config[ablation.BASELINE])
    notes = [f"`{command}`", "", f"{_describe(args)}; top_k {args.top_k}; in-process; "
             f"{seconds:.1f} s wall; metric means over seeds (docs/EVAL.md defines them).", "",
             _sizes(results)]
    markdown = report.run_markdown(f"Evaluation: {_describe(args)}", summary, notes)
    data: dict[str, Any] = {"command": command, "seconds": round(seconds, 2), "top_k": args.top_k,
                            "summary": summary, "seeds": [_seed_entry(r) for r in results]}
    if args.reference:
        reference = runner.combine_seeds(per_config[experiment.REFERENCE])
        markdown += "\n## The plain reference (character-bigram BM25), same questions\n\n" + \
            report.metrics_table(reference) + "\n"
        data["reference"] = reference
    if args.ablation:
        stem += "-ablation"
        markdown += "\n" + ablation.markdown(per_config, "Ablation", command)
        data["ablation"] = {name: runner.combine_seeds(s) for name, s in per_config.items()}
        data["ablation_deltas"] = {name: {k: v.as_dict() if v else None for k, v in cells.items()}
                                   for name, cells in ablation.deltas(per_config)}
    path = report.write(args.out, stem, data, markdown, _records(results, ablation.BASELINE))
    print(markdown)
    print(f"wrote {path} ({seconds:.1f} s)", file=sys.stderr)
    return 0


def _sizes(results: Sequence[dict[str, Any]]) -> str:
    parts = []
    for r in results:
        meta = r["meta"]
        add = next(iter(r["adds"].values()), {})
        parts.append(f"{r['label']}: {meta.get('users')} users, {meta.get('messages')} messages, "
                     f"{meta.get('questions')} questions, add {add.get('messages_per_s')} msg/s")
    return "; ".join(parts) + "."


def _seed_entry(result: dict[str, Any]) -> dict[str, Any]:
    return {"label": result["label"], "meta": result["meta"], "adds": result["adds"],
            "seconds": result["seconds"],
            "summaries": {name: entry["summary"] for name, entry in result["configs"].items()}}


def _write_data(args: argparse.Namespace) -> int:
    out = Path(args.write_data)
    out.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        data = synthetic.generate_json(args.suite, args.scale, args.difficulty, seed)
        path = out / f"{args.suite}-{args.scale}-{args.difficulty}-seed{seed}.json"
        path.write_text(dataset.dumps(data), encoding="utf-8")
        print(f"{path}: {data['users']} users, {data['messages']} messages, {data['questions']} questions")
    return 0


def _run_http(args: argparse.Namespace, argv: Sequence[str], started: float) -> int:
    backend = Http(args.url, args.api_key, retries=args.retries, keep_alive=not args.no_keep_alive)
    summaries, records, adds = [], [], []
    try:
        for source in _sources(args):
            conversations, _ = source.load()
            conversations = [dataset.with_prefix(c, args.user_prefix) for c in conversations]
            progress = None if args.quiet else sys.stderr
            adds.append(runner.add_all(backend, conversations, args.concurrency, progress,
                                       f"[{source.label}] add").as_dict())
            outcomes = runner.search_all(backend, conversations, args.top_k, args.concurrency, progress,
                                         f"[{source.label}] search")
            seed_records = runner.score(outcomes)
            summaries.append(runner.summarise(seed_records))
            records += [dict(r, seed_label=source.label) for r in seed_records]
    finally:
        backend.close()
    seconds = time.perf_counter() - started
    summary = runner.combine_seeds(summaries)
    command = _command(argv, "scripts/run_eval.py")
    markdown = report.run_markdown(f"Evaluation over HTTP: {_describe(args)}", summary,
                                   [f"`{command}`", "", f"{args.url}; {seconds:.1f} s wall."])
    stem = args.name or f"eval-http-{args.suite}-{args.scale}-{args.difficulty}"
    path = report.write(args.out, stem, {"command": command, "summary": summary, "adds": adds,
                                         "seconds": round(seconds, 2)}, markdown, records)
    print(markdown)
    print(f"wrote {path}", file=sys.stderr)
    return 0


# ---- run_scan --------------------------------------------------------------------------------

def run_scan(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="run_scan.py", epilog=_example(
        "python3 scripts/run_scan.py --grid weight_date=0.25,0.5,1 --metric MRR"),
        formatter_class=argparse.RawDescriptionHelpFormatter, description=(
        "Scan a grid of numeric retrieval settings; rank by a metric, guarding Recall@20."))
    _data_arguments(parser)
    parser.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2",
                        help="values of one setting (repeatable); tuples as 2+3; see --list")
    parser.add_argument("--metric", default="MRR", choices=(*metrics.METRIC_KEYS, "AUROC"))
    parser.add_argument("--tolerance", type=float, default=0.0,
                        help="how far mean R@20 may fall below the default's and still pass")
    parser.add_argument("--list", action="store_true", help="print the scannable settings and stop")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if args.list:
        for name, default in scan.scannable().items():
            print(f"{name} (default {default})")
        return 0
    if not args.grid:
        parser.error("give at least one --grid NAME=V1,V2 (see --list)")
    try:
        configs = scan.configs(scan.parse_grid(args.grid))
    except ValueError as exc:
        parser.error(str(exc))
    started = time.perf_counter()
    try:
        results = _experiment(args, configs)
    except (EvalError, ValueError, OSError) as exc:
        print(f"run_scan: {exc}", file=sys.stderr)
        return 1
    per_config = experiment.by_config(results)
    ranked = scan.rank(per_config, args.metric, args.tolerance)
    command = _command(argv, "scripts/run_scan.py")
    markdown = scan.markdown(ranked, args.metric, f"Scan: {_describe(args)}", command)
    data = {"command": command, "metric": args.metric, "seconds": round(time.perf_counter() - started, 2),
            "ranked": [{"name": r.name, "metric": r.metric.as_dict(), "R@20": r.guard.as_dict(),
                        "R@20_delta": r.guard_delta, "passes": r.passes} for r in ranked],
            "summaries": {name: runner.combine_seeds(s) for name, s in per_config.items()}}
    path = report.write(args.out, args.name or f"scan-{args.suite}-{args.scale}-{args.difficulty}",
                        data, markdown)
    print(markdown)
    print(f"wrote {path}", file=sys.stderr)
    return 0


# ---- prepare_public_data ---------------------------------------------------------------------

def prepare(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="prepare_public_data.py", epilog=_example(
        "python3 scripts/prepare_public_data.py --locomo data/locomo10.json --out eval_out/replay"),
        formatter_class=argparse.RawDescriptionHelpFormatter, description=(
        "Convert LoCoMo and LongMemEval files (given by path) into replay files."))
    parser.add_argument("--locomo", nargs="+", default=[], metavar="PATH",
                        help="locomo10.json, per-conversation files, or a directory of them")
    parser.add_argument("--longmemeval", nargs="+", default=[], metavar="PATH",
                        help="longmemeval_s.json / longmemeval_oracle.json")
    parser.add_argument("--limit", type=int, help="convert at most this many LongMemEval questions")
    parser.add_argument("--out", default=os.path.join(DEFAULT_OUT, "replay"))
    args = parser.parse_args(argv)
    if not args.locomo and not args.longmemeval:
        parser.error("give --locomo and/or --longmemeval")
    totals = {"files": 0, "turns": 0, "adds": 0, "questions": 0, "evidence_dropped": 0,
              "questions_without_evidence": 0}
    try:
        replays = [*public_data.locomo_files(args.locomo),
                   *public_data.longmemeval_files(args.longmemeval, args.limit)]
        for replay in replays:
            path = public_data.write_replay(replay, args.out)
            stats = replay["stats"]
            totals["files"] += 1
            for key in ("turns", "adds", "questions", "evidence_dropped", "questions_without_evidence"):
                totals[key] += stats[key]
            if replay["source"] == "locomo" or len(replays) <= 20:
                print(f"{path}: {stats['sessions']} sessions, {stats['turns']} turns, {stats['adds']} adds, "
                      f"{stats['questions']} questions, {stats['evidence_dropped']} evidence ids dropped")
    except (public_data.ConversionError, OSError, KeyError, ValueError) as exc:
        print(f"prepare_public_data: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print("total: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in totals.items()))
    return 0


# ---- replay ----------------------------------------------------------------------------------

def replay(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="replay.py", epilog=_example(
        "python3 scripts/replay.py --url http://127.0.0.1:8080 --replay eval_out/replay/"),
        formatter_class=argparse.RawDescriptionHelpFormatter, description=(
        "Run the Adds and Searches of replay files against a live server; report metrics, Add "
        "throughput and Search latency."))
    parser.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--api-key", default=os.environ.get("AML_API_KEY"))
    parser.add_argument("--replay", nargs="+", required=True, metavar="FILE",
                        help="replay/dataset files or directories")
    parser.add_argument("--top-k", type=_top_k, default=runner.DEFAULT_TOP_K)
    parser.add_argument("--user-prefix", default="", help="prefix of user and request ids (for reruns)")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--skip-add", action="store_true", help="only search (the Adds are already there)")
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--retries", type=int, default=3)
    parser.add_argument("--no-keep-alive", action="store_true",
                        help="a new connection per request (keep-alive is the default)")
    parser.add_argument("--name", default="server")
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--quiet", action="store_true")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    progress = None if args.quiet else sys.stderr
    started = time.perf_counter()
    backend = Http(args.url, args.api_key, args.timeout, args.retries, keep_alive=not args.no_keep_alive)
    try:
        conversations = [dataset.with_prefix(c, args.user_prefix) for c in dataset.load_many(args.replay)]
        add = None if args.skip_add else runner.add_all(backend, conversations, args.concurrency, progress)
        outcomes = runner.search_all(backend, conversations, args.top_k, args.concurrency, progress)
    except ValueError as exc:  # files missing or not readable as replay files: said in full
        print(f"replay: {exc}", file=sys.stderr)
        return 1
    except (EvalError, OSError, KeyError) as exc:
        print(f"replay: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        backend.close()
    records = runner.score(outcomes)
    summary = runner.combine_seeds([runner.summarise(records)])
    search_ms = metrics.percentiles([o.latency_ms for o in outcomes])
    violations = contract_violations(outcomes, args.top_k)
    command = _command(argv, "scripts/replay.py")
    lines = [f"`{command}`", "",
             f"{len(conversations)} users, {len(outcomes)} questions; top_k {args.top_k}; "
             f"concurrency {args.concurrency}; "
             f"{'fresh connections' if args.no_keep_alive else 'keep-alive'}; {backend.retried} retries."]
    if add is not None:
        a = add.as_dict()
        lines.append(f"Add: {a['adds']} Adds / {a['messages']} messages in {a['seconds']:.1f} s "
                     f"({a['adds_per_s']} Adds/s, {a['messages_per_s']} messages/s), latency "
                     + _percentile_text(a["latency_ms"]) + ".")
    lines.append("Search: latency " + _percentile_text(search_ms) + ", contract violations "
                 + (", ".join(f"{k} {v}" for k, v in violations.items()) or "none") + ".")
    markdown = report.run_markdown(f"Replay: {args.name}", summary, lines)
    data = {"command": command, "url": args.url, "summary": summary, "add": add.as_dict() if add else None,
            "search": {"questions": len(outcomes), "latency_ms": search_ms,
                       "contract_violations": violations},
            "retries": backend.retried, "seconds": round(time.perf_counter() - started, 2)}
    path = report.write(args.out, f"replay-{args.name}", data, markdown, records)
    print(markdown)
    print(f"wrote {path}", file=sys.stderr)
    return 0


def _percentile_text(values: dict[str, float]) -> str:
    if not values:
        return "n/a"
    return "/".join(f"{values[k]:.1f}" for k in ("p50", "p95", "p99")) + " ms (p50/p95/p99)"


def contract_violations(outcomes: Sequence[runner.Outcome], top_k: int) -> dict[str, int]:
    """Per rule, how many Searches broke it: scores present and non-increasing, at most top_k."""
    counts: dict[str, int] = {}

    def count(rule: str) -> None:
        counts[rule] = counts.get(rule, 0) + 1

    for outcome in outcomes:
        scores = [r.score for r in outcome.results]
        if any(s is None for s in scores):
            count("score_missing")
        elif any(a < b for a, b in itertools.pairwise(scores)):  # type: ignore[operator]
            count("scores_not_descending")
        if len(outcome.results) > top_k:
            count("more_than_top_k")
    return counts
