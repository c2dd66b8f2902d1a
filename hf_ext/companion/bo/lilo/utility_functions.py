"""A simulated decision maker's hidden utility functions over outcomes: what it wants, never shown to the optimizer.

Outcomes are on a common scale, ``[0, 1]`` per outcome with 1 the best value seen on the
environment (see :mod:`.environments`); each utility maps ``n x m`` outcomes to ``n`` values and
can say, in words, what matters to it (:meth:`hints`) without giving its formula or numbers.
"""

from dataclasses import dataclass

import torch
from scipy.special import betainc
from torch import Tensor


def _level(value: float) -> str:
    """A number on the outcome scale as a word: the decision maker talks in levels, not digits."""
    return "low" if value < 0.35 else "moderate" if value < 0.65 else "high"


def _check(owner: str, name: str, values: list[float], low: float, high: float) -> None:
    if not values or not all(low <= v <= high for v in values):
        raise ValueError(f"{owner}: `{name}` must be a non-empty list of numbers in [{low}, {high}], got {values}")


@dataclass
class PiecewiseLinearUtility:
    """``sum_j w_j (min(y_j, t_j) + 0.2 max(y_j - t_j, 0))``: each outcome matters until it reaches its threshold."""

    thresholds: list[float]
    weights: list[float]

    def __post_init__(self):
        _check(type(self).__name__, "thresholds", self.thresholds, 0.0, 1.0)
        _check(type(self).__name__, "weights", self.weights, 0.0, 1e6)
        if len(self.weights) != len(self.thresholds):
            raise ValueError("PiecewiseLinearUtility: `weights` and `thresholds` must have the same length")

    def __call__(self, outcomes: Tensor) -> Tensor:
        t = torch.tensor(self.thresholds, dtype=outcomes.dtype)
        w = torch.tensor(self.weights, dtype=outcomes.dtype)
        return (w * (outcomes.clamp(max=t) + 0.2 * (outcomes - t).clamp(min=0))).sum(-1)

    def hints(self, names: list[str]) -> list[str]:
        return [
            f"I need {name} to be at least {_level(t)}; past that, more {name} helps only a little."
            for name, t in zip(names, self.thresholds, strict=True)
        ]


@dataclass
class L1IdealUtility:
    """``-sum_j w_j |y_j - ideal_j|``: the closer to an ideal outcome, the better."""

    ideal: list[float]
    weights: list[float]

    def __post_init__(self):
        _check(type(self).__name__, "ideal", self.ideal, 0.0, 1.0)
        _check(type(self).__name__, "weights", self.weights, 0.0, 1e6)
        if len(self.weights) != len(self.ideal):
            raise ValueError("L1IdealUtility: `weights` and `ideal` must have the same length")

    def __call__(self, outcomes: Tensor) -> Tensor:
        ideal = torch.tensor(self.ideal, dtype=outcomes.dtype)
        return -(torch.tensor(self.weights, dtype=outcomes.dtype) * (outcomes - ideal).abs()).sum(-1)

    def hints(self, names: list[str]) -> list[str]:
        return [
            f"Ideally {name} would be {_level(v)}; too far either way is worse."
            for name, v in zip(names, self.ideal, strict=True)
        ]


@dataclass
class BetaCDFProductUtility:
    """``prod_j BetaCDF(y_j; a_j, b_j)``: every outcome must be good at once (one poor outcome spoils all)."""

    alphas: list[float]
    betas: list[float]

    def __post_init__(self):
        _check(type(self).__name__, "alphas", self.alphas, 1e-3, 1e3)
        _check(type(self).__name__, "betas", self.betas, 1e-3, 1e3)
        if len(self.alphas) != len(self.betas):
            raise ValueError("BetaCDFProductUtility: `alphas` and `betas` must have the same length")

    def __call__(self, outcomes: Tensor) -> Tensor:
        y = outcomes.clamp(0, 1).detach().cpu().numpy()
        return torch.as_tensor(betainc(self.alphas, self.betas, y).prod(-1), dtype=outcomes.dtype)

    def hints(self, names: list[str]) -> list[str]:
        median_like = [a / (a + b) for a, b in zip(self.alphas, self.betas, strict=True)]
        return [
            f"{name} must not be poor: below {_level(m)} it spoils everything."
            for name, m in zip(names, median_like, strict=True)
        ]
