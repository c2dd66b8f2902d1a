"""Curvature estimates averaged over weight-space symmetry groups, and the optimizer that steps with them."""

from .groups import GROUPS, SymmetryGroup
from .optimizer import SymmetryCurvature, symmetry_param_groups

__all__ = ["GROUPS", "SymmetryCurvature", "SymmetryGroup", "symmetry_param_groups"]
