import pytest

from hf_ext.companion.evaluation.combinatorial.set_cover import primal_gap, primal_integral, time_to_target


def test_primal_gap():
    assert primal_gap(110.0, 100.0) == pytest.approx(10 / 110)
    assert primal_gap(100.0, 100.0) == 0.0
    assert primal_gap(float("inf"), 100.0) == 1.0


def test_primal_integral_is_the_area_under_the_gap_step_function():
    # no solution for 1 s (gap 1), then 200 for 2 s (gap 0.5), then 100 (gap 0) until the 4 s horizon
    assert primal_integral([1.0, 3.0], [200.0, 100.0], 100.0, horizon=4.0) == pytest.approx(1.0 + 2 * 0.5)
    assert primal_integral([1.0, 3.0], [200.0, 100.0], 100.0, horizon=2.0) == pytest.approx(1.0 + 0.5)


def test_time_to_target():
    assert time_to_target([0.5, 2.0], [120.0, 101.0], 105.0) == 2.0
    assert time_to_target([0.5], [120.0], 105.0) == float("inf")
