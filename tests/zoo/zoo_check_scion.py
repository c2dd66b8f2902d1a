"""Scion on the zoo: each parameter steps in its role's norm (model_layout), each matrix read as the map it is."""

import torch
from zoo_architectures import build
from zoo_equivalents import assert_conv1d_updates_match_linear, assert_each_expert_moves_as_alone
from zoo_matrix import MethodCheck

from hf_ext.models.layout import model_layout
from hf_ext.optim import Scion
from hf_ext.optim.scion.optimizer import RMS, ROLE_NORMS, ColNorm, Sign, Spectral

LR, ALPHA = 0.1, 0.5
LONE = {"spectral": Spectral(), "sign": Sign(), "colnorm": ColNorm(), "rms": RMS()}


def _make(model):
    return Scion(model, lr=LR, alpha=ALPHA)


def _assert_groups_follow_the_layout(model, optimizer) -> None:
    """Each parameter sits in the group of its role's norm, read transposed and stacked as model_layout says."""
    group_of = {id(p): group for group in optimizer.param_groups for p in group["params"]}
    for name, layout in model_layout(model).items():
        group = group_of[id(model.get_parameter(name))]
        actual = (group["norm"], group["transposed"], group["stacked"])
        assert actual == (ROLE_NORMS[layout.role], layout.transposed, layout.stacked), name


def _assert_first_step_is_each_matrix_alone(model, batch) -> None:
    """One step from zero momentum moves each parameter by ``lr * lmo(alpha * g)`` of its role's norm, computed on
    each of its matrices alone (each expert of a stack, each embedding as the map token -> vector)."""
    optimizer = _make(model)
    _assert_groups_follow_the_layout(model, optimizer)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    model(**batch).loss.backward()
    optimizer.step()
    for name, layout in model_layout(model).items():
        param = model.get_parameter(name)
        if param.grad is None:
            continue
        lone = LONE[ROLE_NORMS[layout.role]]
        steps = torch.stack([lone.lmo(matrix) for matrix in layout.matrices(ALPHA * param.grad)])
        torch.testing.assert_close(
            param.detach() - before[name], LR * layout.from_matrices(steps), rtol=1e-4, atol=1e-6, msg=name
        )


def check(architecture: str) -> None:
    if architecture == "gpt2":
        assert_conv1d_updates_match_linear(lambda: build("gpt2"), _make, rtol=1e-4, atol=1e-6)
        return
    model, batch = build(architecture)
    _assert_first_step_is_each_matrix_alone(model, batch)
    layouts = model_layout(model)
    if any(layout.stacked for layout in layouts.values()):
        assert_each_expert_moves_as_alone(_make)
        router = layouts["model.layers.0.mlp.gate.weight"]
        assert (router.role, router.stacked) == ("hidden", False)  # stepped above as one spectral matrix
    if architecture == "bert":
        assert layouts["classifier.weight"].role == "head"  # stepped above with the sign LMO


CHECKS = [
    MethodCheck(
        "Scion",
        "Scion(model)",
        "one step moves each parameter by its role's LMO (model_layout: head sign, classifier heads included; "
        "embeddings colnorm; hidden spectral; vectors rms) computed on each matrix alone, each expert of a "
        "mixture-of-experts tensor alone and the router as a matrix; GPT-2's Conv1D weights move as the equivalent "
        "nn.Linear's (transposed)",
        check,
    ),
]
