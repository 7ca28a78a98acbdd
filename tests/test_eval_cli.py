"""Evaluation commands: each prints its table, writes JSON + Markdown under --out, answers 0 on
success, 1 when the work failed and 2 on a usage error; replay runs the Adds and Searches of
converted files against a live server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from aml_retriever.common.signals import SIGNALS
from aml_retriever.evaluation import cli, dataset, public_data

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--suite", "classic", "--scale", "tiny", "--difficulty", "easy", "--seeds", "1", "--quiet",
        "--jobs", "1"]


def test_run_eval_prints_the_table_and_writes_results(tmp_path, capsys):
    assert cli.run_eval([*TINY, "--out", str(tmp_path), "--top-k", "20"]) == 0
    out = capsys.readouterr().out
    assert "| **all answerable** |" in out and "R@20" in out
    data = json.loads((tmp_path / "eval-classic-tiny-easy.json").read_text())
    assert data["summary"]["groups"]["all"]["n"] > 0
    assert (tmp_path / "eval-classic-tiny-easy.md").read_text().startswith("# Evaluation")
    lines = (tmp_path / "eval-classic-tiny-easy.questions.jsonl").read_text().splitlines()
    assert len(lines) == data["summary"]["groups"]["all"]["n"]


def test_run_eval_puts_the_reference_beside_ours(tmp_path, capsys):
    assert cli.run_eval([*TINY, "--out", str(tmp_path), "--reference"]) == 0
    out = capsys.readouterr().out
    assert "## The plain reference (character-bigram BM25), same questions" in out
    data = json.loads((tmp_path / "eval-classic-tiny-easy.json").read_text())
    assert data["reference"]["groups"]["all"]["n"] == data["summary"]["groups"]["all"]["n"] > 0


def test_run_eval_ablation_reports_every_signal(tmp_path, capsys):
    assert cli.run_eval([*TINY, "--out", str(tmp_path), "--ablation"]) == 0
    out = capsys.readouterr().out
    for signal in SIGNALS:
        assert f"| -{signal.name}" in out
    assert "| lexical-only |" in out
    data = json.loads((tmp_path / "eval-classic-tiny-easy-ablation.json").read_text())
    assert set(data["ablation_deltas"]) == {"lexical-only", *(f"-{s.name}" for s in SIGNALS)}


def test_run_eval_over_http_matches_in_process(tmp_path, make_app, capsys):
    assert cli.run_eval([*TINY, "--out", str(tmp_path), "--name", "local", "--top-k", "20"]) == 0
    app = make_app(db_path=str(tmp_path / "served.db"), synchronous="NORMAL")
    assert cli.run_eval([*TINY, "--out", str(tmp_path), "--name", "remote", "--top-k", "20",
                         "--url", f"http://127.0.0.1:{app.port}", "--user-prefix", "t1-"]) == 0
    local = json.loads((tmp_path / "local.json").read_text())["summary"]["groups"]["all"]
    remote = json.loads((tmp_path / "remote.json").read_text())["summary"]["groups"]["all"]
    assert remote["R@5"] == local["R@5"] and remote["MRR"] == local["MRR"]


def test_ablation_over_http_is_a_usage_error():
    with pytest.raises(SystemExit) as exited:
        cli.run_eval([*TINY, "--url", "http://127.0.0.1:1", "--ablation"])
    assert exited.value.code == 2


def test_run_eval_reports_an_unreachable_server(capsys):
    assert cli.run_eval([*TINY, "--url", "http://127.0.0.1:9", "--retries", "0"]) == 1
    assert "run_eval:" in capsys.readouterr().err


def test_write_data_writes_identical_files_for_a_seed(tmp_path):
    assert cli.run_eval([*TINY, "--write-data", str(tmp_path / "a")]) == 0
    assert cli.run_eval([*TINY, "--write-data", str(tmp_path / "b")]) == 0
    first = (tmp_path / "a" / "classic-tiny-easy-seed1.json").read_bytes()
    assert first == (tmp_path / "b" / "classic-tiny-easy-seed1.json").read_bytes()
    (conversation,) = dataset.load(tmp_path / "a" / "classic-tiny-easy-seed1.json")
    assert conversation.questions and conversation.adds


def test_run_scan_ranks_the_grid(tmp_path, capsys):
    code = cli.run_scan([*TINY, "--out", str(tmp_path), "--grid", "weight_recency=0,0.5",
                         "--metric", "R@5"])
    assert code == 0
    out = capsys.readouterr().out
    assert "`weight_recency=0.5`" in out and "`default`" in out
    data = json.loads((tmp_path / "scan-classic-tiny-easy.json").read_text())
    assert {r["name"] for r in data["ranked"]} == {"default", "weight_recency=0.5"}


def test_run_scan_lists_settings_and_refuses_unknown_ones(capsys):
    assert cli.run_scan(["--list"]) == 0
    assert "weight_lexical (default" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exited:
        cli.run_scan([*TINY, "--grid", "weight_magic=1"])
    assert exited.value.code == 2


def test_replay_runs_converted_files_against_a_live_server(tmp_path, make_app, capsys):
    fixture = ROOT / "fixtures" / "eval" / "locomo_tiny.json"
    public_data.write_replay(next(public_data.locomo_files([fixture])), tmp_path / "replay")
    app = make_app(db_path=str(tmp_path / "served.db"), synchronous="NORMAL")
    url = f"http://127.0.0.1:{app.port}"
    args = ["--url", url, "--replay", str(tmp_path / "replay"), "--out", str(tmp_path), "--quiet"]
    assert cli.replay([*args, "--name", "first", "--user-prefix", "a-"]) == 0
    out = capsys.readouterr().out
    assert "Add: 3 Adds / 29 messages" in out and "contract violations none" in out
    data = json.loads((tmp_path / "replay-first.json").read_text())
    assert data["summary"]["groups"]["all"]["n"] == 4  # 6 questions: one without evidence, one adversarial
    assert data["search"]["latency_ms"]["p50"] > 0
    # Searching again without Adds finds the same evidence.
    assert cli.replay([*args, "--name", "again", "--user-prefix", "a-", "--skip-add"]) == 0
    again = json.loads((tmp_path / "replay-again.json").read_text())
    assert again["summary"]["groups"]["all"]["R@5"] == data["summary"]["groups"]["all"]["R@5"]


def test_scripts_run_from_a_checkout_without_installation(tmp_path):
    for script in ("run_eval.py", "run_scan.py", "prepare_public_data.py", "replay.py"):
        done = subprocess.run([sys.executable, str(ROOT / "scripts" / script), "--help"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "usage:" in done.stdout
