import csv
import dataclasses
import json

import pytest
import torch

from hf_ext.models import Rep3DConfig
from hf_ext.recipes import recipes_dir
from hf_ext.recipes.rep3d import Rep3DArguments, build_model, main, parse_args


def _flags(tmp_path, *extra):
    config = str(recipes_dir() / "configs" / "rep3d_quick.yaml")
    return ["--config", config, "--output_dir", str(tmp_path), "--disable_tqdm", "true", *extra]


def test_variants_start_from_the_same_weights(tmp_path):
    args, _ = parse_args(_flags(tmp_path))
    models = {v: build_model(args, v, seed=1).state_dict() for v in ("rep3d", "fixed_prior", "no_mask", "small_kernel")}
    plain = models["no_mask"]
    for variant in ("rep3d", "fixed_prior"):
        assert all(torch.equal(tensor, models[variant][name]) for name, tensor in plain.items())
    small = models["small_kernel"]
    differing = {name for name, tensor in plain.items() if tensor.shape != small[name].shape}
    assert differing == {"rep3d.stages.0.blocks.0.mixer.conv.weight"}  # quick kernels: 5 in stage 0, 3 elsewhere
    assert all(torch.equal(tensor, small[name]) for name, tensor in plain.items() if name not in differing)
    assert not torch.equal(build_model(args, "no_mask", seed=2).state_dict()["head.2.weight"], plain["head.2.weight"])


def test_the_encoder_sizes_are_rep3d_configs_and_the_shipped_configs_set_the_recipes(tmp_path):
    """Issue 74: the recipe declared Rep3DConfig's sizes again with other defaults; it composes them now."""
    library = {field.name: field for field in dataclasses.fields(Rep3DConfig)}
    for field in dataclasses.fields(Rep3DArguments):
        if field.name in library:
            assert field.metadata == library[field.name].metadata
            assert getattr(Rep3DArguments(), field.name) == getattr(Rep3DConfig(), field.name)
    args, _ = parse_args(["--config", str(recipes_dir() / "configs" / "rep3d.yaml"), "--output_dir", str(tmp_path)])
    sizes = (args.hidden_sizes, args.depths, args.kernel_sizes, args.decoder_hidden_size)
    assert sizes == ([8, 16, 32, 64], [1, 1, 1, 1], [13, 7, 5, 3], 32)  # the recipe's documented encoder


def test_what_the_recipe_sets_for_each_run_is_not_a_training_setting(tmp_path):
    """Issue 74: every run replaced the user's `seed` and `logging_nan_inf_filter`."""
    _, training_args = parse_args(_flags(tmp_path))
    settings = {field.name for field in dataclasses.fields(training_args) if field.init}
    assert not {"seed", "logging_nan_inf_filter"} & settings and "learning_rate" in settings
    with pytest.raises(ValueError, match="logging_nan_inf_filter"):
        parse_args(_flags(tmp_path, "--logging_nan_inf_filter", "true"))


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"variants": ["rep3d", "big"]}, "`variants` must be a non-empty subset of"),
        ({"lr_multipliers": [1.0, 0.0]}, "`lr_multipliers` must be a non-empty list of numbers > 0"),
        (
            {"small_kernel_size": 4},
            r"^Rep3DArguments: `small_kernel_size` must be an odd integer >= 1 \(padding k // 2",
        ),
        ({"kernel_sizes": [13, 7, 6, 3]}, r"Rep3DConfig: `kernel_sizes\[2\]` must be an odd integer >= 1"),
        ({"seeds": []}, "`seeds` must list at least one seed"),
    ],
)
def test_bad_arguments_name_the_field(fields, message):
    with pytest.raises(ValueError, match=message):
        Rep3DArguments(**fields)


def test_volumes_smaller_than_the_stride_product_are_refused(tmp_path):
    with pytest.raises(ValueError, match="`size` must be at least the encoder's stride product 16, got 8"):
        Rep3DArguments(size=8)
    with pytest.raises(ValueError, match="`size` must be at least the encoder's stride product 16, got 8"):
        parse_args(_flags(tmp_path, "--size", "8"))


@pytest.mark.slow
def test_quick_run_end_to_end(tmp_path):
    results = main(_flags(tmp_path))
    assert set(results["summary"]) == {f"{v}/lr_x{m}" for v in Rep3DArguments().variants for m in (1, 3)}
    for entry in results["summary"].values():
        assert 0 <= entry["mean_dice"] <= 1 and entry["std_dice"] == 0.0 and len(entry["per_seed"]) == 1
    with (tmp_path / "runs.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 8 and {row["learning_rate"] for row in rows} == {"0.002", "0.006"}
    with (tmp_path / "curves.csv").open() as handle:
        assert [row["step"] for row in csv.DictReader(handle)][:2] == ["1", "2"]
    assert json.loads((tmp_path / "results.json").read_text())["max_steps"] == 2
    for png in ("rep3d_dice.png", "rep3d_slice.png"):
        assert (tmp_path / png).stat().st_size > 1000


@pytest.mark.slow
def test_quick_run_on_two_cpu_processes(tmp_path, run_on_two_processes):
    stdout = run_on_two_processes("rep3d", ["--config", "rep3d_quick", "variants=rep3d", "lr_multipliers=1.0"])
    assert stdout.count("rep3d/lr_x1: mean Dice") == 1
    runs = json.loads((tmp_path / "results.json").read_text())["runs"]
    assert len(runs) == 1 and 0 <= runs[0]["mean_dice"] <= 1
