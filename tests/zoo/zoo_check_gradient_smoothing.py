"""GradientSmoothing on the zoo: each block's update is the depth mix of what the base optimizer did.

One step of ``GradientSmoothing(AdamW)`` moves each parameter that every block holds by ``sum_j K(l, j) U_j``, where
``U_j`` is what AdamW alone moves block ``j``'s copy by: entry by entry, so each expert of a 3-D tensor is mixed with
the same expert of the neighbouring blocks, as that expert alone would be. Every other parameter (outside the blocks,
or held by some blocks only, as T5's relative attention bias) moves as under AdamW alone. GPT-2's Conv1D weights move
as the transpose of the equivalent ``nn.Linear``'s.
"""

import copy
from unittest import mock

import torch
import zoo_architectures
from zoo_equivalents import assert_conv1d_updates_match_linear, optimizer_updates
from zoo_matrix import MethodCheck

from hf_ext.optim import GradientSmoothing


def _three_blocks(architecture: str):
    """The zoo model with three blocks instead of two: a window of 3 needs that depth."""
    with mock.patch.object(zoo_architectures, "LAYERS", 3):
        return zoo_architectures.build(architecture)


def _adamw(model):
    return torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)


def _smoothed(model):
    return GradientSmoothing(_adamw(model), model, window=3)


def check(architecture: str) -> None:
    if architecture == "gpt2":
        assert_conv1d_updates_match_linear(lambda: _three_blocks("gpt2"), _smoothed)
    model, batch = _three_blocks(architecture)
    smoothing = _smoothed(model)
    with torch.random.fork_rng(devices=[]):  # T5's attention dropout is a float, not a module that build() turns off
        torch.manual_seed(0)
        alone = optimizer_updates(copy.deepcopy(model), batch, _adamw, steps=1)
        torch.manual_seed(0)
        moved = optimizer_updates(model, batch, lambda _: smoothing, steps=1)
    names = {id(param): name for name, param in model.named_parameters()}
    smoothed = set()
    for params in smoothing.roles.values():
        role = [names[id(p)] for p in params]
        expected = torch.einsum("lj,j...->l...", smoothing.matrix, torch.stack([alone[name] for name in role]))
        for name, update in zip(role, expected, strict=True):
            torch.testing.assert_close(moved[name], update, rtol=1e-5, atol=1e-7, msg=lambda m, n=name: f"{n}: {m}")
        smoothed.update(role)
    assert smoothed and any(moved[name].abs().max() > 0 for name in smoothed)
    for name in moved.keys() - smoothed:
        assert torch.equal(moved[name], alone[name]), name
    if architecture == "t5":
        assert not any("relative_attention_bias" in name for name in smoothed)


CHECKS = [
    MethodCheck(
        "GradientSmoothing",
        "GradientSmoothing(torch.optim.AdamW(...), model, window=3)",
        "each shared parameter of block l moves by sum_j K(l, j) times what AdamW alone moves block j's by (each "
        "expert of a 3-D tensor mixed with the same expert of its neighbours, as alone); the rest, T5's relative "
        "attention bias in block 0 included, moves as under AdamW alone; GPT-2's Conv1D as its nn.Linear twin",
        check,
    ),
]
