import csv
import dataclasses
import json

import pytest

from hf_ext.recipes import shipped_config
from hf_ext.recipes.scion_batch import ScionBatchArguments, main, parser, steps_to_reach


def _flags(tmp_path, *extra, config="scion_batch"):
    return ["--config", str(shipped_config(config)), "--output_dir", str(tmp_path), *extra]


def test_the_shipped_config_parses_and_the_quick_one_shrinks_it(tmp_path):
    script_args, training_args = parser().parse_args_and_config(_flags(tmp_path))
    assert len(script_args.batch_sizes) >= 6 and len(script_args.seeds) >= 2
    assert training_args.lr_scheduler_type == "constant"
    quick, quick_training = parser().parse_args_and_config(_flags(tmp_path, "--seeds", "3", config="scion_batch_quick"))
    assert quick.token_budget < script_args.token_budget and quick.seeds == [3]  # a given setting wins
    assert quick_training.lr_scheduler_type == "constant"


def test_what_each_run_sets_is_not_a_training_setting(tmp_path):
    """Issue 38: TrainingArguments' max_steps, learning_rate, seed, ... were parsed, then replaced in every run."""
    _, training_args = parser().parse_args_and_config(_flags(tmp_path))
    settings = {field.name for field in dataclasses.fields(training_args) if field.init}
    assert not {"max_steps", "per_device_train_batch_size", "learning_rate", "eval_steps", "seed"} & settings
    assert {"lr_scheduler_type", "per_device_eval_batch_size", "output_dir"} <= settings


def test_steps_to_reach_a_loss():
    runs = [{"curve": [(10, 5.0), (20, 4.0), (30, 3.5)]}, {"curve": [(10, 3.9), (20, 4.5)]}]
    assert steps_to_reach(runs, 4.0) == 15.0
    assert steps_to_reach(runs, 3.0) is None


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("batch_sizes", [4, 4], "`batch_sizes` must be distinct positive integers"),
        ("adaptive_stage_ratio", 1.0, "`adaptive_stage_ratio` must be > 1"),
        ("lr_multipliers", [0.0], "`lr_multipliers` must be positive"),
    ],
)
def test_bad_arguments_are_refused(field, value, message):
    with pytest.raises(ValueError, match=message):
        ScionBatchArguments(**{field: value})


@pytest.mark.slow
def test_quick_run_end_to_end(tmp_path):
    results = main(_flags(tmp_path, config="scion_batch_quick"))
    assert [row["batch_size"] for row in results["fixed"]] == [2, 4, 8]
    for key in ("adaptive", "adamw", "muon"):
        assert results[key]["tokens"] == results["fixed"][0]["tokens"] or key == "adaptive"
        assert results[key]["final_loss"] > 0
    assert results["adaptive"]["tokens"] == pytest.approx(4096, rel=0.1)
    for prediction in results["predicted"].values():
        assert prediction["tokens_per_step"] > 0 and prediction["lr"] > 0
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["best_fixed"] == results["best_fixed"]
    with (tmp_path / "runs.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 6  # 3 fixed + adaptive + AdamW + Muon, one seed
    assert (tmp_path / "sweep.png").stat().st_size > 0 and (tmp_path / "curves.png").stat().st_size > 0
