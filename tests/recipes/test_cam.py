import csv
import json
import re

import pytest

from hf_ext import cli
from hf_ext._settings import SettingsMismatchError
from hf_ext.companion.combinatorial.cam import CAMConfig
from hf_ext.companion.evaluation.combinatorial.cam import greedy_mis
from hf_ext.recipes import cam as recipe
from hf_ext.recipes import shipped_config
from hf_ext.recipes._jobs import check_job_settings
from hf_ext.recipes._settings import run_config
from hf_ext.recipes.cam import CAMArguments, CAMSolverConfig, job_settings, main, parser

# cam_quick with step budgets only (no wall-clock training or time-limited references): each job's numbers are a
# function of the settings, and a whole run takes about 9 s
STEP_BUDGETS = [
    "--config", str(shipped_config("cam_quick")), "--train_seconds", "inf", "--train_steps", "10",
    "--large_time_limit", "0", "--variance_repeats", "2",
]  # fmt: skip


@pytest.mark.slow
def test_quick_run_on_two_processes_writes_rows_variances_and_plots(tmp_path, torchrun_two_processes):
    """Launched on two processes, rank 0 runs the jobs (MIS, max-cut) on two local workers and writes them all."""
    script = tmp_path / "run_cam.py"
    script.write_text(
        "import sys\nfrom hf_ext.recipes import shipped_config\nfrom hf_ext.recipes.cam import main\n"
        "main(['--config', str(shipped_config('cam_quick')), '--workers', '2', '--output_dir', sys.argv[1]])\n"
    )
    torchrun_two_processes(script)
    with (tmp_path / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    # MIS: 5 sets (training sizes, 2x, exact ER, large ER, RB) x 7 methods (CAM and REINFORCE, each with and without
    # local search per chain; greedy; local search from greedy and from random starts) + exact on ER and RB + HiGHS
    # and the iterated local search on the large ER set; max-cut: 2 x 7
    assert len(rows) == 5 * 7 + 2 + 2 + 2 * 7
    assert {"er40-50", "exact_rb4-5x10"} <= {row["eval_set"] for row in rows}
    assert {row["method"] for row in rows if row["eval_set"] == "er40-50"} >= {"ils", "highs"}
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["summary"]["mis/exact_er20/exact"]["gap_percent_mean"] == 0
    assert results["summary"]["mis/exact_er20/cam"]["gap_percent_mean"] >= 0
    for method in ("cam", "reinforce"):  # the local search only ever adds nodes
        for row in (r for r in rows if r["problem"] == "mis" and r["method"] == method):
            improved = next(r for r in rows if r["eval_set"] == row["eval_set"] and r["method"] == f"{method}+ls")
            assert float(improved["value"]) >= float(row["value"])
    assert sorted(v["problem"] for v in results["signal_variance"]) == ["maxcut", "mis"]
    assert {"cam@init", "reinforce@init", "cam@cam_trained", "reinforce@cam_trained"} <= set(
        results["signal_variance"][0]
    )
    ends = {d["problem"]: d for d in results["chain_diagnostics"]}  # cam_quick: a 4-step chain
    assert len(ends["mis"]["cam"]["adjoint_signal"]) == 4 and 0 <= ends["mis"]["reinforce"]["conflict_free"] <= 1
    for name in ("cam_gap.png", "cam_training.png"):
        assert (tmp_path / name).stat().st_size > 1000


@pytest.mark.parametrize(
    "field, value, message",
    [("problems", ["tsp"], r"`problems` must be a non-empty subset of \['mis', 'maxcut'\]"),
     ("train_nodes", [50, 10], "`train_nodes` must be"), ("edge_prob", 0.0, "`edge_prob` must be in"),
     ("large_nodes", [800, 700], r"`large_nodes` must be \[\] or \[low, high\]"),
     ("rb_domain", 1, "`rb_domain` must be >= 2"), ("large_time_limit", -1.0, "`large_time_limit` must be >= 0"),
     ("kamis_redumis", "/no/such/redumis", "`kamis_redumis` must be '' or a file")],
)
def test_bad_arguments_name_the_field(field, value, message):
    with pytest.raises(ValueError, match=f"CAMArguments: {message}"):
        CAMArguments(**{field: value})


def test_the_solver_settings_are_cam_configs_own_and_each_run_sets_problem_method_and_seed():
    with pytest.raises(ValueError, match="CAMSolverConfig: `steps` must be an integer >= 1, got 0"):
        CAMSolverConfig(steps=0)
    _, config = parser().parse_args_and_config(["--config", str(shipped_config("cam_quick")), "--steps", "6"])
    run = run_config(CAMConfig, config, problem="maxcut", method="reinforce", seed=2)
    assert type(run) is CAMConfig
    assert (run.problem, run.method, run.seed, run.steps, run.chains) == ("maxcut", "reinforce", 2, 6, 4)
    settings = cli.recipe_help("cam", None, [])
    assert "\n  problems: list[str]" in settings and "\n  problem:" not in settings and "\n  method:" not in settings
    with pytest.raises(ValueError, match="unknown setting 'method'"):
        cli.check_settings("cam", cli.recipe_argv("cam", None, ["method=reinforce"]))


def test_a_setting_given_with_the_quick_config_is_kept():
    """The quick mode was a dict applied over the parsed settings: `quick=true train_nodes=...` lost the nodes."""
    flags = ["--config", str(shipped_config("cam_quick")), "--train_nodes", "10", "12", "--chains", "2"]
    args, config = parser().parse_args_and_config(flags)
    assert (args.train_nodes, args.eval_graphs, config.chains, config.steps) == ([10, 12], 2, 2, 4)


def test_a_run_sigkilled_mid_way_and_resumed_in_a_new_process_ends_as_the_uninterrupted_one(tmp_path, resume_check):
    """Issue 37: the recipe trained for wall-clock seconds and redid every job on a rerun; killed after its first
    (problem, seed) job and resumed in a new process, every file is now the uninterrupted run's, but for the
    measured seconds."""
    seconds = {"seconds"}
    outputs = resume_check.assert_resumes_identically(
        resume_check.module_command("hf_ext.recipes.cam", *STEP_BUDGETS),
        lambda folder: len(list((folder / "jobs").glob("*.json"))) >= 1,
        tmp_path,
        ignored_keys={
            "results.json": seconds, "runs.csv": seconds, "jobs/mis_seed_0.json": seconds,
            "jobs/maxcut_seed_0.json": seconds,
        },  # fmt: skip
    )
    assert {"cam_gap.png", "cam_training.png", "settings.json"} <= outputs.keys()


def test_a_rerun_with_other_settings_is_refused_before_any_job(tmp_path):
    args, config = parser().parse_args_and_config([*STEP_BUDGETS, "--output_dir", str(tmp_path)])
    check_job_settings(tmp_path, job_settings(args, config), "cam")  # what a first run stored with its jobs
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "mis_seed_0.json").write_text("{}")
    message = (
        rf"cannot resume the cam jobs in {re.escape(str(tmp_path))} under other settings .*: train_steps: stored 10, "
        r"now 11\. Rerun with the stored settings to resume, or start fresh"
    )
    with pytest.raises(SettingsMismatchError, match=message):
        main([*STEP_BUDGETS, "--train_steps", "11", "--seeds", "1", "--output_dir", str(tmp_path)])
    assert list((tmp_path / "jobs").iterdir()) == [tmp_path / "jobs" / "mis_seed_0.json"]


def test_kamis_is_a_reference_on_the_large_graphs_with_their_time_limit(tmp_path, monkeypatch):
    """With ``kamis_redumis`` the large ER set gets a ``kamis`` row, run with ``large_time_limit`` seconds a graph
    (the binary's own protocol is tested in tests/companion/combinatorial/cam/test_kamis.py)."""
    calls = []

    def fake_redumis(graph, binary, time_limit, seed):
        calls.append((graph.num_nodes, binary, time_limit))
        return greedy_mis(graph)

    monkeypatch.setattr(recipe, "redumis_mis", fake_redumis)
    binary = tmp_path / "redumis"
    binary.write_text("")
    flags = [*STEP_BUDGETS, "--problems", "mis", "--large_time_limit", "0.1", "--kamis_redumis", str(binary)]
    results = main([*flags, "--output_dir", str(tmp_path / "out")])
    kamis = [row for row in results["rows"] if row["method"] == "kamis"]
    assert [row["eval_set"] for row in kamis] == ["er40-50"]
    assert calls and all(40 <= n <= 50 and b == str(binary) and t == 0.1 for n, b, t in calls)
