"""SymmetryCurvature on the zoo: each weight's group acts on the linear map ``d_in -> d_out`` it holds.

Every parameter of a zoo model must move as the matrices it holds (``model_layout``'s ``(experts, d_out, d_in)``
view) would move alone as 2-D parameters on the same gradients, with the group their role gets; GPT-2's
``Conv1D`` weights as the transpose of their ``nn.Linear`` twins', which does not go through the layout at all.
"""

import torch
from torch import nn
from zoo_architectures import build
from zoo_equivalents import assert_conv1d_updates_match_linear, assert_each_expert_moves_as_alone
from zoo_matrix import MethodCheck

from hf_ext.models.layout import model_layout
from hf_ext.optim import SymmetryCurvature
from hf_ext.optim.symmetry_curvature.optimizer import FALLBACK, HIDDEN

SETTINGS = {"lr": 0.01}
EXPERTS = ("mixtral", "qwen2_moe", "qwen3_moe")
ROLES = {  # parameters whose group the model's structure decides, as the method must read it
    "bert": {"classifier.weight": FALLBACK, "bert.pooler.dense.weight": HIDDEN},
    "mixtral": {"model.layers.0.mlp.gate.weight": HIDDEN, "model.layers.0.mlp.experts.gate_up_proj": HIDDEN},
    "qwen2_moe": {"model.layers.0.mlp.gate.weight": HIDDEN, "model.layers.0.mlp.shared_expert_gate.weight": FALLBACK},
    "qwen3_moe": {"model.layers.0.mlp.gate.weight": HIDDEN, "model.layers.0.mlp.experts.down_proj": HIDDEN},
}


def _optimizer(model: nn.Module) -> SymmetryCurvature:
    return SymmetryCurvature(model, **SETTINGS)


def _build64(architecture: str):
    """The zoo model in float64: ``S`` is rank-deficient on a batch of 12 tokens, and ``S^(-1/2)`` multiplies the
    rounding differences of two equivalent computations in its null space by up to ``damping^(-1/2)`` (1e3)."""
    model, batch = build(architecture)
    if architecture in EXPERTS:
        model.set_experts_implementation("eager")  # the grouped matmul takes no float64
    return model.double(), batch


def _groups_by_name(optimizer: SymmetryCurvature) -> dict[str, tuple[str, str]]:
    return {name: group["group"] for group in optimizer.param_groups for name in group["param_names"]}


def _trained(architecture: str, steps: int):
    """``steps`` steps on the zoo model: the model, its optimizer, its parameters at the start and each step's
    gradients (``None`` where a parameter got none)."""
    model, batch = _build64(architecture)
    optimizer = _optimizer(model)
    params = dict(model.named_parameters())
    start = {name: p.detach().clone() for name, p in params.items()}
    grads = {name: [] for name in params}
    for _ in range(steps):
        optimizer.zero_grad()
        model(**batch).loss.backward()
        for name, p in params.items():
            grads[name].append(None if p.grad is None else p.grad.clone())
        optimizer.step()
    return model, optimizer, start, grads


def _replayed_alone(layout, start: torch.Tensor, grads: list, group: tuple[str, str]) -> torch.Tensor:
    """The parameter after each of its matrices stepped alone, as a 2-D ``(d_out, d_in)`` parameter, on ``grads``."""
    alone = [nn.Parameter(matrix.clone(memory_format=torch.contiguous_format)) for matrix in layout.matrices(start)]
    optimizer = SymmetryCurvature(alone, group=group, **SETTINGS)
    for grad in grads:
        matrices = [None] * len(alone) if grad is None else list(layout.matrices(grad))
        for param, matrix in zip(alone, matrices, strict=True):
            param.grad = None if matrix is None else matrix.clone(memory_format=torch.contiguous_format)
        optimizer.step()
    return layout.from_matrices(torch.stack([param.detach() for param in alone]))


def assert_each_matrix_moves_as_alone(architecture: str, steps: int = 2) -> SymmetryCurvature:
    """Two steps of ``SymmetryCurvature(model)``: every parameter ends where its matrices (each expert of an expert
    tensor) end when stepped alone on the same gradients, with the group of its role (hidden: permutations of the
    output units; embeddings, heads, vectors and one-row matrices: the diagonal fallback)."""
    model, optimizer, start, grads = _trained(architecture, steps)
    groups = _groups_by_name(optimizer)
    for name, layout in model_layout(model).items():
        group = HIDDEN if layout.role == "hidden" and layout.matrix_shape[0] >= 2 else FALLBACK
        assert groups[name] == group, f"{name}: {groups[name]} instead of {group}"
        expected = _replayed_alone(layout, start[name], grads[name], group)
        torch.testing.assert_close(model.get_parameter(name).detach(), expected, msg=lambda m, n=name: f"{n}: {m}")
    return optimizer


def _check(architecture: str) -> None:
    if architecture == "gpt2":
        assert_conv1d_updates_match_linear(lambda: _build64("gpt2"), _optimizer, rtol=1e-7, atol=1e-9)
        return
    optimizer = assert_each_matrix_moves_as_alone(architecture)
    groups = _groups_by_name(optimizer)
    for name, group in ROLES.get(architecture, {}).items():
        assert groups[name] == group, f"{architecture} {name}: {groups[name]} instead of {group}"
    if architecture in EXPERTS:
        model, _ = build(architecture)
        layout = model_layout(model)["model.layers.0.mlp.experts.gate_up_proj"]
        assert_each_expert_moves_as_alone(_optimizer, experts=layout.num_matrices, shape=layout.matrix_shape)


CHECKS = [
    MethodCheck(
        "SymmetryCurvature",
        "SymmetryCurvature(model)",
        "each weight moves as its (d_out, d_in) matrix alone with the group of its role (hidden: permutations of the "
        "output units; embeddings, heads, classifiers, vectors: the diagonal fallback), each expert of an expert "
        "tensor as that expert alone, the router as a matrix; GPT-2's Conv1D weights as the transposed update of the "
        "equivalent nn.Linear",
        _check,
    ),
]
