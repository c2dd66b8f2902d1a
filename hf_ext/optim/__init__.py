"""Optimizers and optimizer wrappers: gradient smoothing across depth, SPS and NGN (step size from the loss)."""

from .gradient_smoothing import (
    GradientSmoothing,
    GradientSmoothingFactory,
    distance_weights,
    find_blocks,
    smoothing_matrix,
)
from .loss_step import LossStepOptimizer
from .loss_trainer import LossToOptimizerMixin, LossToOptimizerTrainer
from .ngn import NGN
from .sensitivity import near_best_width, ratio_at_multiple
from .sps import SPS

__all__ = [
    "NGN",
    "SPS",
    "GradientSmoothing",
    "GradientSmoothingFactory",
    "LossStepOptimizer",
    "LossToOptimizerMixin",
    "LossToOptimizerTrainer",
    "distance_weights",
    "find_blocks",
    "near_best_width",
    "ratio_at_multiple",
    "smoothing_matrix",
]
