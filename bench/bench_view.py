"""What the reader's view costs a Search: the same top_k 100 Search with `reader_view` on and off,
side by side in one run, with the answer window off (a reader of the ranked evidence) and on (the
leaderboard's launch, scripts/serve_leaderboard.sh), in-process and over HTTP.

What it does
------------
1. Reads replay files (`--replay`: files or folders of the evaluation's replay format, e.g. the
   BEAM development users; the benchmark ships no data of its own) and Adds every user into one
   store, in-process.
2. In-process: asks every question of every user as a top_k 100 Search with the view off and
   on, alternating which goes first each question, over `--rounds` rounds, on one service whose
   setting is switched between the two calls; with the window off, then on (117,760 tokens).
3. Over HTTP: two servers over the same store (`serve --answer-window-tokens 117760`, one with
   `--reader-view`), each question sent to both, alternating which first.
4. Reports p50, p95 and the paired median ratio (view on / off) of each.

Target: view on <= 1.15x view off at p50, in-process and over HTTP.

Usage
-----
    python3 bench/bench_view.py --replay ../shared/eval/external/data/beam/100K \\
        ../shared/eval/external/data/beam/500K

Results go to `bench_out/view.json` and `bench_out/view.md`; exit status 0 when every ratio is
within the target. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchlib import (
    Client,
    Samples,
    ServerProcess,
    add_run_args,
    environment,
    environment_line,
    git_state,
    log,
    paired_ratio,
    run_and_report,
)

from aml_retriever.evaluation.backends import InProcess

WINDOW = 117_760  # the leaderboard reader's window
TOP_K = 100
MAX_RATIO = 1.15


def replay_files(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        found += sorted(p for p in path.glob("*.json") if not p.name.startswith("_")) \
            if path.is_dir() else [path]
    return found


def run(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    started_load = os.getloadavg()[0]
    root.mkdir(parents=True, exist_ok=True)
    db = root / "aml.db"
    service = InProcess(db)
    questions: list[tuple[str, str]] = []
    for path in replay_files(args.replay):
        conversation = json.loads(path.read_text(encoding="utf-8"))
        for add in conversation["adds"]:
            service.add(add)
        questions += [(conversation["user_id"], q["question"]) for q in conversation["questions"]]
    log(f"{len(questions)} questions")
    samples: dict[str, Samples] = {}
    for window in (0, WINDOW):
        service.service.answer_window_tokens = window
        off = samples[f"window {window}, view off"] = Samples(f"window {window}, view off")
        on = samples[f"window {window}, view on"] = Samples(f"window {window}, view on")
        for round_ in range(args.rounds):
            for i, (user, question) in enumerate(questions):
                body = {"user_id": user, "query": question, "top_k": TOP_K}
                for label in (("off", "on") if (i + round_) % 2 == 0 else ("on", "off")):
                    service.service.reader_view = label == "on"
                    began = time.perf_counter_ns()
                    service.search(body)
                    (on if label == "on" else off).ns.append(time.perf_counter_ns() - began)
    service.close()
    http_off, http_on = Samples("HTTP, window on, view off"), Samples("HTTP, window on, view on")
    window_flag = ("--answer-window-tokens", str(WINDOW))
    with ServerProcess(db, root / "off.log", *window_flag) as plain, \
            ServerProcess(db, root / "on.log", *window_flag, "--reader-view") as viewed:
        clients = {"off": Client(plain.port), "on": Client(viewed.port)}
        for round_ in range(args.rounds):
            for i, (user, question) in enumerate(questions):
                body = {"user_id": user, "query": question, "top_k": TOP_K}
                for label in (("off", "on") if (i + round_) % 2 == 0 else ("on", "off")):
                    began = time.perf_counter_ns()
                    status, _ = clients[label].post("/search", body)
                    assert status == 200, status
                    (http_on if label == "on" else http_off).ns.append(time.perf_counter_ns() - began)
        for client in clients.values():
            client.close()
    samples[http_off.label], samples[http_on.label] = http_off, http_on
    ratios = {"in-process, window off": paired_ratio(samples["window 0, view on"],
                                                      samples["window 0, view off"]),
              "in-process, window on": paired_ratio(samples[f"window {WINDOW}, view on"],
                                                     samples[f"window {WINDOW}, view off"]),
              "HTTP, window on": paired_ratio(http_on, http_off)}
    return {"questions": len(questions), "rounds": args.rounds, "window_tokens": WINDOW,
            "paths": {s.label: s.summary() for s in samples.values()},
            "ratios": ratios, "passed": all(r <= MAX_RATIO for r in ratios.values()),
            "git": git_state(), "environment": environment(started_load)}


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# Reader's view cost ({report['questions']} questions x {report['rounds']} rounds, "
             f"top_k {TOP_K})", "", environment_line(report["environment"]), "",
             "| path | p50 ms | p95 ms |", "|---|---|---|"]
    for label, summary in report["paths"].items():
        lines.append(f"| {label} | {summary['p50']:.1f} | {summary['p95']:.1f} |")
    lines += ["", "| view on / off (paired median) | ratio | target |", "|---|---|---|"]
    for label, ratio in report["ratios"].items():
        lines.append(f"| {label} | {ratio:.2f}x | <= {MAX_RATIO}x |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replay", type=Path, nargs="+", required=True,
                        help="replay files or folders (the users and questions to time)")
    parser.add_argument("--rounds", type=int, default=2)
    add_run_args(parser, "view", "the store", "keep the store for another run")
    args = parser.parse_args()
    return run_and_report("view", args, run, markdown)


if __name__ == "__main__":
    sys.exit(main())
