import csv
import dataclasses
import inspect
import json
import re

import numpy as np
import pytest

from hf_ext import cli
from hf_ext._random import seeded_global_rng
from hf_ext._settings import SettingsMismatchError
from hf_ext.companion.combinatorial.set_cover import ColumnDenoiser, GenerativeNeighbourhood, LNSConfig, save_denoiser
from hf_ext.companion.combinatorial.set_cover.training import DenoiserTrainingConfig
from hf_ext.recipes import shipped_config
from hf_ext.recipes._jobs import check_job_settings
from hf_ext.recipes.set_cover import (
    SetCoverArguments,
    SetCoverLNSConfig,
    gap_curve,
    job_settings,
    lns_config,
    main,
    parser,
    plot_gaps,
    score,
)

# set_cover_quick on 1000 columns under step budgets: the LNS methods stop after 4 subproblems, each solved to
# optimality well inside its limit, and no method races the clock (a run takes about 7 s)
STEP_BUDGETS = [
    "--config", str(shipped_config("set_cover_quick")), "--methods", "glns", "local_lns", "random_lns", "greedy",
    "ortools_greedy", "--n_columns", "1000", "--time_limits", "120", "--sub_time_limit", "30", "--max_iterations", "4",
    "--neighbourhood_size", "100",
]  # fmt: skip
# what the runs measure on the clock rather than compute
TIMED = {"times", "primal_integral", "primal_integral_std", "time_to_1pct", "generate_seconds", "peak_rss_gib"}


def test_quick_run_writes_csv_json_png_and_scores_every_method(tmp_path, capfd):
    config = str(shipped_config("set_cover_quick"))
    flags = ["--config", config, "--output_dir", str(tmp_path), "--families", "beasley"]
    results = main([*flags, "--methods", "local_lns", "greedy", "ortools_greedy", "highs"])
    with (tmp_path / "runs.csv").open() as handle:
        runs = list(csv.DictReader(handle))
    assert [r["method"] for r in runs] == ["local_lns", "greedy", "ortools_greedy", "highs"]
    assert min(float(r["gap"]) for r in runs) == 0.0  # the best known is one of the runs
    assert float(runs[0]["final"]) <= float(runs[1]["final"])  # LNS starts from greedy and never worsens it
    assert json.loads((tmp_path / "results.json").read_text())["summary"] == results["summary"]
    assert (tmp_path / "gap_vs_time.png").stat().st_size > 1000
    assert "beasley/3000/1s/local_lns: primal integral" in capfd.readouterr().out


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"methods": ["cl_lns"]}, r"`methods` must be a non-empty list from \['glns', 'glns_adaptive', 'local_lns'"),
        ({"time_limits": [0.0]}, "`time_limits` must be seconds > 0"),
    ],
)
def test_refuses_bad_settings(fields, message):
    with pytest.raises(ValueError, match=message):
        SetCoverArguments(**fields)


def test_glns_steps_is_glns_own_setting_declared_and_checked_there():
    """Issue 74: the recipe declared ``glns_steps`` (its default and help) and checked 2..10 beside GLNS's own
    ``STEPS``; it composes GenerativeNeighbourhood's ``steps`` now, refused by GLNS's check before any run."""
    declared = {field.name: field for field in dataclasses.fields(SetCoverArguments)}["glns_steps"]
    assert declared.default == inspect.signature(GenerativeNeighbourhood).parameters["steps"].default
    assert declared.metadata["help"] in inspect.getdoc(GenerativeNeighbourhood)
    with pytest.raises(ValueError, match=r"^SetCoverArguments: `glns_steps` must be an integer in 2..10, got 11$"):
        SetCoverArguments(glns_steps=11)


def test_the_lns_settings_are_lns_configs_own_checked_by_it():
    """Issue 38: the recipe copied three LNSConfig fields; they are now LNSConfig's, with its checks, once."""
    with pytest.raises(ValueError, match="SetCoverLNSConfig: `neighbourhood_size` must be an integer >= 1, got 0"):
        SetCoverLNSConfig(neighbourhood_size=0)
    flags = ["--config", str(shipped_config("set_cover")), "--neighbourhood_size", "7", "--time_limits", "2", "5"]
    args, lns = parser().parse_args_and_config(flags)
    config = lns_config("random_lns", 3, args, lns)
    assert type(config) is LNSConfig
    assert (config.neighbourhood_size, config.sub_time_limit, config.adapt_size) == (7, 1.0, True)
    assert (config.policy, config.time_limit, config.seed) == ("random", 5.0, 3)


def test_the_fields_each_run_sets_are_no_settings():
    settings = cli.recipe_help("set_cover", None, [])
    assert "\n  neighbourhood_size: int = 2000" in settings and "\n  time_limits: list[float]" in settings
    assert "\n  policy:" not in settings and "\n  time_limit:" not in settings and "\n  seed:" not in settings
    with pytest.raises(ValueError, match="unknown setting 'policy'"):
        cli.check_settings("set_cover", cli.recipe_argv("set_cover", None, ["policy=random"]))


def test_a_setting_given_with_the_quick_config_is_kept():
    flags = ["--config", str(shipped_config("set_cover_quick")), "--n_columns", "2000", "--neighbourhood_size", "50"]
    args, lns = parser().parse_args_and_config(flags)
    assert (args.n_columns, lns.neighbourhood_size, args.time_limits) == ([2000], 50, [1.0])


@pytest.mark.slow
def test_two_processes_run_the_instances_once(run_on_two_processes):
    settings = ["--config", "set_cover_quick", "families=rail", "methods=random_lns greedy"]
    out = run_on_two_processes("set_cover", settings)
    assert out.count("rail/3000/1s/random_lns: primal integral") == 1


def test_a_run_sigkilled_mid_way_and_resumed_in_a_new_process_ends_as_the_uninterrupted_one(tmp_path, resume_check):
    """Issue 37: a rerun redid every instance. Killed after its first instance and resumed in a new process, it keeps
    that instance's stored runs (their times included) and ends with the uninterrupted run's objectives and gaps."""
    denoiser = tmp_path / "denoiser"
    with seeded_global_rng(0):
        save_denoiser(ColumnDenoiser(hidden=4), denoiser, DenoiserTrainingConfig(hidden=4))
    at_the_kill = {}

    def first_instance_stored(folder):
        at_the_kill.update({path: path.read_bytes() for path in (folder / "jobs").glob("*.json")})
        return bool(at_the_kill)

    jobs = ["jobs/correlated_1000_seed_0.json", "jobs/rail_wide_1000_seed_0.json"]
    outputs = resume_check.assert_resumes_identically(
        resume_check.module_command("hf_ext.recipes.set_cover", *STEP_BUDGETS, "--denoiser", str(denoiser)),
        first_instance_stored,
        tmp_path,
        ignored_keys={
            "results.json": TIMED,
            "runs.csv": {"primal_integral", "time_to_1pct", "first_solution_seconds", "generate_seconds"},
        }
        | dict.fromkeys(jobs, TIMED),
        timed_files=frozenset({"gap_vs_time.png"}),
    )
    assert {path: path.read_bytes() for path in at_the_kill} == at_the_kill  # stored once, never rerun
    assert sorted(name for name in outputs if name.startswith("jobs/")) == jobs
    assert outputs["runs.csv"].count(b"\n") == 1 + 2 * 5


def test_a_rerun_with_other_settings_is_refused_before_any_instance(tmp_path):
    args, lns = parser().parse_args_and_config([*STEP_BUDGETS, "--output_dir", str(tmp_path)])
    check_job_settings(tmp_path, job_settings(args, lns), "set_cover")  # what a first run stored with its jobs
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "rail_wide_1000_seed_0.json").write_text("{}")
    message = (
        rf"cannot resume the set_cover jobs in {re.escape(str(tmp_path))} under other settings .*: max_iterations: "
        r"stored 4, now 5\. Rerun with the stored settings to resume, or start fresh"
    )
    with pytest.raises(SettingsMismatchError, match=message):
        main([*STEP_BUDGETS, "--max_iterations", "5", "--seeds", "1", "--output_dir", str(tmp_path)])
    assert list((tmp_path / "jobs").iterdir()) == [tmp_path / "jobs" / "rail_wide_1000_seed_0.json"]


def test_the_first_solution_is_timed_within_the_budget_only():
    """The greedy start's time, the part of an LNS's primal integral its neighbourhoods do not earn; a solution
    found after the budget does not count."""
    curve = {"times": [1.5, 4.0], "values": [110.0, 100.0]}
    assert score(curve, best=100.0, budget=10.0)["first_solution_seconds"] == 1.5
    assert score(curve, best=100.0, budget=1.0)["first_solution_seconds"] == float("inf")


def test_the_gap_plot_says_that_gap_0_is_drawn_at_its_floor(tmp_path):
    """Issue 37: the best run's gap of 0 sat at 1e-4 on the log axis without a word."""
    grid = np.geomspace(0.01, 1.0, 5)
    gaps = gap_curve({"times": [0.0, 0.5], "values": [110.0, 100.0]}, 100.0, grid)
    assert gaps[-1] == 1e-4 and gaps[0] == pytest.approx(10 / 110)  # primal gap: (found - best) / found
    figure = plot_gaps({"rail, 1000 columns": {"local_lns": [gaps]}}, grid, tmp_path / "gaps.png")
    assert figure.axes[0].get_ylabel() == "primal gap (0 drawn at 0.0001)"
