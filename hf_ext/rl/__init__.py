"""SGD for RL from verifiable rewards: GRPO presets, update sparsity, and sparse delta checkpoints."""

from .delta import SparseDeltaCallback, apply_sparse_delta, save_sparse_delta, state_fingerprint
from .presets import adamw_grpo_config, grpo_delta_callback, grpo_preset, sgd_grpo_config
from .rewards import checked_reward
from .sparsity import UpdateSparsityCallback, module_type, optimizer_state_bytes, visible_in_bf16

__all__ = [
    "SparseDeltaCallback",
    "UpdateSparsityCallback",
    "adamw_grpo_config",
    "apply_sparse_delta",
    "checked_reward",
    "grpo_delta_callback",
    "grpo_preset",
    "module_type",
    "optimizer_state_bytes",
    "save_sparse_delta",
    "sgd_grpo_config",
    "state_fingerprint",
    "visible_in_bf16",
]
