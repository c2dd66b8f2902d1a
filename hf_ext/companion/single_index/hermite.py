"""Normalised probabilists' Hermite polynomials ``h_j = He_j / sqrt(j!)``: an orthonormal basis under N(0, 1).

For ``z ~ N(0, 1)``, ``E[h_j(z) h_k(z)] = delta_jk``, and for unit vectors ``w, w*`` and ``x ~ N(0, I)``,
``E[h_j(<w, x>) h_k(<w*, x>)] = delta_jk <w, w*>^j``: a link's Hermite coefficients say how strongly each
power of the overlap drives learning, and the first nonzero one past ``j = 0`` is its information exponent.
"""

import math
from collections.abc import Callable

import numpy as np
import torch
from numpy.polynomial.hermite_e import hermegauss
from torch import Tensor


def hermite_features(z: Tensor, degree: int) -> Tensor:
    """``[h_0(z), ..., h_degree(z)]`` along a new last axis, by ``h_{j+1} = (z h_j - sqrt(j) h_{j-1}) / sqrt(j+1)``."""
    if degree < 0:
        raise ValueError(f"hermite_features: `degree` must be >= 0, got {degree}")
    features = [torch.ones_like(z), z]
    for j in range(1, degree):
        features.append((z * features[j] - math.sqrt(j) * features[j - 1]) / math.sqrt(j + 1))
    return torch.stack(features[: degree + 1], dim=-1)


def hermite_derivative(coefs: Tensor) -> Tensor:
    """Coefficients of ``phi'`` for ``phi = sum_j coefs[j] h_j``, from ``h_j' = sqrt(j) h_{j-1}`` (same length)."""
    scale = torch.arange(1, len(coefs), dtype=coefs.dtype, device=coefs.device).sqrt()
    return torch.cat([coefs[1:] * scale, coefs.new_zeros(1)])


def hermite_coefficients(link: Callable[[np.ndarray], np.ndarray], degree: int, nodes: int = 100) -> np.ndarray:
    """``c_j = E[link(z) h_j(z)]``, ``z ~ N(0, 1)``, for ``j <= degree`` by Gauss-Hermite(e) quadrature.

    Exact for polynomial links of degree < ``2 nodes - degree``; a kink converges slowly (ReLU's
    coefficients are off by up to 3e-3 at ``nodes=100``; numpy's nodes overflow past about 300).
    """
    z, weights = hermegauss(nodes)
    weights = weights / math.sqrt(2 * math.pi)  # hermegauss integrates against exp(-z^2 / 2)
    basis = hermite_features(torch.from_numpy(z), degree).numpy()
    return (weights * np.asarray(link(z), dtype=float)) @ basis


def information_exponent(coefs, atol: float = 1e-8) -> int | None:
    """Index of the first Hermite coefficient past ``c_0`` with ``|c_j| > atol``; None for a constant link."""
    nonzero = [j for j, c in enumerate(np.asarray(coefs, dtype=float)) if j >= 1 and abs(c) > atol]
    return nonzero[0] if nonzero else None
