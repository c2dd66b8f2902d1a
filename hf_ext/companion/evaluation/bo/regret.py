"""Regret against the true (uncorrupted) objective, the way BO papers report it."""

import torch


def regret_curves(true_values: torch.Tensor, optimum: float, tolerance: float = 0.0) -> dict[str, torch.Tensor]:
    """Per-round simple, cumulative and lenient regret of a run that queried points with ``true_values``.

    ``gap_t = optimum - f(x_t)``; simple regret is ``optimum - max_{s<=t} f(x_s)``; cumulative is
    ``sum_{s<=t} gap_s``; lenient counts only the gaps larger than ``tolerance``.
    """
    values = torch.as_tensor(true_values, dtype=torch.float64).flatten()
    if not torch.isfinite(values).all():
        raise ValueError("regret_curves: `true_values` must be finite (regret is measured on the true objective)")
    if tolerance < 0:
        raise ValueError(f"regret_curves: `tolerance` must be >= 0, got {tolerance}")
    gaps = optimum - values
    return {
        "simple": optimum - torch.cummax(values, 0).values,
        "cumulative": gaps.cumsum(0),
        "lenient": torch.where(gaps > tolerance, gaps, torch.zeros_like(gaps)).cumsum(0),
    }
