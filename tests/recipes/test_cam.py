import csv
import json

import pytest

from hf_ext.recipes.cam import CAMArguments


@pytest.mark.slow
def test_quick_run_on_two_processes_writes_rows_variances_and_plots(tmp_path, torchrun_two_processes):
    """The jobs (MIS, max-cut) are split over the processes; rank 0 gathers and writes them all."""
    script = tmp_path / "run_cam.py"
    script.write_text(
        "import sys\nfrom hf_ext.recipes import shipped_config\nfrom hf_ext.recipes.cam import main\n"
        "main(['--config', str(shipped_config('cam')), '--quick', 'true', '--output_dir', sys.argv[1]])\n"
    )
    torchrun_two_processes(script)
    with (tmp_path / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    # MIS: 5 sets (training sizes, 2x, exact ER, large ER, RB) x 4 methods + exact on ER and RB; max-cut: 2 x 4
    assert len(rows) == 5 * 4 + 2 + 2 * 4
    assert {"er40-50", "exact_rb4-5x10"} <= {row["eval_set"] for row in rows}
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["summary"]["mis/exact_er20/exact"]["gap_percent_mean"] == 0
    assert results["summary"]["mis/exact_er20/cam"]["gap_percent_mean"] >= 0
    assert sorted(v["problem"] for v in results["signal_variance"]) == ["maxcut", "mis"]
    assert {"cam@init", "reinforce@init", "cam@cam_trained", "reinforce@cam_trained"} <= set(
        results["signal_variance"][0]
    )
    for name in ("cam_gap.png", "cam_training.png"):
        assert (tmp_path / name).stat().st_size > 1000


@pytest.mark.parametrize(
    "field, value, message",
    [("problems", ["tsp"], r"`problems` must be a non-empty subset of \['mis', 'maxcut'\]"),
     ("train_nodes", [50, 10], "`train_nodes` must be"), ("edge_prob", 0.0, "`edge_prob` must be in"),
     ("large_nodes", [800, 700], r"`large_nodes` must be \[\] or \[low, high\]"),
     ("rb_domain", 1, "`rb_domain` must be >= 2")],
)
def test_bad_arguments_name_the_field(field, value, message):
    with pytest.raises(ValueError, match=f"CAMArguments: {message}"):
        CAMArguments(**{field: value})
