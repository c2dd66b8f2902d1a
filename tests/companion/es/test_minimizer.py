import concurrent.futures as cf
import logging

import numpy as np
import pytest

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


class RefusesAfter(cf.Executor):
    """Runs the first ``calls`` submissions in this process, then refuses every one as a shut-down pool does."""

    def __init__(self, calls: int):
        self.calls = calls

    def submit(self, fn, /, *args, **kwargs):
        if self.calls == 0:
            raise RuntimeError("cannot schedule new futures after shutdown")
        self.calls -= 1
        future = cf.Future()
        future.set_result(fn(*args, **kwargs))
        return future


def test_an_evaluation_refused_after_the_run_started_stops_it():
    """Issue 72: an executor that refused work after the first population counted each refusal as NaN and
    minimize returned a result, as if the run had ended."""
    config = ESConfig(popsize=6, max_evaluations=60, seed=0)
    with pytest.raises(RuntimeError, match=r"minimize: the executor refused the evaluation of row 2 .*shutdown"):
        minimize(sphere, np.ones(3), config, executor=RefusesAfter(calls=8))
