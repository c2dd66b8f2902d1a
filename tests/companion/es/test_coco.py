import json

import pytest

pytest.importorskip("cocoex")

from hf_ext.companion.es.coco import INDEX, CocoConfig, read_index, run_coco, run_folder  # noqa: E402


def _config(tmp_path, **fields):
    settings = {
        "methods": ["rb_pem"],
        "functions": [101, 125],
        "instances": [1],
        "dimension": 2,
        "budget_multipliers": [20],
        "result_folder": str(tmp_path / "coco"),
        "workers": 1,
    }
    return CocoConfig(**settings | fields)


def test_writes_coco_folders_and_index(tmp_path):
    records = run_coco(_config(tmp_path))
    assert [(r["function"], r["evaluations"]) for r in records] == [(101, 40), (125, 40)]
    folder = run_folder(tmp_path / "coco", "rb_pem", 20, 101, 1, 2)
    assert (folder / "bbobexp_f101.info").exists()
    dat = (folder / "data_f101" / "bbobexp_f101_DIM2.dat").read_text()
    assert "noise-free fitness" in dat
    assert records[0]["final"] == records[0]["trajectory"][-1][1] >= 0


def test_resume_skips_completed_runs_and_redoes_cut_off_ones(tmp_path):
    config = _config(tmp_path)
    first = run_coco(config)
    index = tmp_path / "coco" / INDEX
    lines = index.read_text().splitlines()
    index.write_text(lines[0] + "\n" + lines[1][:20])  # the second run was cut off while writing its line
    kept = run_folder(tmp_path / "coco", "rb_pem", 20, 101, 1, 2) / "bbobexp_f101.info"
    stamp = kept.stat().st_mtime_ns
    again = run_coco(config)
    assert kept.stat().st_mtime_ns == stamp  # not rerun
    assert again == first  # the same seed reruns the cut-off run identically
    assert len(read_index(tmp_path / "coco")) == 2
    assert not (tmp_path / "coco" / "rb_pem_20D" / "f125_i01_d2-001").exists()
    json.loads(index.read_text().splitlines()[-1])


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"dimension": 7}, r"`dimension` must be one of \[2, 3, 5, 10, 20, 40\]"),
        ({"budget_multipliers": [0]}, "`budget_multipliers` must be a non-empty list of integers >= 1"),
        ({"budget_multipliers": [-5]}, "`budget_multipliers`"),
        ({"functions": [1]}, r"`functions` must be a non-empty list from 101..130"),
        ({"methods": ["nevergrad"]}, "`methods` must be a non-empty list from"),
    ],
)
def test_refuses_bad_settings(tmp_path, fields, message):
    with pytest.raises(ValueError, match=message):
        _config(tmp_path, **fields)
