"""What the answer window costs a Search: the same top_k 100 Search with `answer_window_tokens`
117,760 and without, side by side in one run, in-process and over HTTP.

What it does
------------
1. Reads replay files (`--replay`: files or folders of the evaluation's replay format, e.g. the
   BEAM development users; the benchmark ships no data of its own) and Adds every user into one
   store, in-process.
2. In-process: asks every question of every user as a top_k 100 Search with the window off and
   on, alternating which goes first each question, over `--rounds` rounds, on one service whose
   setting is switched between the two calls (the same connections and caches serve both).
3. Over HTTP: two servers over the same store (`serve`, one with `--answer-window-tokens
   117760`), each question sent to both, alternating which first.
4. Reports p50, p95 and the paired median ratio (window on / off) of each, and the answer's size.

Target: window on <= 1.5x window off at p50, in-process and over HTTP.

Usage
-----
    python3 bench/bench_window.py --replay ../shared/eval/external/data/beam/100K \\
        ../shared/eval/external/data/beam/500K

Results go to `bench_out/window.json` and `bench_out/window.md`; exit status 0 when both
ratios are within the target. Standard library only.
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
MAX_RATIO = 1.5


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
    off, on = Samples("window off"), Samples("window on")
    words = {"off": [], "on": []}
    for round_ in range(args.rounds):
        for i, (user, question) in enumerate(questions):
            body = {"user_id": user, "query": question, "top_k": TOP_K}
            for label in (("off", "on") if (i + round_) % 2 == 0 else ("on", "off")):
                service.service.answer_window_tokens = WINDOW if label == "on" else 0
                began = time.perf_counter_ns()
                data = service.search(body)
                (on if label == "on" else off).ns.append(time.perf_counter_ns() - began)
                if round_ == 0:
                    words[label].append(sum(len(item["content"].split()) for item in data))
    service.close()
    http_off, http_on = Samples("HTTP window off"), Samples("HTTP window on")
    with ServerProcess(db, root / "off.log") as plain, \
            ServerProcess(db, root / "on.log", "--answer-window-tokens", str(WINDOW)) as filled:
        clients = {"off": Client(plain.port), "on": Client(filled.port)}
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
    ratios = {"in-process": paired_ratio(on, off), "HTTP": paired_ratio(http_on, http_off)}
    return {"questions": len(questions), "rounds": args.rounds, "window_tokens": WINDOW,
            "paths": {s.label: s.summary() for s in (off, on, http_off, http_on)},
            "words_median": {k: sorted(v)[len(v) // 2] for k, v in words.items()},
            "ratios": ratios, "passed": all(r <= MAX_RATIO for r in ratios.values()),
            "git": git_state(), "environment": environment(started_load)}


def markdown(report: dict[str, Any]) -> str:
    lines = [f"# Answer window cost ({report['questions']} questions x {report['rounds']} rounds, "
             f"top_k {TOP_K}, window {report['window_tokens']} tokens)", "",
             environment_line(report["environment"]), "",
             "| path | p50 ms | p95 ms |", "|---|---|---|"]
    for label, summary in report["paths"].items():
        lines.append(f"| {label} | {summary['p50']:.1f} | {summary['p95']:.1f} |")
    lines += ["", "| on / off (paired median) | ratio | target |", "|---|---|---|"]
    for label, ratio in report["ratios"].items():
        lines.append(f"| {label} | {ratio:.2f}x | <= {MAX_RATIO}x |")
    lines += ["", f"Words returned, median: off {report['words_median']['off']}, "
              f"on {report['words_median']['on']}.", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replay", type=Path, nargs="+", required=True,
                        help="replay files or folders (the users and questions to time)")
    parser.add_argument("--rounds", type=int, default=2)
    add_run_args(parser, "window", "the store", "keep the store for another run")
    args = parser.parse_args()
    return run_and_report("window", args, run, markdown)


if __name__ == "__main__":
    sys.exit(main())
