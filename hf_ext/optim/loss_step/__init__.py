"""SPS and NGN: step sizes computed from the loss value, their Trainer hand-off and the step-size
sensitivity metrics."""

from .base import LossStepOptimizer
from .ngn import NGN
from .sensitivity import near_best_width, ratio_at_multiple, reference_optimum
from .sps import SPS
from .trainer import LossToOptimizerMixin, LossToOptimizerTrainer

__all__ = [
    "NGN",
    "SPS",
    "LossStepOptimizer",
    "LossToOptimizerMixin",
    "LossToOptimizerTrainer",
    "near_best_width",
    "ratio_at_multiple",
    "reference_optimum",
]
