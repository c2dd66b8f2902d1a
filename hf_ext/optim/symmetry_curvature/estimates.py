"""Curvature estimates of one weight matrix against its exact Hessian: what the accuracy part of
``recipes/symmetry_curvature.py`` measures (docs/results/symmetry_curvature.md, *Accuracy and optimization*, (a)).

For a weight ``W`` (m x n) of a model: the exact Hessian of a loss with respect to ``W`` alone
(``torch.func.hessian`` through ``functional_call``), minibatch gradients and the layer's KFAC factors,
every estimate of the gradient second moment as a dense ``(mn, mn)`` matrix (each symmetry group's
``mean R2(g g^T)``, the full ``mean g g^T``, KFAC-style ``E[dd^T] kron E[aa^T]``, Shampoo-style
``L^(1/2) kron R^(1/2)``) with the numbers it stores, and how well an estimate agrees with the Hessian.
Dense and float64: for layers of a few thousand weights, as a measurement, never inside a step.
"""

from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call, hessian

from .groups import SymmetryGroup


class CurvatureTask:
    """A model, a seeded minibatch sampler ``batch()`` and ``loss(model, inputs)``: what the measurements need."""

    def __init__(self, model: nn.Module, batch: Callable[[], object], loss: Callable[..., torch.Tensor]):
        self.model, self.batch, self.loss = model, batch, loss


def pretrain_with_secants(task: CurvatureTask, steps: int, names: list[str], keep: int) -> dict[str, torch.Tensor]:
    """``steps`` AdamW steps (lr 1e-2); the weights ``names``' changes over the last ``keep`` steps (secant
    directions), as the columns of an ``(mn, keep)`` float64 matrix each."""
    optimizer = torch.optim.AdamW(task.model.parameters(), lr=1e-2)
    weights = dict(task.model.named_parameters())
    secants = {name: [] for name in names}
    for step in range(steps):
        before = {name: weights[name].detach().clone() for name in names} if step >= steps - keep else None
        optimizer.zero_grad()
        task.loss(task.model, task.batch()).backward()
        optimizer.step()
        for name in names if before else ():
            secants[name].append((weights[name].detach() - before[name]).flatten().double())
    return {name: torch.stack(columns, dim=1) for name, columns in secants.items()}


def exact_hessian(task: CurvatureTask, name: str, inputs) -> torch.Tensor:
    """The Hessian of the loss on ``inputs`` with respect to the weight ``name`` alone, as ``(mn, mn)`` float64."""
    weight = dict(task.model.named_parameters())[name].detach()

    def loss(w: torch.Tensor) -> torch.Tensor:
        model = lambda *args, **kwargs: functional_call(task.model, {name: w}, args, kwargs)  # noqa: E731
        return task.loss(model, inputs)

    return hessian(loss)(weight).reshape(weight.numel(), weight.numel()).double()


def gradients_and_kfac(task: CurvatureTask, name: str, batches: int):
    """``batches`` minibatch gradients of the weight ``name`` (out, in), float64, and the KFAC factors of its layer:
    ``E[d d^T]`` over the layer's output gradients and ``E[a a^T]`` over its inputs (every sample and token)."""
    weight = dict(task.model.named_parameters())[name]
    layer = task.model.get_submodule(name.rpartition(".")[0])
    inputs, grads = [], []

    def keep(module, args, output):
        inputs.append(args[0].detach().reshape(-1, args[0].shape[-1]))
        output.register_hook(lambda g: grads.append(g.detach().reshape(-1, g.shape[-1])))

    handle = layer.register_forward_hook(keep)
    gradients = []
    try:
        for _ in range(batches):
            task.model.zero_grad()
            task.loss(task.model, task.batch()).backward()
            gradients.append(weight.grad.detach().double().clone())
    finally:
        handle.remove()
    a, d = torch.cat(inputs).double(), torch.cat(grads).double()
    return gradients, d.T @ d / len(d), a.T @ a / len(a)


def psd_sqrt(matrix: torch.Tensor) -> torch.Tensor:
    """The square root of a symmetric PSD ``matrix`` (negative eigenvalues from rounding clipped to 0)."""
    values, vectors = torch.linalg.eigh(matrix)
    return (vectors * values.clamp(min=0).sqrt()) @ vectors.T


def second_moment_estimates(
    gradients: list[torch.Tensor], kfac: tuple[torch.Tensor, torch.Tensor], groups: list[str]
) -> dict[str, tuple[torch.Tensor, int]]:
    """Each estimate of the gradient second moment as a dense ``(mn, mn)`` matrix, with the numbers it stores:
    ``full``, ``kfac_style``, ``shampoo_style`` and one per group spec ``"rows:cols"`` of ``groups``."""
    m, n = gradients[0].shape
    mean = lambda items: sum(items) / len(items)  # noqa: E731
    full = mean([torch.outer(g.flatten(), g.flatten()) for g in gradients])
    left, right = mean([g @ g.T for g in gradients]), mean([g.T @ g for g in gradients])
    kron_storage = m * (m + 1) // 2 + n * (n + 1) // 2
    out = {
        "full": (full, m * n * (m * n + 1) // 2),
        "kfac_style": (torch.kron(*kfac), kron_storage),
        "shampoo_style": (torch.kron(psd_sqrt(left), psd_sqrt(right)), kron_storage),
    }
    for spec in groups:
        group = SymmetryGroup(*spec.split(":"))
        out[spec] = (group.dense(mean([group.second_moment(g) for g in gradients]), m, n), group.storage(m, n))
    return out


def agreement(estimate: torch.Tensor, exact: torch.Tensor, directions: torch.Tensor, secants: torch.Tensor) -> dict:
    """Frobenius cosine, relative error after the best rescaling, mean cosine of the actions on random
    ``directions`` and on ``secants`` (columns)."""
    inner = (estimate * exact).sum()
    cosine = inner / (estimate.norm() * exact.norm()).clamp(min=1e-300)
    scale = inner / (estimate * estimate).sum().clamp(min=1e-300)

    def actions(u):
        return nn.functional.cosine_similarity(estimate @ u, exact @ u, dim=0).mean().item()

    return {
        "cosine": cosine.item(),
        "relative_error": ((scale * estimate - exact).norm() / exact.norm()).item(),
        "action_cosine": actions(directions),
        "secant_cosine": actions(secants),
    }
