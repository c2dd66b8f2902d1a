"""Inverse p-th roots of symmetric positive semi-definite matrices: ``(M + damping I)^(-1/p)``.

The one copy in hf_ext for preconditioners (Shampoo's ``L^(-1/4)``, symmetry curvature's
``S^(-1/2)``). Eigendecomposition in float64: the small matrices of a layer's factor are cheap to
decompose, and float32 rounding in the smallest eigenvalues is what blows an inverse root up.
Negative eigenvalues from rounding are clipped to 0 before the damping is added.
"""

import torch


def eigenvalue_inverse_root(values: torch.Tensor, p: float, damping: float | torch.Tensor = 0.0) -> torch.Tensor:
    """``(max(values, 0) + damping)^(-1/p)``: the inverse root of a matrix given by its eigenvalues."""
    return (values.clamp(min=0) + damping).pow(-1.0 / p)


def inverse_root(matrix: torch.Tensor, p: float, damping: float | torch.Tensor = 0.0) -> torch.Tensor:
    """``(M + damping I)^(-1/p)`` of a symmetric PSD ``matrix`` (or a batch ``(..., d, d)``), in its dtype.

    ``damping``: a number, or a tensor broadcast against the eigenvalues ``(..., d)`` (one damping per matrix of a
    batch; not checked, so that a step reads no value back from the device)."""
    if matrix.dim() < 2 or matrix.shape[-1] != matrix.shape[-2]:
        raise ValueError(f"inverse_root: `matrix` must be square, got shape {tuple(matrix.shape)}")
    if not p >= 1:
        raise ValueError(f"inverse_root: `p` must be >= 1, got {p}")
    if not isinstance(damping, torch.Tensor) and not damping >= 0:
        raise ValueError(f"inverse_root: `damping` must be >= 0, got {damping}")
    values, vectors = torch.linalg.eigh(matrix.double())
    root = (vectors * eigenvalue_inverse_root(values, p, damping).unsqueeze(-2)) @ vectors.mT
    return root.to(matrix.dtype)
