"""Weighted set cover as a 0/1 MIP solved by HiGHS (``highspy``), with a time limit and a warm start."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from .._highs import solve_binary_program

if TYPE_CHECKING:
    import highspy


@dataclass
class MipResult:
    selected: np.ndarray  # boolean column mask (the warm start when HiGHS found nothing better)
    objective: float
    bound: float  # HiGHS's dual bound: a lower bound on the optimum
    status: "highspy.HighsModelStatus"  # HiGHS's model status, e.g. kOptimal or kTimeLimit
    optimal: bool  # HiGHS proved ``selected`` optimal


def solve_mip(
    costs: np.ndarray,
    matrix: sp.csc_array,
    time_limit: float,
    warm_start: np.ndarray | None = None,
    threads: int = 1,
    on_improvement: Callable[[float], None] | None = None,
    node_limit: int | None = None,
) -> MipResult:
    """min costs @ x subject to matrix @ x >= 1, x binary; ``warm_start`` (a feasible mask) is handed to HiGHS,
    ``on_improvement(objective)`` is called at each improving solution HiGHS finds (for anytime curves),
    ``node_limit`` bounds branch-and-bound by work instead of time (a result that does not depend on the machine)."""
    if not time_limit > 0:
        raise ValueError(f"solve_mip: `time_limit` must be > 0 seconds, got {time_limit}")
    costs, matrix = np.asarray(costs, np.float64), sp.csc_array(matrix)
    m, n = matrix.shape
    if warm_start is not None:
        warm_start = np.asarray(warm_start, dtype=bool)
        if warm_start.shape != (n,):
            raise ValueError(
                f"solve_mip: `warm_start` must be a mask of one entry per column ({n}), got shape {warm_start.shape}"
            )
    result = solve_binary_program(
        costs, matrix, np.ones(m), np.full(m, np.inf), time_limit, threads, warm_start, on_improvement, node_limit
    )
    found = result.values is not None
    selected = result.values if found else np.zeros(n, dtype=bool)
    if warm_start is not None and (not found or costs @ selected > costs @ warm_start):
        selected = warm_start.copy()
    objective = float(costs @ selected) if (found or warm_start is not None) else float("inf")
    return MipResult(selected, objective, result.bound, result.status, result.optimal)
