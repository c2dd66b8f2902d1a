"""MuonWithAdamW on the zoo: Muon on each hidden matrix (each expert alone), AdamW on the rest, by model_layout."""

import torch
from torch import nn
from zoo_architectures import build
from zoo_equivalents import assert_conv1d_updates_match_linear, assert_each_expert_moves_as_alone
from zoo_matrix import MethodCheck

from hf_ext.models.layout import model_layout
from hf_ext.optim import MuonWithAdamW

LR = 0.01


def _make(model):
    return MuonWithAdamW(model, lr=LR)


def _muon_steps(layout) -> bool:
    return layout.role == "hidden" and (layout.stacked or len(layout.shape) == 2)


def _lone_step(layout, before: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """Where torch's own optimizer moves this parameter alone: ``torch.optim.Muon`` on each matrix (each expert its
    own parameter), ``torch.optim.AdamW`` on anything else; MuonWithAdamW's settings."""
    matrices = before.unbind(0) if layout.stacked else [before]
    grads = grad.unbind(0) if layout.stacked else [grad]
    lone = [nn.Parameter(m.clone()) for m in matrices]
    for p, g in zip(lone, grads, strict=True):
        p.grad = g.clone()
    if _muon_steps(layout):
        torch.optim.Muon(lone, lr=LR, weight_decay=0.0, adjust_lr_fn="match_rms_adamw").step()
    else:
        torch.optim.AdamW(lone, lr=LR, weight_decay=0.0).step()
    return torch.stack([p.detach() for p in lone]) if layout.stacked else lone[0].detach()


def _assert_each_matrix_moves_as_alone(model, batch) -> None:
    """One step moves each parameter where torch's Muon moves each of its matrices alone (AdamW: the rest)."""
    optimizer = _make(model)
    layouts = model_layout(model)
    muon = {id(p) for group in optimizer.param_groups if group["use_muon"] for p in group["params"]}
    assert {n for n, layout in layouts.items() if _muon_steps(layout)} == {
        n for n in layouts if id(model.get_parameter(n)) in muon
    }
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    model(**batch).loss.backward()
    optimizer.step()
    for name, layout in layouts.items():
        param = model.get_parameter(name)
        if param.grad is not None:
            expected = _lone_step(layout, before[name], param.grad)
            torch.testing.assert_close(param.detach(), expected, rtol=0, atol=0, msg=name)


def check(architecture: str) -> None:
    if architecture == "gpt2":  # Muon's step on a transposed matrix is the transposed step: checked, not assumed
        assert_conv1d_updates_match_linear(lambda: build("gpt2"), _make)
        return
    model, batch = build(architecture)
    _assert_each_matrix_moves_as_alone(model, batch)
    layouts = model_layout(model)
    if any(layout.stacked for layout in layouts.values()):
        assert_each_expert_moves_as_alone(_make, rtol=0, atol=0)
        assert _muon_steps(layouts["model.layers.0.mlp.gate.weight"])  # the router: Muon, as a matrix
    if architecture == "bert":
        assert not _muon_steps(layouts["classifier.weight"])  # the classifier head: AdamW


CHECKS = [
    MethodCheck(
        "MuonWithAdamW",
        "MuonWithAdamW(model, lr)",
        "one step moves each hidden matrix (model_layout) as torch.optim.Muon moves it alone, each expert of a "
        "mixture-of-experts tensor alone and the router as a matrix, bit for bit, and every other parameter "
        "(embeddings, output and classifier heads, vectors) as torch.optim.AdamW; GPT-2's Conv1D weights move as "
        "the equivalent nn.Linear's (transposed)",
        check,
    ),
]
