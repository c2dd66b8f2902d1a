"""How sensitive a method is to its step size: the width of its near-best range, and its loss at 10x the best.

Both read one curve per method, final loss against a log grid of step sizes (diverged runs are
``inf``). ``values`` are what is compared: the suboptimality ``f - f*`` on a convex problem, the
final loss on a non-convex one. A step size is *near best* when its value is within ``tolerance``
(10%) of the best value; the width is the length, in decades, of the contiguous near-best range
around the best step size, extended to where the curve (linear in log-log between grid points)
crosses ``(1 + tolerance) * best``, so that a single grid point still has a width. On a convex problem ``f*`` is
:func:`reference_optimum`'s.
"""

import math
from collections.abc import Callable, Sequence

import torch
from torch import nn


def _log(value: float) -> float:
    return math.log10(value) if value > 0 else -math.inf


def near_best_width(step_sizes: Sequence[float], values: Sequence[float], tolerance: float = 0.1) -> tuple[float, bool]:
    """Width in decades of the near-best range, and whether it reaches the end of the grid (then a lower bound)."""
    if len(step_sizes) != len(values) or len(step_sizes) < 2:
        raise ValueError("near_best_width: need as many values as step sizes, at least 2")
    if step_sizes[0] <= 0 or any(b <= a for a, b in zip(step_sizes, step_sizes[1:], strict=False)):
        raise ValueError(f"near_best_width: `step_sizes` must be positive and increasing, got {list(step_sizes)}")
    values = list(values)
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return 0.0, False
    best = values.index(min(finite))
    threshold = _log((1 + tolerance) * values[best]) if values[best] > 0 else -math.inf
    logs = [math.log10(s) for s in step_sizes]

    def near(i: int) -> bool:
        return math.isfinite(values[i]) and _log(values[i]) <= threshold

    def edge(inside: int, step: int) -> tuple[float, bool]:
        while 0 <= inside + step < len(values) and near(inside + step):
            inside += step
        outside = inside + step
        if not 0 <= outside < len(values):
            return logs[inside], True
        if not math.isfinite(values[outside]) or not math.isfinite(threshold):
            return logs[inside], False
        a, b = _log(values[inside]), _log(values[outside])
        fraction = (threshold - a) / (b - a)
        return logs[inside] + fraction * (logs[outside] - logs[inside]), False

    (low, low_censored), (high, high_censored) = edge(best, -1), edge(best, 1)
    return high - low, low_censored or high_censored


def ratio_at_multiple(step_sizes: Sequence[float], values: Sequence[float], multiple: float = 10.0) -> float | None:
    """The value at ``multiple`` x the best step size over the best value (``None``: off the grid)."""
    values = list(values)
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return None
    best = values.index(min(finite))
    target = math.log10(step_sizes[best] * multiple)
    for step_size, value in zip(step_sizes, values, strict=True):
        if abs(math.log10(step_size) - target) < 1e-6:
            return value / values[best] if values[best] > 0 else math.inf
    return None


def reference_optimum(model: nn.Module, loss: Callable[[nn.Module], torch.Tensor]) -> nn.Module:
    """``model`` moved to the minimum of the convex full-batch ``loss(model)`` by L-BFGS in float64 (strong Wolfe line
    search, 500 iterations, tolerances near float64's resolution): the optimum that ``f - f*`` is measured from.

    Works in place and returns ``model``, converted to float64.
    """
    model.double()
    optimizer = torch.optim.LBFGS(
        model.parameters(), max_iter=500, tolerance_grad=1e-12, tolerance_change=1e-16, line_search_fn="strong_wolfe"
    )

    def closure():
        optimizer.zero_grad()
        value = loss(model)
        value.backward()
        return value

    optimizer.step(closure)
    return model
