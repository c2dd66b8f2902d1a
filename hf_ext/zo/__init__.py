"""Zeroth-order fine-tuning: AGZO (activation-subspace perturbations) and MeZO (isotropic baseline)."""

from .config import AGZOConfig, MeZOConfig, ZOConfig
from .estimator import ZOEstimate, estimate_projected_gradients, zo_gradient_estimate
from .optimizer import ZOOptimizer
from .perturbation import ZOPerturbation
from .subspace import activation_subspace
from .trainer import ZOTrainer

__all__ = [
    "AGZOConfig",
    "MeZOConfig",
    "ZOConfig",
    "ZOEstimate",
    "ZOOptimizer",
    "ZOPerturbation",
    "ZOTrainer",
    "activation_subspace",
    "estimate_projected_gradients",
    "zo_gradient_estimate",
]
