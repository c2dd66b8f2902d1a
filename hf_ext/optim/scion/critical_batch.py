"""The constants of the batch-size rule, measured on the user's own model and data, and the rule itself.

In Scion's geometry (the product of the per-layer norm balls, ``||x|| = max_l ||x_l||_l / scale_l``,
dual ``||g||_* = sum_l scale_l ||g_l||_{l,*}``):

- ``L`` (smoothness): ``||grad f(x1) - grad f(x0)||_* / ||x1 - x0||`` over one small Scion step, with
  the same micro-batches at both points so that sampling noise cancels;
- ``mu`` (the mu-KL condition, read as ``||grad f(x)||_* >= mu (f(x) - f*)``): the smaller ratio of
  the two points, with ``f*`` given (0 for cross-entropy: a lower bound);
- ``rho`` (norm equivalence for the noise): the median over micro-batches of
  ``||g_i - g||_* / ||g_i - g||_2``, so that dual-norm noise is ``rho`` times Euclidean noise;
- ``sigma`` (gradient noise per token, Euclidean): ``sqrt(b * sum_i ||g_i - g||_2^2 / (m - 1))`` over
  ``m`` micro-batches of ``b`` predicted tokens each.

:func:`critical_batch_size` applies the rule, and :func:`critical_scaling` holds its two powers of the budget
(the batch schedule grows by them). Our derivation (the paper's constants are not public,
so the O(1) factors are set to 1): after ``n = T/b`` steps of size ``lr`` with ``b`` tokens each,
``f - f* <~ exp(-mu lr n) (f0 - f*) + rho sigma / (mu sqrt(b)) + L lr / mu``. The contraction needs
``lr ~ b / (mu T)``; the two floors then balance at

    b* = B* S* = (T mu rho sigma / L)^(2/3),      lr* = b* / (mu T)  (so lr* ~ T^(-1/3)).

Below ``b*`` the noise floor dominates (larger batches help), above it too few steps remain (they hurt).
"""

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
from torch import nn

from ..._validation import check_finite
from .optimizer import Scion


@dataclass(frozen=True)
class Constants:
    """The measured constants; ``tokens_per_micro_batch`` is the ``b`` of the noise estimate."""

    smoothness: float
    kl: float
    norm_ratio: float
    noise: float
    loss: float
    f_star: float
    tokens_per_micro_batch: float


@dataclass(frozen=True)
class CriticalBatch:
    """The rule's prediction for a budget of ``budget`` tokens, with the estimates it used."""

    budget: float
    tokens_per_step: float
    lr: float
    steps: float
    constants: Constants

    def to_dict(self) -> dict:
        return asdict(self)


def critical_scaling(budget: float, reference: float = 1.0) -> tuple[float, float]:
    """The rule's factors from a budget of ``reference`` tokens to ``budget``: the critical tokens per step grow as
    ``(T / T_0)^(2/3)``, the step size as ``(T_0 / T)^(1/3)``. Every use of the rule (the prediction, the batch
    schedule's stages, a schedule run backwards from a batch) takes its powers from here."""
    return (budget / reference) ** (2 / 3), (reference / budget) ** (1 / 3)


def critical_batch_size(budget: float, constants: Constants) -> CriticalBatch:
    """Predicted tokens per step ``B* S* = (T mu rho sigma / L)^(2/3)`` and step size ``lr* = B* S* / (mu T)``."""
    check_finite("critical_batch_size", "budget", budget)
    if not budget > 0:
        raise ValueError(f"critical_batch_size: `budget` must be > 0 tokens, got {budget}")
    c = constants
    for name in ("smoothness", "kl", "norm_ratio", "noise"):
        value = getattr(c, name)
        check_finite("critical_batch_size", name, value)
        if not value > 0:
            raise ValueError(f"critical_batch_size: the constant `{name}` must be > 0, got {value}")
    # b* is the growth from a budget of one token in units of L / (mu rho sigma)
    tokens, _ = critical_scaling(budget * c.kl * c.norm_ratio * c.noise / c.smoothness)
    return CriticalBatch(budget, tokens, tokens / (c.kl * budget), budget / tokens, c)


def _gradients(model: nn.Module, params: list[nn.Parameter], batches: Sequence[dict]) -> tuple[list, dict, float, list]:
    """Per micro-batch gradients (keyed by parameter) and predicted-token counts, their token-weighted mean
    gradient and the mean loss."""
    grads, losses, tokens = [], [], []
    for batch in batches:
        model.zero_grad(set_to_none=True)
        loss = model(**batch).loss
        loss.backward()
        grads.append({p: p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in params})
        losses.append(loss.item())
        tokens.append((batch["labels"][..., 1:] != -100).sum().item())
    model.zero_grad(set_to_none=True)
    weights = [t / sum(tokens) for t in tokens]
    mean = {p: sum(g[p] * w for g, w in zip(grads, weights, strict=True)) for p in params}
    return grads, mean, sum(x * w for x, w in zip(losses, weights, strict=True)), tokens


def _euclidean(tensors: dict) -> float:
    return sum(t.double().pow(2).sum() for t in tensors.values()).sqrt().item()


def measure_constants(
    model: nn.Module, optimizer: Scion, batches: Sequence[dict], f_star: float = 0.0, probe_lr: float = 1e-3
) -> Constants:
    """Estimate ``L``, ``mu``, ``rho`` and ``sigma`` at the model's current weights from ``batches`` (at least 2
    micro-batches of a causal LM with ``labels``), in ``optimizer``'s geometry. The weights and the
    optimizer's state are left as they were; one probe step of size ``probe_lr`` is taken and undone."""
    check_finite("measure_constants", "f_star", f_star)
    check_finite("measure_constants", "probe_lr", probe_lr)
    if len(batches) < 2:
        raise ValueError(f"measure_constants: `batches` must hold at least 2 micro-batches, got {len(batches)}")
    if not probe_lr > 0:
        raise ValueError(f"measure_constants: `probe_lr` must be > 0, got {probe_lr}")
    params = [p for group in optimizer.param_groups for p in group["params"]]
    was_training = model.training
    model.train()
    grads, mean, loss, tokens = _gradients(model, params, batches)
    deviations = [{p: g[p] - mean[p] for p in params} for g in grads]
    b = sum(tokens) / len(tokens)
    noise = (b * sum(_euclidean(d) ** 2 for d in deviations) / (len(batches) - 1)) ** 0.5
    ratios = sorted(optimizer.dual_norm(d) / max(_euclidean(d), 1e-30) for d in deviations)
    before = {p: p.detach().clone() for p in params}
    with torch.no_grad():
        for p, step in optimizer.lmo_direction(mean).items():
            p.add_(step, alpha=probe_lr)
    moved = optimizer.primal_norm({p: p.detach() - before[p] for p in params})
    _, mean_after, loss_after, _ = _gradients(model, params, batches)
    with torch.no_grad():
        for p in params:
            p.copy_(before[p])
    model.train(was_training)
    smoothness = optimizer.dual_norm({p: mean_after[p] - mean[p] for p in params}) / moved
    kl = min(
        optimizer.dual_norm(mean) / max(loss - f_star, 1e-12),
        optimizer.dual_norm(mean_after) / max(loss_after - f_star, 1e-12),
    )
    return Constants(smoothness, kl, ratios[len(ratios) // 2], noise, loss, f_star, b)
