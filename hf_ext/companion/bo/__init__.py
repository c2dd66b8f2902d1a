"""Bayesian optimization on BoTorch with pluggable model and acquisition factories; robust BO (RCGP, RCGP-UCB).

Needs the ``[bo]`` extra (``pip install hf-ext[bo]``). The regret a run is judged by and the adversary that corrupts
its observations in the robust BO experiments are in :mod:`hf_ext.companion.evaluation.bo`.
"""

from .adversary import NoCorruption
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

__all__ = [
    "BayesianOptimization",
    "BayesianOptimizationConfig",
    "ClippedGPFactory",
    "Evaluation",
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
    "robust_standardize",
    "ucb_beta",
]
