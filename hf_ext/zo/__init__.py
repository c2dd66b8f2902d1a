"""Zeroth-order fine-tuning: AGZO (activation-subspace perturbations) and MeZO (isotropic baseline)."""

from .config import AGZOConfig, MeZOConfig, ZOConfig
from .estimator import ZOEstimate, estimate_projected_gradients, zo_gradient_estimate
from .perturbation import ZOPerturbation
from .subspace import activation_subspace

__all__ = [
    "AGZOConfig",
    "MeZOConfig",
    "ZOConfig",
    "ZOEstimate",
    "ZOPerturbation",
    "activation_subspace",
    "estimate_projected_gradients",
    "zo_gradient_estimate",
]
