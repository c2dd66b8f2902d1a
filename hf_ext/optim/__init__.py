"""Optimizers and optimizer wrappers: gradient smoothing across depth."""

from .gradient_smoothing import (
    GradientSmoothing,
    GradientSmoothingFactory,
    distance_weights,
    find_blocks,
    smoothing_matrix,
)

__all__ = ["GradientSmoothing", "GradientSmoothingFactory", "distance_weights", "find_blocks", "smoothing_matrix"]
