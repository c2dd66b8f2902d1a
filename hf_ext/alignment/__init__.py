"""Regularized DPO / SimPO: keep the total length-normalized probability of each preference pair."""

from .dpo import RegularizedDPOConfig, RegularizedDPOTrainer
from .regularizer import REGULARIZER_FORMS, log_total_probability, mean_token_logprobs, probability_regularizer
from .token_shift import TokenShift, token_shift, write_report

__all__ = [
    "REGULARIZER_FORMS",
    "RegularizedDPOConfig",
    "RegularizedDPOTrainer",
    "RegularizedSimPOConfig",
    "RegularizedSimPOTrainer",
    "TokenShift",
    "log_total_probability",
    "mean_token_logprobs",
    "probability_regularizer",
    "token_shift",
    "write_report",
]


def __getattr__(name: str):
    # SimPO lives in trl.experimental, whose import warns; load it only when asked for.
    if name in ("RegularizedSimPOConfig", "RegularizedSimPOTrainer"):
        from . import simpo

        return getattr(simpo, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
