import itertools

import highspy
import numpy as np
import pytest

from hf_ext.companion.combinatorial.set_cover import beasley, greedy, solve_mip


def _brute_force(instance):
    best = np.inf
    for bits in itertools.product([False, True], repeat=instance.n_columns):
        x = np.array(bits)
        if instance.is_feasible(x):
            best = min(best, instance.objective(x))
    return best


def test_highs_finds_the_optimum_of_a_small_instance():
    instance = beasley(8, 12, 0.25, cost_range=(1, 9), seed=1)
    result = solve_mip(instance.costs, instance.matrix, time_limit=10.0)
    assert result.objective == _brute_force(instance)
    assert instance.is_feasible(result.selected) and result.bound == pytest.approx(result.objective)
    assert result.status == highspy.HighsModelStatus.kOptimal and result.optimal


def test_warm_start_is_never_worsened_under_a_tiny_time_limit():
    instance = beasley(300, 3000, 0.02, seed=0)
    start = greedy(instance)
    result = solve_mip(instance.costs, instance.matrix, time_limit=0.05, warm_start=start)
    assert instance.is_feasible(result.selected)
    assert result.objective <= instance.objective(start)
    assert result.bound <= result.objective
    assert result.status == highspy.HighsModelStatus.kTimeLimit and not result.optimal


def test_zero_time_limit_is_refused():
    instance = beasley(8, 12, 0.25, seed=1)
    with pytest.raises(ValueError, match="`time_limit` must be > 0 seconds"):
        solve_mip(instance.costs, instance.matrix, time_limit=0)


def test_a_warm_start_of_the_wrong_length_is_named():
    instance = beasley(8, 12, 0.25, seed=1)
    message = r"`warm_start` must be a mask of one entry per column \(12\), got shape \(11,\)"
    with pytest.raises(ValueError, match=message):
        solve_mip(instance.costs, instance.matrix, time_limit=1.0, warm_start=np.ones(11, dtype=bool))
