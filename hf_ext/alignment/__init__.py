"""Regularized DPO / SimPO: keep the total length-normalized probability of each preference pair."""

from .dpo import RegularizedDPOConfig, RegularizedDPOTrainer
from .regularizer import REGULARIZER_FORMS, log_total_probability, mean_token_logprobs, probability_regularizer
from .token_shift import TokenShift, token_shift

__all__ = [
    "REGULARIZER_FORMS",
    "RegularizedDPOConfig",
    "RegularizedDPOTrainer",
    "TokenShift",
    "log_total_probability",
    "mean_token_logprobs",
    "probability_regularizer",
    "token_shift",
]
