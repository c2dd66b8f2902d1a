"""Bayesian optimization on BoTorch with pluggable model and acquisition factories; robust BO (RCGP, RCGP-UCB).

Needs the ``[bo]`` extra (``pip install hf-ext[bo]``).
"""

from .adversary import FrequencyLimitedAdversary, NoCorruption
from .config import BayesianOptimizationConfig
from .factories import (
    ClippedGPFactory,
    LogNEIFactory,
    RCGPFactory,
    RelevancePursuitFactory,
    SingleTaskGPFactory,
    ThompsonSamplingFactory,
    UCBFactory,
    robust_standardize,
    ucb_beta,
)
from .history import Evaluation
from .loop import RCGPUCB, BayesianOptimization
from .rcgp import RobustConjugateGP, adaptive_threshold
from .regret import regret_curves

__all__ = [
    "BayesianOptimization",
    "BayesianOptimizationConfig",
    "ClippedGPFactory",
    "Evaluation",
    "FrequencyLimitedAdversary",
    "LogNEIFactory",
    "NoCorruption",
    "RCGPFactory",
    "RCGPUCB",
    "RelevancePursuitFactory",
    "RobustConjugateGP",
    "SingleTaskGPFactory",
    "ThompsonSamplingFactory",
    "UCBFactory",
    "adaptive_threshold",
    "regret_curves",
    "robust_standardize",
    "ucb_beta",
]
