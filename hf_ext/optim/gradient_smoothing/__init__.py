"""Gradient smoothing across depth: a wrapper that mixes each block's gradient with its neighbours'
before any optimizer steps."""

from .smoothing import GradientSmoothing, GradientSmoothingFactory, distance_weights, find_blocks, smoothing_matrix

__all__ = ["GradientSmoothing", "GradientSmoothingFactory", "distance_weights", "find_blocks", "smoothing_matrix"]
