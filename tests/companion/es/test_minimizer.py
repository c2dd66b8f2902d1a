import logging

import numpy as np

from hf_ext.companion.es import ESConfig, MinimizeResult, minimize


def sphere(x):
    return float(x @ x)


class Recorded:
    """``function`` that keeps every point and value it was asked for."""

    def __init__(self, function):
        self.function, self.points, self.values = function, [], []

    def __call__(self, x):
        value = self.function(x)
        self.points.append(np.array(x))
        self.values.append(value)
        return value


def test_xbest_is_the_best_point_evaluated_over_all_restarts():
    # Reported: at 2500 evaluations the 7-D sphere's first run had converged, and the result was the mean of
    # a fresh restart (|m|^2 ~ 0.1) instead of the 1e-22 point found before it.
    function = Recorded(sphere)
    result = minimize(function, np.full(7, 3.0), ESConfig(max_evaluations=2500))
    assert isinstance(result, MinimizeResult) and result.restarts == 1
    assert result.evaluations == len(function.values) == 2500
    assert result.fbest == min(function.values) == sphere(result.xbest) < 1e-15
    np.testing.assert_array_equal(function.points[result.evals_best - 1], result.xbest)
    assert sphere(result.xfavorite) > 1e6 * result.fbest  # the last run's mean, as pycma's fmin reports it


def test_xbest_counts_a_partly_evaluated_last_population():
    function = Recorded(sphere)
    result = minimize(function, np.ones(3), ESConfig(popsize=10, max_evaluations=25))
    assert result.evaluations == 25 and result.iterations == 2
    assert result.fbest == min(function.values)


def test_minimize_keeps_the_budget_and_logs_nan(caplog):
    calls = []

    def function(x):
        calls.append(x)
        return np.nan if len(calls) == 5 else sphere(x)

    with caplog.at_level(logging.WARNING):
        result = minimize(function, np.ones(3), ESConfig(weights="rb_pem", max_evaluations=101))
    assert len(calls) == result.evaluations == 101
    assert result.nan_values == 1 and "NaN" in caplog.text


def test_ipop_restarts_double_the_population():
    result = minimize(sphere, np.ones(2), ESConfig(tolx=1e-2, max_evaluations=3000, max_restarts=3))
    assert result.restarts == 3
