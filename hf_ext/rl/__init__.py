"""SGD for RL from verifiable rewards: GRPO presets, update sparsity, and sparse delta checkpoints."""

from .delta import SparseDeltaCallback, apply_sparse_delta, save_sparse_delta, state_fingerprint

__all__ = ["SparseDeltaCallback", "apply_sparse_delta", "save_sparse_delta", "state_fingerprint"]
