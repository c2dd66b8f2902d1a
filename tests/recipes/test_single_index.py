import csv
import dataclasses
import inspect
import json
import math

import pytest

from hf_ext.companion.single_index import SingleIndexRegressor
from hf_ext.recipes import shipped_config
from hf_ext.recipes.single_index import SingleIndexArguments, iterations_to, jobs, main


def test_quick_run_writes_runs_trajectories_summary_and_plots(tmp_path, capfd):
    flags = ["--config", str(shipped_config("single_index_quick")), "--output_dir", str(tmp_path)]
    results = main(flags)
    with (tmp_path / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    # 2 links x 2 dims x (2 starts x 3 single-index methods) + the network and gradient boosting at d = 8
    assert len(rows) == 2 * 2 * 2 * 3 + 2 * 2
    assert json.loads((tmp_path / "results.json").read_text())["summary"] == results["summary"]
    start = next(r for r in results["runs"] if r["method"] == "joint" and r["start"] == "-0.3")
    assert start["overlaps"][0] == pytest.approx(-0.3) and len(start["overlaps"]) >= 2
    network = results["summary"]["he1/d=8/n=128/start=-/two_layer_sgd"]
    assert "final_abs_overlap_mean" not in network and network["test_mse_mean"] > 0
    for name in ("single_index_overlap.png", "single_index_time_to_overlap.png"):
        assert (tmp_path / name).stat().st_size > 1000
    out, err = capfd.readouterr()
    assert "he2/d=16/n=256/start=-0.3/joint: |m|" in out and "single_index: 100%" in err


def test_every_data_set_gets_each_start_and_method_and_one_network():
    args = SingleIndexArguments(links=["he3"], dims=[16, 32], sample_ratios=[4.0], seeds=[0], baseline_dims=[32])
    runs = jobs(args)
    assert len(runs) == 2 * 3 * 3 + 2  # dims x starts (random, -0.3, 0) x methods, + 2 baselines at d = 32
    assert {("he3", 32, 4.0, "-", m, 0) for m in ("two_layer_sgd", "gradient_boosting")} <= set(runs)


def test_iterations_to_threshold_read_the_absolute_overlap():
    assert iterations_to([-0.3, -0.5, -0.95, -1.0]) == 2
    assert iterations_to([0.1, 0.2]) == math.inf


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"links": ["he5"]}, r"`links` must be a non-empty subset of \['he1'"),
        ({"init_overlaps": [-1.5]}, r"`init_overlaps` must be overlaps in \[-1, 1\]"),
        ({"baseline_dims": [7]}, "`baseline_dims` must be a subset of `dims`"),
        ({"sample_ratios": [0.5]}, "`sample_ratios` must be a non-empty list of >= 1"),
        ({"link_step": 0.0}, r"`link_step` must be in \(0, 1\]"),
        ({"init_overlaps": [], "random_init": False}, "there is no start to run from"),
    ],
)
def test_bad_settings_name_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SingleIndexArguments(**kwargs)


@pytest.mark.parametrize(
    ("name", "value", "allowed"),
    [
        ("max_iter", 0, "an integer >= 1"),
        ("max_degree", 0, "an integer >= 1"),
        ("learning_rate", -1.0, "> 0"),
        ("link_step", 1.5, r"in \(0, 1\]"),
    ],
)
def test_the_fit_settings_are_the_estimators_its_default_help_and_check(name, value, allowed):
    """Issue 74: the recipe declared and checked max_iter, link_step, max_degree and learning_rate again."""
    field = {field.name: field for field in dataclasses.fields(SingleIndexArguments)}[name]
    assert field.default == inspect.signature(SingleIndexRegressor).parameters[name].default
    assert field.metadata["help"] in " ".join(inspect.getdoc(SingleIndexRegressor).split())
    with pytest.raises(ValueError, match=rf"SingleIndexRegressor: `{name}` must be {allowed}, got {value}"):
        SingleIndexArguments(**{name: value})


@pytest.mark.slow
def test_quick_run_on_two_cpu_processes(tmp_path, run_on_two_processes):
    """Launched on two processes, the main one runs every fit, here on two local worker processes."""
    stdout = run_on_two_processes("single_index", ["--config", "single_index_quick", "workers=2"])
    assert stdout.count("he1/d=8/n=128/start=-0.3/joint: |m|") == 1  # printed by the main process only
    with (tmp_path / "runs.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 2 * 2 * 2 * 3 + 2 * 2
