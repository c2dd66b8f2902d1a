"""Update sparsity and sparse deltas on the zoo: counts over every entry; a delta restores the trained model."""

import copy
import tempfile
from pathlib import Path

import torch
from zoo_architectures import build
from zoo_matrix import MethodCheck

from hf_ext.rl import UpdateSparsityCallback, apply_sparse_delta, save_sparse_delta


def _trained(architecture: str):
    """The zoo model after one SGD step on a few entries of each trainable tensor (a sparse update), and its base."""
    model, _ = build(architecture)
    base = copy.deepcopy(model)
    with torch.no_grad():
        for param in model.parameters():
            if param.requires_grad:
                param.view(-1)[:: max(1, param.numel() // 3)] += 0.5
    return model, base


def check_sparsity(architecture: str) -> None:
    model, base = _trained(architecture)
    callback = UpdateSparsityCallback()
    callback.initial = {name: callback._keep(param) for name, param in base.named_parameters()}
    metrics = callback.measure(model)
    changed = sum(int((p != b).sum()) for p, b in zip(model.parameters(), base.parameters(), strict=True))
    total = sum(p.numel() for p in model.parameters())
    assert metrics["sparsity/changed_entry_fraction"] == changed / total > 0


def check_delta(architecture: str) -> None:
    model, base = _trained(architecture)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "delta.safetensors"
        counts = save_sparse_delta(model, base, path)
        restored = apply_sparse_delta(base, path)
    assert counts["changed"] > 0
    for (name, value), expected in zip(restored.state_dict().items(), model.state_dict().values(), strict=True):
        assert torch.equal(value, expected), name


CHECKS = [
    MethodCheck(
        "UpdateSparsityCallback",
        "UpdateSparsityCallback()",
        "the changed-entry fraction equals a count over every entry of every tensor (expert tensors included)",
        check_sparsity,
    ),
    MethodCheck(
        "sparse deltas",
        "save_sparse_delta(model, base, path) / apply_sparse_delta(base, path)",
        "applying the saved delta to the base restores the trained model bit for bit",
        check_delta,
    ),
]
