"""Optimizers and optimizer wrappers: gradient smoothing across depth, Scion."""

from .gradient_smoothing import (
    GradientSmoothing,
    GradientSmoothingFactory,
    distance_weights,
    find_blocks,
    smoothing_matrix,
)
from .newton_schulz import newton_schulz
from .scion import Scion, scion_param_groups

__all__ = [
    "GradientSmoothing",
    "GradientSmoothingFactory",
    "Scion",
    "distance_weights",
    "find_blocks",
    "newton_schulz",
    "scion_param_groups",
    "smoothing_matrix",
]
