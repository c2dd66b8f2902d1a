"""SPS and NGN on the zoo: their step is elementwise given one global step size, so every layout gets it."""

import torch
from zoo_architectures import build
from zoo_equivalents import assert_conv1d_updates_match_linear, optimizer_updates
from zoo_matrix import MethodCheck

from hf_ext.optim import NGN, SPS


def _check(make_optimizer):
    def check(architecture: str) -> None:
        if architecture == "gpt2":
            assert_conv1d_updates_match_linear(lambda: build("gpt2"), make_optimizer)
            return
        model, batch = build(architecture)
        moved = optimizer_updates(model, batch, make_optimizer, steps=2)  # LoRA's A moves from the 2nd
        trainable = {n for n, p in model.named_parameters() if p.requires_grad}
        assert all(torch.isfinite(d).all() for d in moved.values())
        assert all(moved[n].abs().max() > 0 for n in trainable if model.get_parameter(n).grad is not None)

    return check


CHECKS = [
    MethodCheck(
        "SPS",
        "SPS(model.parameters())",
        "GPT-2's Conv1D weights move as the equivalent nn.Linear's (transposed)",
        _check(lambda m: SPS([p for p in m.parameters() if p.requires_grad], lr=0.1)),
    ),
    MethodCheck(
        "NGN",
        "NGN(model.parameters())",
        "GPT-2's Conv1D weights move as the equivalent nn.Linear's (transposed)",
        _check(lambda m: NGN([p for p in m.parameters() if p.requires_grad], lr=0.1)),
    ),
]
