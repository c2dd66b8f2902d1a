"""GLNS's neighbourhood signal: how often a variable's prediction changes along a denoising trajectory."""

import numpy as np


def instability(trajectory: np.ndarray) -> np.ndarray:
    """Per-variable instability of a trajectory of column-bit predictions, shape (timesteps, columns).

    Probabilities in [0, 1] are rounded to bits; the score is the fraction of consecutive timesteps whose bit
    flips, plus the mean distance of the probabilities from a confident 0/1 (breaks ties between never-flipping
    variables). Variables the model keeps changing its mind about mark where local repair pays off.
    """
    trajectory = np.asarray(trajectory, dtype=np.float64)
    if trajectory.ndim != 2 or trajectory.shape[0] < 2:
        raise ValueError(f"instability: `trajectory` must have shape (timesteps >= 2, columns), got {trajectory.shape}")
    if np.any((trajectory < 0) | (trajectory > 1)) or not np.all(np.isfinite(trajectory)):
        raise ValueError("instability: `trajectory` must hold probabilities in [0, 1]")
    bits = trajectory >= 0.5
    flips = (bits[1:] != bits[:-1]).mean(axis=0)
    uncertainty = 1.0 - 2.0 * np.abs(trajectory - 0.5).mean(axis=0)
    return flips + 1e-3 * uncertainty
