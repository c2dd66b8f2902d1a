"""How the Bayesian optimization of :mod:`hf_ext.companion.bo` is judged: regret against the true objective."""

from .regret import regret_curves

__all__ = ["regret_curves"]
