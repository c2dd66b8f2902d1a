"""Curvature estimates averaged over weight-space symmetry groups, the optimizer that steps with them, and the
measurements of estimates against exact Hessians (``estimates``)."""

from .estimates import (
    CurvatureTask,
    agreement,
    exact_hessian,
    gradients_and_kfac,
    pretrain_with_secants,
    psd_sqrt,
    second_moment_estimates,
)
from .groups import GROUPS, SymmetryGroup
from .optimizer import SymmetryCurvature, symmetry_param_groups

__all__ = [
    "GROUPS",
    "CurvatureTask",
    "SymmetryCurvature",
    "SymmetryGroup",
    "agreement",
    "exact_hessian",
    "gradients_and_kfac",
    "pretrain_with_secants",
    "psd_sqrt",
    "second_moment_estimates",
    "symmetry_param_groups",
]
