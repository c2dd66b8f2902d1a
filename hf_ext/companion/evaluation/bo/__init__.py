"""How the Bayesian optimization of :mod:`hf_ext.companion.bo` is judged: regret against the true objective, under
an adversary that corrupts a limited number of observations."""

from .adversary import PLACEMENTS, FrequencyLimitedAdversary
from .regret import regret_curves

__all__ = ["PLACEMENTS", "FrequencyLimitedAdversary", "regret_curves"]
