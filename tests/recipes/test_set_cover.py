import csv
import json

import pytest

from hf_ext import cli
from hf_ext.companion.combinatorial.set_cover import LNSConfig
from hf_ext.recipes import shipped_config
from hf_ext.recipes.set_cover import SetCoverArguments, SetCoverLNSConfig, lns_config, main, parser


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
        ({"methods": ["cl_lns"]}, r"`methods` must be a non-empty list from \['glns', 'local_lns'"),
        ({"time_limits": [0.0]}, "`time_limits` must be seconds > 0"),
    ],
)
def test_refuses_bad_settings(fields, message):
    with pytest.raises(ValueError, match=message):
        SetCoverArguments(**fields)


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
