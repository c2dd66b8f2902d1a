import csv
import json
import math

import pytest

from hf_ext.recipes import shipped_config
from hf_ext.recipes.stepsize_sensitivity import StepSizeSensitivityArguments, build_problem, main, run_one


def _flags(tmp_path, *extra):
    return ["--config", str(shipped_config("stepsize_sensitivity_quick")), "--output_dir", str(tmp_path), *extra]


def test_quick_sweep_writes_runs_summary_and_plot(tmp_path, capfd):
    results = main(_flags(tmp_path, "--problems", "breast_cancer_logreg", "digits_mlp"))
    with (tmp_path / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * 6 * 3  # problems x methods x step sizes (one seed)
    assert results["grid"] == pytest.approx([0.01, 0.1, 1.0])
    assert json.loads((tmp_path / "results.json").read_text())["optima"] == results["optima"]
    entry = results["summary"]["breast_cancer_logreg/sps"]
    assert entry["convex"] and min(entry["values"]) > 0  # above the L-BFGS optimum
    assert entry["step_time_vs_sgd"] > 0 and results["summary"]["digits_mlp/sgd"]["step_time_vs_sgd"] == 1.0
    assert (tmp_path / "stepsize_sensitivity.png").stat().st_size > 1000
    out, err = capfd.readouterr()
    assert "digits_mlp/ngn_m: width" in out and "stepsize_sensitivity: 100%" in err


def test_sps_at_a_step_size_its_polyak_step_never_reaches_is_sgd():
    # On this problem the Polyak step exceeds 0.01 throughout, so the cap binds and SPS takes SGD's steps.
    args = StepSizeSensitivityArguments(steps=20)
    problem = build_problem("breast_cancer_logreg", args)

    sgd, sps = (run_one(problem, method, 0.01, 0, args)["final_loss"] for method in ("sgd", "sps"))
    assert sps == pytest.approx(sgd, rel=1e-6)


def test_interleaved_timing_gives_the_step_times(tmp_path):
    flags = ["--problems", "digits_logreg", "--methods", "sgd", "ngn", "--timing_rounds", "2", "--timing_steps", "3"]
    results = main(_flags(tmp_path, *flags))
    sgd, ngn = results["summary"]["digits_logreg/sgd"], results["summary"]["digits_logreg/ngn"]
    assert (
        sgd["step_time_vs_sgd"] == 1.0 and ngn["step_time_vs_sgd"] == ngn["seconds_per_step"] / sgd["seconds_per_step"]
    )
    runs = [row["seconds_per_step"] for row in csv.DictReader((tmp_path / "runs.csv").open()) if row["method"] == "sgd"]
    assert sgd["seconds_per_step"] not in map(float, runs)  # timed apart from the sweep's runs


def test_a_diverging_run_counts_as_infinite_loss():

    args = StepSizeSensitivityArguments(steps=50)
    assert run_one(build_problem("digits_mlp", args), "sgd", 1e3, 0, args)["final_loss"] == math.inf


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"methods": ["sgd", "lion"]}, r"`methods` must be a non-empty subset of \['sgd'"),
        ({"problems": []}, r"`problems` must be a non-empty subset"),
        ({"step_size_min": 1.0, "step_size_max": 0.1}, "must satisfy 0 < min < max, got 1.0 and 0.1"),
        ({"num_step_sizes": 0}, r"`num_step_sizes` must be > 0, got 0"),
        ({"momentum": 1.0}, r"`momentum` must be in \[0, 1\), got 1.0"),
    ],
)
def test_bad_settings_name_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        StepSizeSensitivityArguments(**kwargs)


@pytest.mark.slow
def test_quick_sweep_of_every_problem_on_two_cpu_processes(tmp_path, run_on_two_processes):
    """Launched on two processes, the main one runs every run, here on two local worker processes (a problem holds
    closures: the jobs carry its name and each worker builds it)."""
    overrides = ["--config", "stepsize_sensitivity_quick", "methods=sgd ngn", "workers=2"]
    stdout = run_on_two_processes("stepsize_sensitivity", overrides)
    assert stdout.count("llama_lm/ngn: width") == 1  # printed by the main process only
    with (tmp_path / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4 * 2 * 3 and {r["problem"] for r in rows} == {
        "breast_cancer_logreg",
        "digits_logreg",
        "digits_mlp",
        "llama_lm",
    }
