"""Misranking: how often the noise reverses the order of two candidates, the quantity PEM's claim is about.

PEM is claimed to gain where the noise is large against the fitness spread of a population. That is measured
here as the pair misranking probability of a generation: over the pairs of its candidates whose true
(noise-free) values differ, the fraction that the observed values put in the opposite order. 0 is a noiseless
ranking, 1/2 a random one; it equals ``(1 - tau) / 2`` for Kendall's tau between observed and true values
when neither has ties.
"""

import numpy as np

from hf_ext.companion.es.config import check_popsize


def pair_misranking(observed, true) -> float:
    """The fraction of the pairs with distinct ``true`` values that ``observed`` orders the other way (an
    observed tie counts one half); NaN when no two true values differ."""
    observed, true = np.asarray(observed, dtype=float), np.asarray(true, dtype=float)
    if observed.shape != true.shape or observed.ndim != 1:
        raise ValueError(
            f"pair_misranking: `observed` and `true` must be 1-D of one length, got {observed.shape} and {true.shape}"
        )
    first, second = np.triu_indices(observed.size, 1)
    true_order = np.sign(true[first] - true[second])
    observed_order = np.sign(observed[first] - observed[second])
    distinct = true_order != 0
    if not distinct.any():
        return float("nan")
    reversed_ = np.where(observed_order == 0, 0.5, (observed_order != true_order).astype(float))
    return float(reversed_[distinct].mean())


def misranking_by_generation(observed, true, popsize: int) -> np.ndarray:
    """:func:`pair_misranking` of each consecutive block of ``popsize`` evaluations (the generations of an ES
    that evaluates each candidate once; for any other method, its evaluations in order); a last partial block is
    dropped."""
    check_popsize("misranking_by_generation", popsize, optional=False)
    observed, true = np.asarray(observed, dtype=float), np.asarray(true, dtype=float)
    blocks = observed.size // popsize
    return np.array(
        [
            pair_misranking(observed[b * popsize : (b + 1) * popsize], true[b * popsize : (b + 1) * popsize])
            for b in range(blocks)
        ]
    )
