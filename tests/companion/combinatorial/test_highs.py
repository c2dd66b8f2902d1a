"""Both combinatorial solvers share HiGHS's process-wide scheduler: mixing their thread counts must not lose a solve."""

import numpy as np
import pytest

pytest.importorskip("highspy")

from hf_ext.companion.combinatorial.cam import erdos_renyi, exact_mis  # noqa: E402
from hf_ext.companion.combinatorial.set_cover.instance import beasley  # noqa: E402
from hf_ext.companion.combinatorial.set_cover.mip import solve_mip  # noqa: E402


def test_solves_with_different_thread_counts_in_one_process_all_find_solutions():
    instance = beasley(8, 12, 0.25, cost_range=(1, 9), seed=1)
    graph = erdos_renyi(12, 0.3, 0)
    objectives = []
    for threads in (2, 1, 2):
        independent, optimal = exact_mis(graph, time_limit=10)
        assert optimal and independent.any()
        objectives.append(solve_mip(instance.costs, instance.matrix, time_limit=10.0, threads=threads).objective)
    assert np.isfinite(objectives).all() and len(set(objectives)) == 1
