"""Weighted set cover as a 0/1 MIP solved by HiGHS (``highspy``), with a time limit and a warm start."""

from collections.abc import Callable
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

from .._highs import highs_model, run_highs


@dataclass
class MipResult:
    selected: np.ndarray  # boolean column mask (the warm start when HiGHS found nothing better)
    objective: float
    bound: float  # HiGHS's dual bound: a lower bound on the optimum
    status: str


def solve_mip(
    costs: np.ndarray,
    matrix: sp.csc_array,
    time_limit: float,
    warm_start: np.ndarray | None = None,
    threads: int = 1,
    on_improvement: Callable[[float], None] | None = None,
) -> MipResult:
    """min costs @ x subject to matrix @ x >= 1, x binary; ``warm_start`` (a feasible mask) is handed to HiGHS,
    ``on_improvement(objective)`` is called at each improving solution HiGHS finds (for anytime curves)."""
    if not time_limit > 0:
        raise ValueError(f"solve_mip: `time_limit` must be > 0 seconds, got {time_limit}")
    matrix = sp.csc_array(matrix)
    m, n = matrix.shape
    h = highs_model(time_limit, threads)
    h.addRows(m, np.ones(m), np.full(m, highspy.kHighsInf), 0, np.zeros(0, np.int32), np.zeros(0, np.int32), [])
    h.addCols(
        n, np.asarray(costs, np.float64), np.zeros(n), np.ones(n), matrix.nnz,
        matrix.indptr[:-1].astype(np.int32), matrix.indices.astype(np.int32), np.ones(matrix.nnz),
    )  # fmt: skip
    h.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.full(n, highspy.HighsVarType.kInteger))
    if on_improvement is not None:
        h.cbMipImprovingSolution.subscribe(lambda event: on_improvement(event.data_out.objective_function_value))
    if warm_start is not None:
        solution = highspy.HighsSolution()
        solution.col_value = np.asarray(warm_start, np.float64).tolist()
        solution.value_valid = True
        h.setSolution(solution)
    run_highs(h)
    info = h.getInfo()
    found = info.primal_solution_status == 2  # kSolutionStatusFeasible
    selected = np.asarray(h.getSolution().col_value) > 0.5 if found else np.zeros(n, dtype=bool)
    if warm_start is not None and (not found or costs @ selected > costs @ np.asarray(warm_start, bool)):
        selected = np.asarray(warm_start, bool).copy()
    objective = float(np.asarray(costs) @ selected) if (found or warm_start is not None) else float("inf")
    return MipResult(selected, objective, float(info.mip_dual_bound), str(h.getModelStatus()).split(".")[-1])
