import json

import pytest

from hf_ext.recipes import recipes_dir
from hf_ext.recipes.binarize_progressive import main

TINY_RUN = ["--model", "tiny", "--max_files", "4", "--block_size", "16", "--eval_blocks", "4", "--max_steps", "4"]


def _run(tmp_path, *flags):
    config = str(recipes_dir() / "configs" / "binarize_progressive.yaml")
    return main(["--config", config, *TINY_RUN, "--logging_steps", "1", "--output_dir", str(tmp_path), *flags])


def test_recipe_binarizes_trains_exports_and_reports(tmp_path):
    results = _run(tmp_path)
    assert results["binarized_layers"] == 14 and results["steps"] == 4
    assert [value for _, value in results["lambda"]] == pytest.approx([0, 0.5, 1, 1, 1])  # + run summary
    assert results["perplexity_packed"] == pytest.approx(results["perplexity_trained"], rel=1e-4)
    assert results["perplexity_teacher"] < results["perplexity_binary_init"]
    assert json.loads((tmp_path / "results.json").read_text())["steps"] == 4
    assert (tmp_path / "packed" / "packed_binary.safetensors").is_file()
    assert (tmp_path / "curves.png").stat().st_size > 1000


def test_an_absolute_ramp_replaces_the_fraction(tmp_path):
    results = _run(tmp_path, "--ramp_steps", "1", "--binarize_fraction", "1.0")
    assert [value for _, value in results["lambda"]] == pytest.approx([0, 1, 1, 1, 1])


def test_one_jump_training_keeps_lambda_at_one(tmp_path):
    results = _run(tmp_path, "--progressive", "false", "--init", "mean_abs")
    assert results["lambda"] == [] and results["steps"] == 4


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--binarize_fraction", "0"], r"`binarize_fraction` must be in \(0, 1\]"),
        (["--schedule", "exp"], r"`schedule` must be one of \['linear', 'cosine', 'step'\]"),
        (["--init", "zeros"], r"`init` must be one of \['svid', 'mean_abs'\]"),
        (["--ramp_steps", "-2"], r"`ramp_steps` must be in \[1, max_steps\] or None, got -2"),
        (["--ramp_steps", "5"], r"`ramp_steps` must be in \[1, max_steps=4\].*got 5"),
    ],
)
def test_bad_arguments_name_the_field(tmp_path, flags, message):
    with pytest.raises(ValueError, match=message):
        _run(tmp_path, *flags)


@pytest.mark.slow
def test_cli_runs_on_two_cpu_processes(tmp_path, run_on_two_processes):
    overrides = ["model=tiny", "max_files=4", "block_size=16", "eval_blocks=4", "max_steps=2"]
    stdout = run_on_two_processes("binarize_progressive", overrides)
    assert stdout.count("after 2 steps: binary perplexity") == 1
    assert json.loads((tmp_path / "results.json").read_text())["steps"] == 2
