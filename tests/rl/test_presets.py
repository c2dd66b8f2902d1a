import math

import pytest
import torch
import yaml
from trl import GRPOTrainer

from hf_ext.data import arithmetic_dataset, arithmetic_reward
from hf_ext.models import tiny_causal_lm
from hf_ext.recipes import recipes_dir
from hf_ext.rl import checked_reward, grpo_delta_callback
from hf_ext.rl.presets import COMMON_SETTINGS, LEARNING_RATES, adamw_grpo_config, grpo_preset, sgd_grpo_config


def test_sgd_preset_builds_plain_sgd_without_state(tmp_path):
    model, tokenizer = tiny_causal_lm()
    args = sgd_grpo_config(output_dir=str(tmp_path), max_steps=1, use_cpu=True)
    assert (args.learning_rate, args.num_generations) == (LEARNING_RATES["sgd"], 4)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=checked_reward(arithmetic_reward),
        args=args,
        train_dataset=arithmetic_dataset(8),
        processing_class=tokenizer,
    )
    optimizer = trainer.create_optimizer()
    assert isinstance(optimizer, torch.optim.SGD)
    assert all(group["momentum"] == 0 and group["weight_decay"] == 0 for group in optimizer.param_groups)


def test_adamw_preset_differs_only_in_the_optimizer(tmp_path):
    sgd, adamw = sgd_grpo_config(output_dir=str(tmp_path)), adamw_grpo_config(output_dir=str(tmp_path))
    assert adamw.optim == "adamw_torch" and adamw.learning_rate == LEARNING_RATES["adamw"]
    different = {k for k, v in sgd.to_dict().items() if adamw.to_dict()[k] != v}
    assert different == {"optim", "optim_args", "learning_rate"}


def test_shipped_recipe_config_matches_the_presets():
    config = yaml.safe_load((recipes_dir() / "configs" / "grpo_sgd.yaml").read_text())
    assert {key: config[key] for key in COMMON_SETTINGS} == COMMON_SETTINGS


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: grpo_preset("lion"), r"`optimizer` must be one of \['sgd', 'adamw'\], got 'lion'"),
        (lambda: sgd_grpo_config(optim="adamw_torch"), r"\['optim'\] are set by the 'sgd' preset"),
        # issue 72: accepted, and refused by torch's SGD only once training started
        (lambda: sgd_grpo_config(learning_rate=-1.0), r"GRPOConfig: `learning_rate` must be >= 0, got -1.0"),
        (lambda: adamw_grpo_config(max_steps=-5), r"GRPOConfig: `max_steps` must be a number of steps >= 1, or -1"),
        # GRPOConfig divided by zero; a negative KL coefficient was taken
        (lambda: sgd_grpo_config(num_generations=0), r"grpo_preset: `num_generations` must be an integer >= 2, got 0"),
        (lambda: sgd_grpo_config(beta=-0.1), r"grpo_preset: `beta` \(the KL coefficient\) must be >= 0, got -0.1"),
    ],
)
def test_unknown_optimizer_or_conflicting_override_is_rejected(call, message):
    with pytest.raises(ValueError, match=message):
        call()


class _NaNLossGRPOTrainer(GRPOTrainer):
    def compute_loss(self, *args, **kwargs):
        return super().compute_loss(*args, **kwargs) * math.nan


def test_preset_logs_a_nan_loss_as_nan_not_as_the_running_mean(tmp_path):
    model, tokenizer = tiny_causal_lm()
    args = sgd_grpo_config(
        output_dir=str(tmp_path), max_steps=1, max_completion_length=4, logging_steps=1, use_cpu=True
    )
    trainer = _NaNLossGRPOTrainer(
        model=model,
        reward_funcs=checked_reward(arithmetic_reward),
        args=args,
        train_dataset=arithmetic_dataset(8),
        processing_class=tokenizer,
    )
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 1 and math.isnan(losses[0])


def test_preset_delta_callback_stores_bf16_visible_deltas():
    callback = grpo_delta_callback()
    assert (callback.mode, callback.dtype) == ("visible", torch.bfloat16)


def test_an_override_of_another_type_is_refused_by_name():
    """GRPOConfig takes a string learning rate, which then failed in a comparison naming nothing."""
    with pytest.raises(TypeError, match=r"grpo_preset: `learning_rate` must be a number, got '1e-3' \(str\)"):
        sgd_grpo_config(learning_rate="1e-3")
