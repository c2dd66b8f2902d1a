"""Anytime metrics of a search: primal gap, primal integral over wall-clock, time to target (Berthold 2013)."""

import numpy as np


def primal_gap(value: float, reference: float) -> float:
    """|value - reference| / max(|value|, |reference|) in [0, 1]; 1 without a solution or when signs differ."""
    if not np.isfinite(value):
        return 1.0
    if value == reference:
        return 0.0
    if value * reference < 0:
        return 1.0
    return abs(value - reference) / max(abs(value), abs(reference))


def primal_integral(times, values, reference: float, horizon: float) -> float:
    """Integral over [0, horizon] seconds of the incumbent's primal gap (1 before the first solution).

    ``times``/``values``: when each new incumbent appeared and its objective; lower is better and faster.
    """
    total, last_time, last_gap = 0.0, 0.0, 1.0
    for t, v in zip(times, values, strict=True):
        t = min(float(t), horizon)
        total += last_gap * (t - last_time)
        last_time, last_gap = t, primal_gap(v, reference)
    return total + last_gap * (horizon - last_time)


def time_to_target(times, values, target: float) -> float:
    """First time the incumbent's objective is <= target; inf if never."""
    for t, v in zip(times, values, strict=True):
        if v <= target:
            return float(t)
    return float("inf")
