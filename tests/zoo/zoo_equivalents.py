"""Equivalent models that a method's result on a zoo model is checked against.

A GPT-2 ``Conv1D`` computes ``x @ W + b`` with ``W`` stored ``(in, out)``; the same network with each one
replaced by ``nn.Linear`` holding ``W.T`` computes the same function, so any method must move each
``Conv1D`` weight by the transpose of what it moves the ``nn.Linear`` weight.
"""

import copy

import torch
from torch import nn

from hf_ext.models.layout import is_conv1d


def conv1d_as_linear(model: nn.Module) -> nn.Module:
    """A copy of ``model`` with every ``Conv1D`` replaced by the ``nn.Linear`` that computes the same map."""
    twin = copy.deepcopy(model)
    for name, module in list(twin.named_modules()):
        if not is_conv1d(module):
            continue
        d_in, d_out = module.weight.shape
        linear = nn.Linear(d_in, d_out, bias=module.bias is not None, dtype=module.weight.dtype)
        with torch.no_grad():
            linear.weight.copy_(module.weight.T)
            if module.bias is not None:
                linear.bias.copy_(module.bias)
        parent_name, _, child = name.rpartition(".")
        setattr(twin.get_submodule(parent_name), child, linear)
    return twin


def as_stored(model: nn.Module, name: str, tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``, a value for ``conv1d_as_linear(model)``'s parameter ``name``, as ``model`` stores it."""
    module_name = name.rpartition(".")[0]
    if name.endswith(".weight") and is_conv1d(model.get_submodule(module_name)):
        return tensor.T
    return tensor


def conv1d_weight_names(model: nn.Module) -> list[str]:
    """Names of the ``Conv1D`` weights of ``model``: where the two layouts differ."""
    return [f"{name}.weight" for name, module in model.named_modules() if is_conv1d(module)]


def optimizer_updates(model: nn.Module, batch: dict, make_optimizer, steps: int = 2) -> dict[str, torch.Tensor]:
    """How far ``steps`` steps of ``make_optimizer(model)`` move each parameter of ``model`` on ``batch``.

    The step takes a closure that recomputes the loss and its gradients, so optimizers that need the loss
    (SPS, NGN) and those that do not step the same way.
    """
    optimizer = make_optimizer(model)
    before = {name: param.detach().clone() for name, param in model.named_parameters()}

    def closure():
        optimizer.zero_grad()
        loss = model(**batch).loss
        loss.backward()
        return loss

    for _ in range(steps):
        closure()
        optimizer.step(closure)
    return {name: param.detach() - before[name] for name, param in model.named_parameters()}


def assert_conv1d_updates_match_linear(build, make_optimizer, steps: int = 2, rtol=1e-5, atol=1e-7) -> None:
    """``make_optimizer`` moves a ``Conv1D`` model exactly as it moves the same model with ``nn.Linear`` layers.

    ``build()`` returns ``(model, batch)``; every parameter's update is compared, the ``Conv1D`` weights
    transposed, so a method that reads a stored ``(in, out)`` weight as ``(out, in)`` fails here.
    """
    model, batch = build()
    names = conv1d_weight_names(model)
    assert names, "the model has no Conv1D layer to check"
    twin = conv1d_as_linear(model)
    moved = optimizer_updates(model, batch, make_optimizer, steps)
    expected = optimizer_updates(twin, batch, make_optimizer, steps)
    for name, delta in moved.items():
        torch.testing.assert_close(
            delta, as_stored(model, name, expected[name]), rtol=rtol, atol=atol, msg=lambda m, n=name: f"{n}: {m}"
        )
    assert any(moved[name].abs().max() > 0 for name in names), "the Conv1D weights did not move"


class _Experts(nn.Module):
    """A mixture-of-experts tensor ``(experts, out, in)`` as transformers 5 stores it, alone."""

    def __init__(self, stacked: torch.Tensor):
        super().__init__()
        self.gate_up_proj = nn.Parameter(stacked.clone())


class _Alone(nn.Module):
    """The same experts as separate ``nn.Linear`` layers: what each expert alone would be."""

    def __init__(self, stacked: torch.Tensor):
        super().__init__()
        self.experts = nn.ModuleList(nn.Linear(s.shape[1], s.shape[0], bias=False) for s in stacked)
        with torch.no_grad():
            for linear, weight in zip(self.experts, stacked, strict=True):
                linear.weight.copy_(weight)


def assert_each_expert_moves_as_alone(make_optimizer, experts=4, shape=(12, 8), steps=2, rtol=1e-5, atol=1e-6):
    """``make_optimizer`` moves each expert of a ``(experts, out, in)`` tensor as it moves that expert alone.

    The gradients are fixed random tensors (one per step), the same for the stack and for the lone experts.
    """
    generator = torch.Generator().manual_seed(0)
    weights = torch.randn(experts, *shape, generator=generator)
    grads = [torch.randn(experts, *shape, generator=generator) for _ in range(steps)]
    stacked, alone = _Experts(weights), _Alone(weights)
    stacked_optimizer, alone_optimizer = make_optimizer(stacked), make_optimizer(alone)
    for grad in grads:
        stacked.gate_up_proj.grad = grad.clone()
        for linear, g in zip(alone.experts, grad, strict=True):
            linear.weight.grad = g.clone()
        stacked_optimizer.step()
        alone_optimizer.step()
    expected = torch.stack([linear.weight.detach() for linear in alone.experts])
    torch.testing.assert_close(stacked.gate_up_proj.detach(), expected, rtol=rtol, atol=atol)
    assert not torch.equal(stacked.gate_up_proj.detach(), weights), "the experts did not move"
