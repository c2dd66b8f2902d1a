import csv
import json

import pytest

from hf_ext.recipes import recipes_dir
from hf_ext.recipes.pem import PemArguments, main


def _flags(tmp_path, *extra):
    config = str(recipes_dir() / "configs" / "pem.yaml")
    return ["--config", config, "--quick", "true", "--output_dir", str(tmp_path), "--workers", "1", *extra]


def test_quick_run_writes_coco_folders_csv_json_png(tmp_path, capfd):
    results = main(_flags(tmp_path))
    with (tmp_path / "runs.csv").open() as handle:
        runs = list(csv.DictReader(handle))
    assert len(runs) == 4 * 2  # methods x functions (one instance, one budget)
    assert all(int(run["evaluations"]) == 20 * 2 for run in runs)
    assert (tmp_path / "coco" / "rb_pem_20D" / "f101_i01_d2" / "bbobexp_f101.info").exists()
    with (tmp_path / "winloss.csv").open() as handle:
        table = list(csv.DictReader(handle))
    assert len(table) == 2 * 3  # each challenger against the three other methods
    assert all(int(r["wins"]) + int(r["losses"]) + int(r["ties"]) == 2 for r in table)
    assert json.loads((tmp_path / "results.json").read_text())["winloss"] == results["winloss"]
    assert set(results["tasks"]) == {f"cartpole/{m}" for m in ("rb_pem", "probe_switch", "sep_cma", "pycma_noise")}
    assert (tmp_path / "ecdf.png").stat().st_size > 1000 and (tmp_path / "winloss.png").stat().st_size > 1000
    assert "rb_pem vs sep_cma at 20D:" in capfd.readouterr().out


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"dimension": 7}, r"`dimension` must be one of \[2, 3, 5, 10, 20, 40\]"),
        ({"budget_multipliers": [0]}, "`budget_multipliers` must be a non-empty list of integers >= 1"),
        ({"tasks": ["pendulum"]}, r"`tasks` must be from \['cv_hyperparameters', 'cartpole'\]"),
    ],
)
def test_refuses_bad_settings(fields, message):
    with pytest.raises(ValueError, match=message):
        PemArguments(**fields)


@pytest.mark.slow
def test_two_processes_run_the_jobs_once(run_on_two_processes, tmp_path):
    out = run_on_two_processes("pem", ["quick=true", "workers=1"])
    assert out.count("rb_pem vs sep_cma at 20D:") == 1 and out.count("cartpole/rb_pem:") == 1
    index = (tmp_path / "coco" / "index.jsonl").read_text().splitlines()
    assert len(index) == 4 * 2
