"""GRPO presets: plain SGD (the method) and AdamW (the baseline), ready for TRL's ``GRPOTrainer``.

In RLVR, AdamW's momentum and per-parameter scaling buy little: plain SGD keeps no optimizer
state, and its updates are reported to be extremely sparse. SGD's step is the raw (clipped)
gradient, so it needs a learning rate orders of magnitude above AdamW's (``LEARNING_RATES``).

A NaN or inf loss is logged as NaN (``logging_nan_inf_filter`` off): TRL's ``GRPOTrainer`` still
takes that step, so the log must show it rather than the Trainer's running mean of the finite
losses. Rewards, the usual source, are refused when non-finite by ``checked_reward``, and
``save_sparse_delta`` refuses to checkpoint NaN weights. ``grpo_delta_callback`` gives a preset
run sparse delta checkpoints in the mode that keeps them small (``DELTA_SETTINGS`` says why).
"""

import torch
from trl import GRPOConfig

from .._validation import check_count, check_finite, check_settings_types, check_training_arguments
from .delta import SparseDeltaCallback

# Swept on SmolLM2-135M-Instruct, arithmetic, 30 steps (docs/results/rl.md, *Learning rates*): SGD 0.1 collapsed
# the held-out reward, 0.01 and 0.03 raised it (0.03 more); AdamW 1e-6 moved it little.
LEARNING_RATES = {"sgd": 3e-2, "adamw": 1e-5}
OPTIMIZER_SETTINGS = {
    "sgd": {"optim": "sgd", "optim_args": "momentum=0", "weight_decay": 0.0},
    "adamw": {"optim": "adamw_torch", "weight_decay": 0.0},
}
# Small groups and short completions, so that a run fits a few CPU cores; bf16 only where it is fast.
COMMON_SETTINGS = {
    "num_generations": 4,
    "max_completion_length": 32,
    "per_device_train_batch_size": 8,
    "beta": 0.0,
    "lr_scheduler_type": "constant",
    "activation_checkpointing": False,
    "dataloader_pin_memory": False,
    "report_to": "none",
    "logging_nan_inf_filter": False,
}
# Sparse delta checkpoints store what a bf16 copy of the model sees. With fp32 (or mixed-precision
# master) weights, SGD moves 83-88% of the entries bitwise, so an exact delta is 0.89-0.98 of a full
# checkpoint, while a bf16-visible one was 0.064 of it after 3 steps (docs/results/rl.md, *Measured sizes*).
# With bf16 parameters both modes store the same entries.
DELTA_SETTINGS = {"mode": "visible", "dtype": torch.bfloat16}


def grpo_preset(optimizer: str, **overrides) -> GRPOConfig:
    """A ``GRPOConfig`` for ``optimizer`` ("sgd" or "adamw"); any ``GRPOConfig`` field can be overridden."""
    if optimizer not in OPTIMIZER_SETTINGS:
        raise ValueError(f"grpo_preset: `optimizer` must be one of {list(OPTIMIZER_SETTINGS)}, got {optimizer!r}")
    fixed = sorted(set(overrides) & set(OPTIMIZER_SETTINGS[optimizer]) - {"weight_decay"})
    if fixed:
        raise ValueError(f"grpo_preset: {fixed} are set by the {optimizer!r} preset; pick the other preset instead")
    bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    for name, value in overrides.items():  # the preset's own settings are finite; GRPOConfig checks none
        check_finite("grpo_preset", name, value)
    check_settings_types("grpo_preset", GRPOConfig, overrides)  # GRPOConfig takes "1e-3" for a learning rate
    if "num_generations" in overrides:  # GRPOConfig divides by it before checking it
        check_count("grpo_preset", "num_generations", overrides["num_generations"], least=2)
    if overrides.get("beta", 0) < 0:  # a negative KL coefficient rewards moving away from the reference
        raise ValueError(f"grpo_preset: `beta` (the KL coefficient) must be >= 0, got {overrides['beta']}")
    settings = COMMON_SETTINGS | {"bf16": bf16, "learning_rate": LEARNING_RATES[optimizer]}
    config = GRPOConfig(**settings | OPTIMIZER_SETTINGS[optimizer] | overrides)
    check_training_arguments(config)  # GRPOConfig takes a negative learning rate: the optimizer refuses it later
    return config


def sgd_grpo_config(**overrides) -> GRPOConfig:
    """GRPO with plain SGD (no momentum, no weight decay): no optimizer state at all."""
    return grpo_preset("sgd", **overrides)


def adamw_grpo_config(**overrides) -> GRPOConfig:
    """GRPO with AdamW, the baseline, under the same settings otherwise."""
    return grpo_preset("adamw", **overrides)


def grpo_delta_callback(base=None) -> SparseDeltaCallback:
    """A ``SparseDeltaCallback`` with the presets' ``DELTA_SETTINGS``: bf16-visible deltas, restoring the bf16 model."""
    return SparseDeltaCallback(base, **DELTA_SETTINGS)
