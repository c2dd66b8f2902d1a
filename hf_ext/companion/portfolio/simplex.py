"""The probability simplex: Euclidean projection, the top-K sum and the DC penalty that makes K-sparsity exact.

On the simplex, ``||b||_0 <= K`` iff ``1 - (sum of the K largest entries of b) = 0``: the penalty is a constant
(zero on the simplex's sum) minus a convex function, a difference of convex functions.
"""

import numpy as np

from hf_ext._validation import check_count


def project_simplex(y: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row of ``y`` (or of the vector ``y``) onto the probability simplex.

    The sort-based algorithm (Held, Wolfe and Crowder; Duchi et al. 2008), vectorised over the rows.
    """
    y = np.asarray(y, dtype=np.float64)
    ordered = -np.sort(-y, axis=-1)
    cumulative = np.cumsum(ordered, axis=-1) - 1
    ranks = np.arange(1, y.shape[-1] + 1)
    support = (ordered - cumulative / ranks > 0).sum(axis=-1, keepdims=True)
    threshold = np.take_along_axis(cumulative, support - 1, axis=-1) / support
    return np.maximum(y - threshold, 0.0)


def top_k_indicator(b: np.ndarray, k: int) -> np.ndarray:
    """A subgradient of the top-K sum at ``b``: 1 on (one choice of) the ``k`` largest entries, 0 elsewhere."""
    indicator = np.zeros_like(b)
    indicator[np.argpartition(-b, k - 1)[:k]] = 1.0
    return indicator


def top_k_sum(b: np.ndarray, k: int) -> float:
    """The sum of the ``k`` largest entries of ``b`` (a convex function of ``b``)."""
    return float(b @ top_k_indicator(b, k))


def dc_penalty(b: np.ndarray, k: int) -> float:
    """``1 - top_k_sum(b, k)``: >= 0 on the simplex, and 0 exactly when ``b`` holds at most ``k`` assets."""
    return 1.0 - top_k_sum(b, k)


def project_k_sparse(b: np.ndarray, k: int) -> np.ndarray:
    """The nearest point to ``b`` on the simplex with at most ``k`` nonzero entries: project its ``k`` largest
    entries onto the simplex (exact for Euclidean distance, Kyrillidis et al. 2013), zero the rest."""
    check_count("project_k_sparse", "k", k, 1, len(b))
    keep = np.argpartition(-b, k - 1)[:k]
    sparse = np.zeros_like(b)
    sparse[keep] = project_simplex(b[keep])
    return sparse
