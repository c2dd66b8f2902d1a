import csv
import json

import pytest

from hf_ext.recipes import shipped_config
from hf_ext.recipes.cam import CAMArguments, main


@pytest.mark.slow
def test_quick_run_writes_rows_variances_and_plots(tmp_path):
    results = main(["--config", str(shipped_config("cam")), "--quick", "true", "--output_dir", str(tmp_path)])
    with (tmp_path / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    # MIS: 3 sets x 4 methods + exact on its set; max-cut: 2 sets x 4 methods
    assert len(rows) == 3 * 4 + 1 + 2 * 4
    exact = results["summary"]["mis/exact_er20/exact"]
    assert exact["gap_percent_mean"] == 0 and results["summary"]["mis/exact_er20/cam"]["gap_percent_mean"] >= 0
    variance = results["signal_variance"][0]
    assert {"cam@init", "reinforce@init", "cam@cam_trained", "reinforce@cam_trained"} <= set(variance)
    assert json.loads((tmp_path / "results.json").read_text())["summary"] == results["summary"]
    for name in ("cam_gap.png", "cam_training.png"):
        assert (tmp_path / name).stat().st_size > 1000


@pytest.mark.parametrize(
    "field, value, message",
    [("problems", ["tsp"], r"`problems` must be a non-empty subset of \['mis', 'maxcut'\]"),
     ("train_nodes", [50, 10], "`train_nodes` must be"), ("edge_prob", 0.0, "`edge_prob` must be in")],
)
def test_bad_arguments_name_the_field(field, value, message):
    with pytest.raises(ValueError, match=f"CAMArguments: {message}"):
        CAMArguments(**{field: value})
