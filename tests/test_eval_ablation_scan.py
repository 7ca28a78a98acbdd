"""Ablation and scan: configurations are derived from the signal table and RetrievalConfig (never
a hand-kept list); deltas pair seeds; the scan ranks by its metric and never above a point that
keeps Recall@20."""

from __future__ import annotations

import pytest

from aml_retriever.common.signals import SIGNAL_NAMES, SIGNALS, RetrievalConfig
from aml_retriever.evaluation import ablation, experiment, scan


def summary(**values: float | None) -> dict:
    """A one-seed summary whose `all` group holds the given metrics (AUROC separately)."""
    auroc = values.pop("AUROC", None)
    return {"groups": {"all": {"n": 1, **values}, "suite:x": {"n": 1, **values}},
            "adversarial": {"n": 1, "confidence_auroc": auroc}}


def test_ablation_switches_off_each_signal_of_the_table_once():
    configs = dict(ablation.configs())
    assert list(configs) == ["all-on", "lexical-only", *(f"-{s.name}" for s in SIGNALS)]
    base = RetrievalConfig()
    for signal in SIGNAL_NAMES:
        off = configs[f"-{signal}"]
        assert off.weight(signal) == 0.0
        assert all(off.weight(n) == base.weight(n) for n in SIGNAL_NAMES if n != signal)
    lexical = configs["lexical-only"]
    assert [n for n in SIGNAL_NAMES if lexical.weight(n)] == ["lexical"]


def test_signals_already_off_are_marked():
    zero = {s.name for s in SIGNALS if s.weight == 0}
    assert ablation.off_by_default() == {f"-{n}" for n in zero}


def test_deltas_pair_seeds_and_give_mean_and_range():
    per_config = {"all-on": [summary(**{"R@5": 0.5, "AUROC": 0.7}), summary(**{"R@5": 0.6, "AUROC": None})],
                  "-date": [summary(**{"R@5": 0.4, "AUROC": 0.6}), summary(**{"R@5": 0.4, "AUROC": 0.9})]}
    ((name, cells),) = ablation.deltas(per_config, ("R@5", "AUROC", "MRR"))
    assert name == "-date"
    r5 = cells["R@5"]
    assert (r5.mean, r5.low, r5.high) == (pytest.approx(-0.15), pytest.approx(-0.2), pytest.approx(-0.1))
    assert cells["AUROC"].mean == pytest.approx(-0.1)  # the seed without AUROC is left out
    assert cells["MRR"] is None


def test_ablation_markdown_names_the_command_and_every_configuration():
    per_config = {"all-on": [summary(**{"R@20": 0.5})], "-date": [summary(**{"R@20": 0.4})],
                  "-recency": [summary(**{"R@20": 0.5})]}
    text = ablation.markdown(per_config, "Ablation", "python3 scripts/run_eval.py --ablation")
    assert "`python3 scripts/run_eval.py --ablation`" in text
    assert "| -date | " in text and "-recency (off by default)" in text
    assert "| -date | -0.100 |" in text  # the by-suite table


def test_scannable_names_come_from_the_config():
    names = scan.scannable()
    assert {f"weight_{n}" for n in SIGNAL_NAMES} <= set(names)
    assert {"rrf_k", "candidate_depth", "window_sizes"} <= set(names)
    assert "weights" not in names


def test_grid_values_take_the_type_of_each_setting():
    grid = scan.parse_grid(["weight_recency=0,0.5", "candidate_depth=100,300", "window_sizes=3,2+3"])
    assert grid == {"weight_recency": [0.0, 0.5], "candidate_depth": [100, 300],
                    "window_sizes": [(3,), (2, 3)]}
    with pytest.raises(ValueError, match="scannable: weight_lexical"):
        scan.parse_grid(["weight_magic=1"])
    with pytest.raises(ValueError, match="candidate_depth takes int"):
        scan.parse_grid(["candidate_depth=1.5"])
    with pytest.raises(ValueError, match="name=v1,v2"):
        scan.parse_grid(["rrf_k"])


def test_grid_points_follow_the_default():
    default = RetrievalConfig()
    configs = scan.configs({"rrf_k": [30.0, default.rrf_k], "weight_date": [0.0]})
    assert [name for name, _ in configs] == ["default", "rrf_k=30,weight_date=0", "rrf_k=60,weight_date=0"]
    assert configs[1][1] == default.with_values(rrf_k=30.0, weight_date=0.0)
    assert scan.configs({"rrf_k": [default.rrf_k]}) == [("default", default)]
    with pytest.raises(ValueError, match="at most"):
        scan.configs({"rrf_k": list(range(1, 30)), "candidate_depth": list(range(1, 30))})


def test_ranking_puts_points_that_drop_recall_last():
    per_config = {"default": [summary(**{"MRR": 0.50, "R@20": 0.80})],
                  "a": [summary(**{"MRR": 0.70, "R@20": 0.70})],
                  "b": [summary(**{"MRR": 0.60, "R@20": 0.81})],
                  "c": [summary(**{"MRR": 0.55, "R@20": 0.80})]}
    ranked = scan.rank(per_config, "MRR")
    assert [r.name for r in ranked] == ["b", "c", "default", "a"]
    assert [r.passes for r in ranked] == [True, True, True, False]
    assert scan.rank(per_config, "MRR", tolerance=0.2)[0].name == "a"


def test_one_store_per_index_identity_serves_every_config(tmp_path):
    base = RetrievalConfig()
    other = base.with_values(segment_max_messages=8)
    assert other.index_identity() != base.index_identity()
    task = experiment.Task(experiment.Source("seed1", "classic", "tiny", "easy", 1),
                           (("default", base), ("no-date", base.without("date")), ("seg8", other)),
                           top_k=10, store_root=str(tmp_path), quiet=True)
    result = experiment.run_task(task)
    assert set(result["adds"]) == {base.index_identity(), other.index_identity()}
    assert sorted(p.parent.name for p in tmp_path.glob("*/aml.db")) == sorted(
        f"seed1-{c.index_identity()}" for c in (base, other))
    assert set(result["configs"]) == {"default", "no-date", "seg8"}
    assert result["configs"]["default"]["summary"]["groups"]["all"]["n"] > 0


def test_tasks_in_parallel_processes_give_the_same_results_in_order():
    tasks = [experiment.Task(source, (("default", RetrievalConfig()),), top_k=10, quiet=True)
             for source in experiment.synthetic_sources("classic", "tiny", "easy", [1, 2])]
    serial = experiment.run_tasks(tasks, jobs=1)
    parallel = experiment.run_tasks(tasks, jobs=2)
    assert [r["label"] for r in parallel] == ["seed1", "seed2"]

    def measured(results: list[dict]) -> list:  # everything but timings
        return [(r["configs"]["default"]["summary"]["groups"],
                 [q.get("ranks") for q in r["configs"]["default"]["records"]]) for r in results]

    assert measured(parallel) == measured(serial)
