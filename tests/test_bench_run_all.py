"""bench/run_all.py reports verdicts in its table and fails only when a benchmark could not run:
driven here with stand-in benchmark scripts (the real ones take minutes)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent

# A stand-in benchmark: writes its result where --out says, then exits with the given status.
SCRIPT = """import json, sys
out = sys.argv[sys.argv.index("--out") + 1]
if {write}:
    open(out + "/{name}.json", "w").write(json.dumps({{"met": {met}}}))
sys.exit({code})
"""


@pytest.fixture
def run_all(tmp_path, monkeypatch):
    """bench/run_all.py as a module, its benchmarks looked for in tmp_path."""
    spec = importlib.util.spec_from_file_location("bench_run_all", ROOT / "bench" / "run_all.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_run_all", module)  # its dataclasses look it up
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "BENCH_DIR", tmp_path)
    yield module
    sys.path[:] = [p for p in sys.path if p != str(ROOT / "bench")]


def stand_in(module: ModuleType, directory: Path, name: str, *, met: bool, code: int,
             write: bool = True) -> object:
    (directory / f"bench_{name}.py").write_text(SCRIPT.format(name=name, met=met, code=code,
                                                              write=write))
    return module.Bench(name, (), (), lambda r: [(f"{name} target", "measured",
                                                  "PASS" if r["met"] else "FAIL")])


def test_missed_targets_are_verdicts_and_the_run_succeeds(run_all, tmp_path, monkeypatch, capsys):
    benches = (stand_in(run_all, tmp_path, "good", met=True, code=0),
               stand_in(run_all, tmp_path, "slow", met=False, code=1))
    monkeypatch.setattr(run_all, "BENCHES", benches)
    out = tmp_path / "out"
    assert run_all.main(["--quick", "--out", str(out)]) == 0
    summary = (out / "summary.md").read_text()
    assert "| good | good target | measured | PASS |" in summary
    # A quick run's miss is indicative (it read as a broken install: FAIL rows, exit 0).
    assert "| slow | slow target | measured | below target (indicative) |" in summary
    assert "| slow | 1 (a target missed) |" in summary and "FAIL" not in summary
    assert "1 of 2 targets met at the quick sizes (indicative" in summary
    assert summary in capsys.readouterr().out
    assert run_all.main(["--out", str(out)]) == 0  # control: a full run judges
    summary = (out / "summary.md").read_text()
    assert "| slow | slow target | measured | FAIL |" in summary and "1 of 2 targets met." in summary


def test_a_benchmark_that_cannot_run_fails_the_run(run_all, tmp_path, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "stale.json").write_text(json.dumps({"met": True}))  # an earlier run's result
    benches = (stand_in(run_all, tmp_path, "good", met=True, code=0),
               stand_in(run_all, tmp_path, "crash", met=True, code=3),
               stand_in(run_all, tmp_path, "stale", met=True, code=0, write=False))
    monkeypatch.setattr(run_all, "BENCHES", benches)
    assert run_all.main(["--quick", "--out", str(out)]) == 1
    summary = (out / "summary.md").read_text()
    assert "| crash | bench_crash.py runs | exit status 3, no result | ERROR |" in summary
    assert "| stale | bench_stale.py runs | exit status 0, no result | ERROR |" in summary
    assert "could not run: crash, stale." in summary
