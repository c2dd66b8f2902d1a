"""Robust Bayesian optimization on BoTorch: RCGP, RCGP-UCB, GP-UCB and GP/RCGP Thompson sampling.

Needs the ``[bo]`` extra (``pip install hf-ext[bo]``).
"""

from .adversary import FrequencyLimitedAdversary, NoCorruption
from .config import BayesianOptimizationConfig
from .history import Evaluation
from .loop import RCGPUCB, BayesianOptimization, robust_standardize, ucb_beta
from .rcgp import RobustConjugateGP, adaptive_threshold
from .regret import regret_curves

__all__ = [
    "BayesianOptimization",
    "BayesianOptimizationConfig",
    "Evaluation",
    "FrequencyLimitedAdversary",
    "NoCorruption",
    "RCGPUCB",
    "RobustConjugateGP",
    "adaptive_threshold",
    "regret_curves",
    "robust_standardize",
    "ucb_beta",
]
