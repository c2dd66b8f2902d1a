"""The step-size sensitivity measures, against hand computation on small curves."""

import math

import pytest

from hf_ext.optim import near_best_width, ratio_at_multiple

GRID = [1e-3, 1e-2, 1e-1, 1.0, 10.0]


def test_width_interpolates_to_the_threshold_in_log_log():
    # best 1.0 at 0.1; threshold 1.1. Left neighbour 1.21 = 1.1^2 -> crossing halfway (0.5 decade);
    # right neighbour diverged -> the range stops at 0.1.
    width, censored = near_best_width(GRID, [5.0, 1.21, 1.0, math.inf, math.inf])
    assert width == pytest.approx(0.5) and not censored


def test_a_flat_curve_is_as_wide_as_the_grid_and_marked_censored():
    width, censored = near_best_width(GRID, [2.0, 1.05, 1.0, 1.02, 1.08])
    assert width == pytest.approx(3 + math.log10(1.1 / 1.05) / math.log10(2.0 / 1.05)) and censored


def test_ratio_at_ten_times_the_best():
    assert ratio_at_multiple(GRID, [5.0, 2.0, 1.0, 3.0, math.inf]) == pytest.approx(3.0)
    assert ratio_at_multiple(GRID, [5.0, 2.0, 1.0, 3.0, 0.5]) is None  # best at the last step size
    assert ratio_at_multiple(GRID, [5.0, 2.0, 1.0, math.inf, 9.0]) == math.inf


def test_bad_grid_is_refused():
    with pytest.raises(ValueError, match="must be positive and increasing"):
        near_best_width([1.0, 0.1], [1.0, 2.0])
