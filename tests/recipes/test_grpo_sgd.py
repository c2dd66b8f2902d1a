import json

import pytest
from safetensors import safe_open

from hf_ext.models import load_causal_lm
from hf_ext.recipes import recipes_dir
from hf_ext.recipes.grpo_sgd import main, parser

TINY_RUN = ["--model", "tiny", "--num_train", "8", "--num_eval", "4", "--max_new_tokens", "4", "--max_steps", "2"]


def _config():
    return str(recipes_dir() / "configs" / "grpo_sgd.yaml")


def test_recipe_runs_sgd_and_adamw_and_reports_sparsity_state_and_sizes(tmp_path):
    flags = ["--format_reward_weight", "0.2", "--sgd_learning_rate", "0.05", "--output_dir", str(tmp_path)]
    results = main(["--config", _config(), *TINY_RUN, *flags])
    assert set(results) == {"sgd", "adamw"} and results["sgd"]["learning_rate"] == 0.05
    assert results["sgd"]["optimizer_state_bytes"] == 0 < results["adamw"]["optimizer_state_bytes"]
    for result in results.values():
        assert result["steps"] == 2 and 0 <= result["held_out_reward_after"] <= 1
        assert 0 <= result["changed_fraction_bf16"] <= result["changed_fraction"] <= 1
        assert result["full_checkpoint_bytes"] > 0
        assert 0 < result["delta_over_full_visible"] and 0 < result["delta_over_full_exact"]
        assert result["delta_changed_fraction_exact"] == pytest.approx(result["changed_fraction"])
    assert json.loads((tmp_path / "results.json").read_text())["sgd"]["steps"] == 2
    assert (tmp_path / "reward.png").stat().st_size > 1000


def test_bf16_parameters_are_trained_and_saved_in_bf16_with_a_visible_delta_per_checkpoint(tmp_path):
    flags = ["--optimizers", "sgd", "--param_dtype", "bfloat16", "--output_dir", str(tmp_path)]
    saving = ["--save_strategy", "steps", "--save_steps", "2"]
    result = main(["--config", _config(), *TINY_RUN, *flags, *saving])["sgd"]
    model, _ = load_causal_lm("tiny")
    bf16_bytes = 2 * sum(parameter.numel() for parameter in model.parameters())
    assert result["param_dtype"] == "bfloat16"
    assert bf16_bytes <= result["full_checkpoint_bytes"] < 1.05 * bf16_bytes
    # bf16 parameters: rounding to bf16 changes nothing, so both modes store the same entries
    assert result["delta_changed_fraction_visible"] == result["delta_changed_fraction_exact"]
    with safe_open(str(tmp_path / "sgd" / "checkpoint-2" / "sparse_delta.safetensors"), "pt") as delta:
        assert delta.metadata()["mode"] == "visible"


@pytest.mark.parametrize("setting", ["learning_rate", "optim_args", "weight_decay", "reward_weights"])
def test_what_each_optimizer_run_sets_is_not_a_setting(setting):
    """Issue 38: GRPOConfig's learning_rate, optim, ... were parsed and then replaced by each optimizer's."""
    with pytest.raises(ValueError, match="not used by the HfArgumentParser"):
        parser().parse_args_and_config(["--config", _config(), f"--{setting}", "1"])


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--optimizers", "lion"], r"`optimizers` must be a non-empty subset of \['sgd', 'adamw'\]"),
        (["--format_reward_weight", "-1"], r"`format_reward_weight` must be >= 0"),
        (["--param_dtype", "float16"], r"`param_dtype` must be one of \['float32', 'bfloat16'\]"),
        (["--delta_mode", "lossy"], r"`delta_mode` must be one of \['exact', 'visible'\]"),
        (["--num_train", "0"], r"GRPOSGDArguments: `num_train` must be an integer >= 1, got 0"),
        (["--num_eval", "-1"], r"GRPOSGDArguments: `num_eval` must be an integer >= 1, got -1"),
        (["--sgd_learning_rate", "-0.1"], r"GRPOSGDArguments: `sgd_learning_rate` must be >= 0, got -0.1"),
        (["--adamw_learning_rate=-1e-5"], r"GRPOSGDArguments: `adamw_learning_rate` must be >= 0, got -1e-05"),
    ],
)
def test_bad_arguments_name_the_field(flags, message):
    with pytest.raises(ValueError, match=message):
        main(["--config", _config(), *flags])


@pytest.mark.slow
def test_cli_runs_sgd_grpo_on_two_cpu_processes(tmp_path, run_on_two_processes):
    overrides = ["model=tiny", "num_train=16", "num_eval=4", "max_new_tokens=4", "max_steps=2", "optimizers=sgd"]
    stdout = run_on_two_processes("grpo_sgd", overrides)
    assert stdout.count("sgd: held-out reward") == 1
    assert json.loads((tmp_path / "results.json").read_text())["sgd"]["optimizer_state_bytes"] == 0
