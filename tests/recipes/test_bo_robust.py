import csv
import dataclasses
import json
import math
import multiprocessing
import os
import re
import subprocess
import sys

import pytest
import torch

from hf_ext.companion.bo import BayesianOptimizationConfig
from hf_ext.recipes import shipped_config
from hf_ext.recipes.bo_robust import (
    OBJECTIVES,
    BORobustArguments,
    BORobustLoopConfig,
    _report_from_worker,
    check_resumable,
    main,
    objective_and_optimum,
    parser,
)


def _flags(tmp_path, *extra):
    return ["--config", str(shipped_config("bo_robust_quick")), "--output_dir", str(tmp_path), *extra]


def test_quick_run_writes_csv_json_png_and_histories(tmp_path, capfd):
    flags = _flags(tmp_path, "--methods", "gp_ucb", "rcgp_ucb_stable", "--corruptions", "none", "inf", "--workers", "1")
    results = main(flags)
    with (tmp_path / "regret.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * 2 * 10  # methods x corruptions x rounds (one objective, one seed)
    corrupted = [r for r in rows if r["corruption"] == "inf" and r["corrupted"] == "True"]
    assert len(corrupted) == 2 * math.floor(10**0.25) and all(float(r["observed"]) == math.inf for r in corrupted)
    assert all(math.isfinite(float(r["cumulative_regret"])) for r in rows)
    summary = json.loads((tmp_path / "results.json").read_text())["summary"]
    assert summary == results["summary"] and "branin/inf/gp_ucb/over_clean" in summary
    assert "branin/none/rcgp_ucb_stable/over_gp_ucb" in summary
    assert (tmp_path / "regret.png").stat().st_size > 1000
    history = tmp_path / "histories" / "branin" / "inf" / "rcgp_ucb_stable" / "seed_0.jsonl"
    assert len(history.read_text().splitlines()) == 10
    out, err = capfd.readouterr()
    assert "branin / corruption inf: final cumulative regret gp_ucb" in out
    assert "bo_robust: 100%" in err and "40/40" in err  # the progress bar counts rounds over all runs


@pytest.mark.parametrize("name", list(OBJECTIVES))
def test_regret_is_measured_from_the_true_maximum(name):
    objective, optimum = objective_and_optimum(name)
    assert objective(objective.optimizers).max().item() == pytest.approx(optimum, abs=1e-4)
    assert (
        objective(
            torch.rand(256, objective.dim) * (objective.bounds[1] - objective.bounds[0]) + objective.bounds[0]
        ).max()
        <= optimum
    )


def test_a_rerun_resumes_from_the_histories(tmp_path):
    flags = _flags(tmp_path, "--methods", "rcgp_ts", "--corruptions", "none", "--workers", "1")
    first = main(flags)
    history = tmp_path / "histories" / "branin" / "none" / "rcgp_ts" / "seed_0.jsonl"
    before = history.read_text()
    assert main(flags)["summary"] == first["summary"] and history.read_text() == before


def test_the_runs_go_to_the_executor_given_and_end_as_in_this_process(tmp_path, counting_executor):
    """Issue 39: `pem` and `bo_robust` took `workers` but no executor (Dask, Ray) from Python."""
    settings = ["--methods", "gp_ucb", "rcgp_ucb_stable", "--corruptions", "inf"]
    spread = main(_flags(tmp_path / "executor", *settings), executor=counting_executor)
    assert counting_executor.submitted == 2
    assert main(_flags(tmp_path / "here", *settings, "--workers", "1"))["summary"] == spread["summary"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"methods": ["gp_ei"]}, r"`methods` must be a non-empty list from \['gp_ucb'"),
        ({"objectives": []}, "`objectives` must be a non-empty list"),
        ({"corruptions": ["huge"]}, "`corruptions` must be 'none' or positive magnitudes"),
        ({"placement": "worst"}, r"`placement` must be one of \['random', 'best'\]"),
        ({"exponent": -1.0}, r"`exponent` must be in \(0, 1\), got -1.0"),
        ({"direction": 0}, "`direction` must be -1 or 1, got 0"),
        ({"seeds": [0, -1]}, "`seed` must be an integer >= 0, got -1"),
        ({"workers": 0}, "BORobustArguments: `workers` must be an integer >= 1, got 0"),
    ],
)
def test_bad_arguments_name_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BORobustArguments(**kwargs)


@pytest.mark.parametrize("setting", [("--exponent", "-1"), ("--direction", "0"), ("--workers", "0")])
def test_a_refused_setting_leaves_nothing_for_the_corrected_rerun_to_be_refused_by(tmp_path, setting):
    """Issue 72: `exponent=-1` was refused once the runs started, after settings.json was written, so the corrected
    rerun into the same output_dir was refused as a changed resume."""
    with pytest.raises(ValueError, match=f"`{setting[0][2:]}` must be"):
        main(_flags(tmp_path / "out", *setting))
    assert not (tmp_path / "out").exists()


def test_the_loop_settings_are_the_configs_own_less_what_each_run_sets():
    """Issue 38: the recipe copied six BayesianOptimizationConfig fields; it now parses the config itself."""
    settings = {field.name for field in dataclasses.fields(BORobustLoopConfig) if field.init}
    library = {field.name for field in dataclasses.fields(BayesianOptimizationConfig)}
    assert library - settings == {"model", "acquisition", "seed"}
    with pytest.raises(ValueError, match="BORobustLoopConfig: `epsilon` must be in \\(0, 1\\), got 1.5"):
        BORobustLoopConfig(epsilon=1.5)


def test_model_warnings_are_counted_not_shown_and_progress_spans_the_workers(tmp_path, capfd):
    results = main(_flags(tmp_path, "--methods", "gp_ts", "rcgp_ts", "--corruptions", "none", "--workers", "2"))
    out, err = capfd.readouterr()
    assert "20/20" in err  # rounds done in both worker processes
    assert "NumericalWarning" not in err
    counted = results["warnings"]
    assert counted["total"]["NumericalWarning"] == sum(run["NumericalWarning"] for run in counted["runs"].values()) > 0
    assert "branin/none/gp_ts/seed_0" in counted["runs"]
    assert json.loads((tmp_path / "results.json").read_text())["warnings"] == counted
    assert f"gpytorch/BoTorch warnings in {len(counted['runs'])} of 2 runs" in out


def test_a_rerun_with_other_settings_is_refused_and_one_with_the_same_resumes(tmp_path):
    # The user's report: rounds=10 c=50 into the output_dir of a longer c=2 run reused the old histories.
    # Six rounds are all Sobol points on Branin (no model fit): fast.
    def run(rounds="6", c="2", seeds=("0",), *extra):
        flags = ["--methods", "rcgp_ucb_stable", "--objectives", "branin", "--corruptions", "none", "1e6"]
        flags += ["--workers", "1", "--output_dir", str(tmp_path), "--rounds", rounds, "--c", c, "--seeds", *seeds]
        return main([*flags, *extra])

    first = run()
    results = (tmp_path / "results.json").read_text()
    message = (
        rf"cannot resume the BO runs in {re.escape(str(tmp_path))} under other settings .*settings\.json: "
        r"rounds: stored 6, now 4; c: stored 2\.0, now 50\.0\. .*start fresh: pass another output_dir, or delete"
    )
    with pytest.raises(ValueError, match=message):
        run("4", "50")
    assert (tmp_path / "results.json").read_text() == results
    assert (
        run("6", "2", ("0",), "--lenient_tolerance", "0.5")["summary"]["branin/1e6/rcgp_ucb_stable/cumulative"]
        == (first["summary"]["branin/1e6/rcgp_ucb_stable/cumulative"])
    )
    assert run("6", "2", ("0", "1"))["args"]["seeds"] == [0, 1]  # which runs are made may change


def test_a_run_sigkilled_mid_way_and_resumed_in_a_new_process_ends_as_the_uninterrupted_one(tmp_path, resume_check):
    """Issue 37: RCGP's warm start was lost with the process, so the resumed RCGP run diverged at its first fit.

    Killed after round 8 of 10 (6 Sobol rounds, then fits that warm-start from the one before).
    """
    flags = ["--config", str(shipped_config("bo_robust_quick")), "--methods", "rcgp_ucb_stable"]
    history = "histories/branin/1e6/rcgp_ucb_stable/seed_0.jsonl"
    outputs = resume_check.assert_resumes_identically(
        resume_check.module_command("hf_ext.recipes.bo_robust", *flags, "--corruptions", "1e6", "--workers", "1"),
        lambda folder: resume_check.lines(folder / history) >= 8,
        tmp_path,
    )
    assert outputs[history].count(b"\n") == 10 and b'"model_factory_state": {"' in outputs[history]


def test_a_resumed_study_counts_the_warnings_of_its_restored_rounds(tmp_path, resume_check):
    """Issue 72: after a resume results.json counted only the resumed invocation's warnings (30 against 34, "2 of 15
    runs" against "3 of 15"). Killed with seed 0 done and seed 1 after round 8 (a fit, and a warning, per round)."""
    flags = ["--config", str(shipped_config("bo_robust_quick")), "--methods", "gp_ts", "--seeds", "0", "1"]
    history = "histories/branin/none/gp_ts/seed_1.jsonl"
    outputs = resume_check.assert_resumes_identically(
        resume_check.module_command("hf_ext.recipes.bo_robust", *flags, "--corruptions", "none", "--workers", "1"),
        lambda folder: resume_check.lines(folder / history) >= 8,
        tmp_path,
    )
    counted = json.loads(outputs["results.json"].decode())["warnings"]  # compared with the whole run's above
    assert set(counted["runs"]) == {"branin/none/gp_ts/seed_0", "branin/none/gp_ts/seed_1"}  # both raised some


@pytest.mark.parametrize("launch", [[], pytest.param(["--accelerate-config", "cpu_2proc"], marks=pytest.mark.slow)])
def test_hf_ext_run_reports_a_refused_resume_in_one_line_and_fails(tmp_path, launch):
    """Issue 37: the refusal was buried in two tracebacks, the recipe's and accelerate's CalledProcessError; on two
    processes it came twice, then torchrun's log lines and its ChildFailedError traceback."""
    check_resumable(*parser().parse_args_and_config(_flags(tmp_path)))  # what the first run stored
    (tmp_path / "histories").mkdir()
    (tmp_path / "histories" / "seed_0.jsonl").write_text("{}\n")
    command = [sys.executable, "-m", "hf_ext.cli", "run", "bo_robust", "--config", "bo_robust_quick", *launch]
    result = subprocess.run(
        [*command, "rounds=4", f"output_dir={tmp_path}"], capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert result.returncode != 0  # accelerate launch --quiet exits 1 for a failed run; torchrun the rank's 2
    assert result.stderr.strip().splitlines() == [
        f"bo_robust: cannot resume the BO runs in {tmp_path} under other settings than those stored in "
        f"{tmp_path / 'settings.json'}: rounds: stored 10, now 4. Rerun with the stored settings to resume, or start "
        f"fresh: pass another output_dir, or delete {tmp_path}."
    ]


@pytest.mark.parametrize(("recipe_alive", "exitcode", "reported"), [(True, 0, [3]), (False, 1, [])])
def test_a_pool_worker_ends_once_the_recipe_process_is_gone(recipe_alive, exitcode, reported):
    """SIGKILLing the recipe's process (workers=2) left its pool workers appending to the histories that a rerun
    resumes: measured 12 lines at the kill, 33 twenty seconds later; now they stop after the round in flight."""
    context = multiprocessing.get_context("fork")
    rounds_done = context.Queue()
    recipe_pid = os.getpid() if recipe_alive else os.getpid() + 1  # the worker's parent is this process
    worker = context.Process(target=_report_from_worker, args=(rounds_done, recipe_pid, 3))
    worker.start()
    worker.join(timeout=60)
    assert worker.exitcode == exitcode
    assert [rounds_done.get(timeout=10) for _ in reported] == reported and rounds_done.empty()
