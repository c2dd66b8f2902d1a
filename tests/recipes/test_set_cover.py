import csv
import json

import pytest

from hf_ext.recipes import recipes_dir
from hf_ext.recipes.set_cover import SetCoverArguments, main


def test_quick_run_writes_csv_json_png_and_scores_every_method(tmp_path, capfd):
    config = str(recipes_dir() / "configs" / "set_cover.yaml")
    flags = ["--config", config, "--quick", "true", "--output_dir", str(tmp_path), "--families", "beasley"]
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
        ({"neighbourhood_size": 0}, "`neighbourhood_size` must be an integer >= 1"),
    ],
)
def test_refuses_bad_settings(fields, message):
    with pytest.raises(ValueError, match=message):
        SetCoverArguments(**fields)


@pytest.mark.slow
def test_two_processes_run_the_instances_once(run_on_two_processes):
    out = run_on_two_processes("set_cover", ["quick=true", "families=rail", "methods=random_lns greedy"])
    assert out.count("rail/3000/1s/random_lns: primal integral") == 1
