"""Gaussian single-index data ``y = phi*(<w*, x>) + noise``, ``x ~ N(0, I_d)``, and starts at a chosen overlap.

The links are Hermite polynomials and mixtures with unit variance under N(0, 1), so that their
information exponent (1 to 4) is the only thing that differs between them.
"""

import math

import numpy as np
import torch

from .hermite import hermite_coefficients, hermite_features

# name -> {Hermite degree: coefficient}, each link of unit variance (sum of squared coefficients 1).
LINKS = {
    "he1": {1: 1.0},
    "he2": {2: 1.0},
    "he3": {3: 1.0},
    "he4": {4: 1.0},
    "he1+he3": {1: 1 / math.sqrt(2), 3: 1 / math.sqrt(2)},
    "he2+he3": {2: 1 / math.sqrt(2), 3: 1 / math.sqrt(2)},
    "he3+he4": {3: 1 / math.sqrt(2), 4: 1 / math.sqrt(2)},
}


def link_coefficients(name: str, degree: int) -> np.ndarray:
    """Hermite coefficients ``c_0..c_degree`` of link ``name``: one of :data:`LINKS`, or ``"relu"``.

    ``"relu"`` is ``max(z, 0)`` standardised to mean 0 and variance 1 and projected on ``h_0..h_degree``:
    the fixed activation of a single ReLU neuron, the "wrong link" baseline (its ``c_3`` is 0).
    """
    if name == "relu":
        mean, std = 1 / math.sqrt(2 * math.pi), math.sqrt(0.5 - 1 / (2 * math.pi))
        return hermite_coefficients(lambda z: (np.maximum(z, 0) - mean) / std, degree)
    if name not in LINKS:
        raise ValueError(f"link_coefficients: `name` must be one of {[*LINKS, 'relu']}, got {name!r}")
    coefs = np.zeros(degree + 1)
    for j, c in LINKS[name].items():
        if j > degree:
            raise ValueError(f"link_coefficients: link {name!r} has degree {j} > `degree` {degree}")
        coefs[j] = c
    return coefs


def evaluate_link(coefs: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``sum_j coefs[j] h_j(z)``."""
    return hermite_features(torch.as_tensor(z, dtype=torch.float64), len(coefs) - 1).numpy() @ np.asarray(coefs)


def gaussian_single_index(
    n: int, d: int, link: str = "he2", noise: float = 0.1, seed: int = 0, w_star: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X, y, w_star)``: ``n`` rows of ``x ~ N(0, I_d)``, ``y = link(<w*, x>) + noise * N(0, 1)``.

    ``w_star`` is a uniformly random unit vector unless given (pass it to draw test data for the same model).
    """
    rng = np.random.default_rng(seed)
    if w_star is None:
        w_star = rng.standard_normal(d)
        w_star /= np.linalg.norm(w_star)
    X = rng.standard_normal((n, d))
    coefs = link_coefficients(link, 4)  # every link of LINKS has degree <= 4; "relu" is its degree-4 projection
    y = evaluate_link(coefs, X @ w_star) + noise * rng.standard_normal(n)
    return X, y, w_star


def direction_with_overlap(w_star: np.ndarray, overlap: float, seed: int = 0) -> np.ndarray:
    """A unit vector ``w0`` with ``<w0, w*> = overlap`` (in [-1, 1]), uniformly random otherwise.

    The random part is a fresh draw projected off ``w*``; a draw (nearly) parallel to ``w*``, as when
    ``w*`` itself was drawn with the same seed, is replaced by the generator's next one.
    """
    if not -1 <= overlap <= 1:
        raise ValueError(f"direction_with_overlap: `overlap` must be in [-1, 1], got {overlap}")
    w_star = np.asarray(w_star, dtype=float)
    norm = np.linalg.norm(w_star)
    if w_star.ndim != 1 or not np.isfinite(norm) or norm == 0:
        raise ValueError("direction_with_overlap: `w_star` must be a finite non-zero 1-d vector")
    w_star = w_star / norm
    if len(w_star) == 1:
        if abs(overlap) != 1:
            raise ValueError(f"direction_with_overlap: in 1 dimension `overlap` must be -1 or 1, got {overlap}")
        return overlap * w_star
    rng = np.random.default_rng(seed)
    while True:
        other = rng.standard_normal(len(w_star))
        scale = np.linalg.norm(other)
        for _ in range(2):  # twice: one projection leaves rounding error along w* when `other` is nearly parallel
            other -= (other @ w_star) * w_star
        if np.linalg.norm(other) > 1e-6 * scale:
            break
    other /= np.linalg.norm(other)
    return overlap * w_star + math.sqrt(1 - overlap**2) * other
