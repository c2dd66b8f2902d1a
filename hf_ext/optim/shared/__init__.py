"""Numerics and plumbing that several optimizers share: Newton-Schulz orthogonalization, inverse matrix roots,
and the base class of optimizers that wrap another one. No method lives here."""

from .inverse_root import eigenvalue_inverse_root, inverse_root
from .newton_schulz import newton_schulz
from .wrapper import OptimizerWrapper

__all__ = ["OptimizerWrapper", "eigenvalue_inverse_root", "inverse_root", "newton_schulz"]
