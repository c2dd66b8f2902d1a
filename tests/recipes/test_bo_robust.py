import csv
import json
import math

import pytest
import torch

from hf_ext.recipes import recipes_dir
from hf_ext.recipes.bo_robust import OBJECTIVES, BORobustArguments, main, objective_and_optimum


def _flags(tmp_path, *extra):
    config = str(recipes_dir() / "configs" / "bo_robust.yaml")
    return ["--config", config, "--quick", "true", "--output_dir", str(tmp_path), *extra]


def test_quick_run_writes_csv_json_png_and_histories(tmp_path, capsys):
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
    assert "branin / corruption inf: final cumulative regret gp_ucb" in capsys.readouterr().out


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


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"methods": ["gp_ei"]}, r"`methods` must be a non-empty list from \['gp_ucb'"),
        ({"objectives": []}, "`objectives` must be a non-empty list"),
        ({"corruptions": ["huge"]}, "`corruptions` must be 'none' or positive magnitudes"),
        ({"placement": "worst"}, r"`placement` must be one of \['random', 'best'\]"),
    ],
)
def test_bad_arguments_name_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        BORobustArguments(**kwargs)
