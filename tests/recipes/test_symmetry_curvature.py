import csv
import dataclasses
import json

import pytest

from hf_ext.recipes import shipped_config
from hf_ext.recipes.symmetry_curvature import SymmetryCurvatureArguments, main, parser


def _flags(tmp_path, *extra, config="symmetry_curvature"):
    return ["--config", str(shipped_config(config)), "--output_dir", str(tmp_path), *extra]


def test_the_shipped_config_parses_and_the_quick_one_shrinks_it(tmp_path):
    script_args, training_args = parser().parse_args_and_config(_flags(tmp_path))
    assert len(script_args.seeds) == 3 and "permutation:identity" in script_args.accuracy_groups
    assert training_args.lr_scheduler_type == "constant"
    quick, _ = parser().parse_args_and_config(_flags(tmp_path, "--lm_steps", "2", config="symmetry_curvature_quick"))
    assert quick.seeds == [0] and quick.lm_steps == 2  # a setting given with the quick config wins


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("accuracy_groups", ["identity:identity"], "`accuracy_groups` entries must be 'rows:cols'"),
        ("accuracy_groups", ["rotation"], "`accuracy_groups` entries must be 'rows:cols'"),
        ("mlp_lrs", [0.0], "`mlp_lrs` must be a non-empty list of numbers > 0"),
        ("lm_lrs", [], "`lm_lrs` must be a non-empty list of numbers > 0"),
        ("gradient_batches", 1, "`gradient_batches` must be >= 2"),
    ],
)
def test_bad_arguments_are_refused(field, value, message):
    with pytest.raises(ValueError, match=message):
        SymmetryCurvatureArguments(**{field: value})


@pytest.mark.slow
def test_quick_run_end_to_end(tmp_path):
    results = main(_flags(tmp_path, config="symmetry_curvature_quick"))
    estimates_seen = {entry["estimate"] for entry in results["accuracy"]}
    assert estimates_seen == {
        "full",
        "kfac_style",
        "shampoo_style",
        "permutation:identity",
        "orthogonal:identity",
        "scaling:scaling",
    }
    assert {entry["model"] for entry in results["accuracy"]} == {"mlp_digits", "tiny_llama"}
    for entry in results["accuracy"]:
        assert -1 <= entry["cosine"] <= 1 and -1 <= entry["secant_cosine"] <= 1 and entry["relative_error"] >= 0
    for table in results["training"].values():
        assert set(table) == {"adamw", "symmetry", "shampoo_style", "muon"}
        assert table["adamw"]["step_time_vs_adamw"] == 1.0
        assert all(row["final_loss"] > 0 for row in table.values())
    written = json.loads((tmp_path / "results.json").read_text())
    assert written["training"]["mlp_digits"]["symmetry"]["lr"] == results["training"]["mlp_digits"]["symmetry"]["lr"]
    with (tmp_path / "training.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == 8  # 2 tasks x 4 optimizers x 1 seed
    assert (tmp_path / "tradeoff.png").stat().st_size > 0 and (tmp_path / "training.png").stat().st_size > 0


def test_what_each_lm_run_sets_is_not_a_training_setting(tmp_path):
    """Issue 38: TrainingArguments' max_steps, learning_rate and seed were parsed, then replaced in every run."""
    _, training_args = parser().parse_args_and_config(_flags(tmp_path))
    settings = {field.name for field in dataclasses.fields(training_args) if field.init}
    assert not {"max_steps", "learning_rate", "seed", "eval_strategy", "save_strategy"} & settings
    assert {"lr_scheduler_type", "per_device_train_batch_size", "output_dir"} <= settings
