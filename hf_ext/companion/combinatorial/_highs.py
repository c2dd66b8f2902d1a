"""The one place the combinatorial solvers talk to HiGHS: a 0/1 program in, its solution and HiGHS's status out.

HiGHS (and scipy) are imported on first use: ``cam`` loads without the ``[combinatorial]`` extra, ``set_cover``
without highspy. HiGHS runs every solve on a process-wide scheduler sized by the first solve's
``threads`` option and refuses a later solve that asks for another count (its model status stays ``kNotset`` and no
solution comes back), so a process that mixed two solvers' settings lost solutions silently: the scheduler is
resized here when the count changes.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import highspy

_scheduler_threads: int | None = None


def _extra():
    """``highspy`` and ``scipy.sparse``, the ``[combinatorial]`` extra's, imported on first use."""
    try:
        import highspy
        import scipy.sparse as sp
    except ImportError as error:
        raise ImportError(
            f"the exact and MIP solvers need the [combinatorial] extra: pip install 'hf-ext[combinatorial]' ({error})"
        ) from error
    return highspy, sp


@dataclass
class BinarySolution:
    """What HiGHS returned for a 0/1 program."""

    values: np.ndarray | None  # boolean, one per column; None where HiGHS found no feasible solution
    status: "highspy.HighsModelStatus"  # e.g. kOptimal, kTimeLimit
    optimal: bool  # HiGHS proved ``values`` optimal
    bound: float  # HiGHS's dual bound: a lower bound on the minimum


def _model(time_limit: float, threads: int, node_limit: int | None = None):
    """A silent ``highspy.Highs`` with a time limit (and a branch-and-bound node limit when given), the global
    scheduler resized when ``threads`` changes."""
    highspy, _ = _extra()
    global _scheduler_threads
    if _scheduler_threads is not None and _scheduler_threads != threads:
        highspy.Highs.resetGlobalScheduler(True)
    _scheduler_threads = threads
    model = highspy.Highs()
    model.setOptionValue("output_flag", False)
    model.setOptionValue("time_limit", float(time_limit))
    model.setOptionValue("threads", int(threads))
    if node_limit is not None:
        model.setOptionValue("mip_max_nodes", int(node_limit))
    return model


def solve_binary_program(
    costs: np.ndarray,
    matrix,
    row_lower: np.ndarray,
    row_upper: np.ndarray,
    time_limit: float,
    threads: int = 1,
    warm_start: np.ndarray | None = None,
    on_improvement: Callable[[float], None] | None = None,
    node_limit: int | None = None,
) -> BinarySolution:
    """``min costs @ x`` subject to ``row_lower <= matrix @ x <= row_upper`` (``inf`` bounds allowed), ``x`` in
    {0, 1}; ``matrix`` is a scipy sparse array or its nonzeros ``(values, (rows, columns))``. ``warm_start`` (a
    feasible 0/1 vector) is handed to HiGHS, ``on_improvement(objective)`` is called at each improving solution it
    finds. ``node_limit`` stops branch-and-bound after that many nodes: a limit on work, not on time, so what comes
    back does not depend on the machine's speed or load (``time_limit`` should then be a safety net that does not
    bind). A program without columns is solved by the empty solution (HiGHS would call it ``kModelEmpty``, not
    optimal)."""
    highspy, sp = _extra()
    m, n = len(row_lower), len(costs)
    matrix = sp.csc_array(matrix, shape=(m, n), dtype=np.float64)
    if n == 0:
        return BinarySolution(np.zeros(0, dtype=bool), highspy.HighsModelStatus.kModelEmpty, True, 0.0)
    h = _model(time_limit, threads, node_limit)
    empty = np.zeros(0, np.int32)
    h.addRows(m, np.asarray(row_lower, np.float64), np.asarray(row_upper, np.float64), 0, empty, empty, [])
    h.addCols(
        n, np.asarray(costs, np.float64), np.zeros(n), np.ones(n), matrix.nnz,
        matrix.indptr[:-1].astype(np.int32), matrix.indices.astype(np.int32), matrix.data,
    )  # fmt: skip
    h.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.full(n, highspy.HighsVarType.kInteger))
    if on_improvement is not None:
        h.cbMipImprovingSolution.subscribe(lambda event: on_improvement(event.data_out.objective_function_value))
    if warm_start is not None:
        solution = highspy.HighsSolution()
        solution.col_value = np.asarray(warm_start, np.float64).tolist()
        solution.value_valid = True
        h.setSolution(solution)
    if h.run() == highspy.HighsStatus.kError:
        raise RuntimeError(f"HiGHS failed to solve the model (status {h.getModelStatus()})")
    info, status = h.getInfo(), h.getModelStatus()
    found = info.primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible
    values = np.asarray(h.getSolution().col_value) > 0.5 if found else None
    return BinarySolution(values, status, status == highspy.HighsModelStatus.kOptimal, float(info.mip_dual_bound))
