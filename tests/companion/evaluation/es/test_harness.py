import re

import numpy as np
import pytest

from hf_ext.companion.es import ESResult
from hf_ext.companion.evaluation.es import METHODS, solve


def sphere(x):
    return float(x @ x)


@pytest.mark.parametrize(
    "method",
    [
        "sep_cma",
        "rb_pem",
        "unbiased_pem",
        "resample_2",
        "pycma",
        "pycma_noise",
        "ng_noisy_one_plus_one",
        "ng_tbpsa",
        "ng_ngopt",
    ],
)
def test_solve_spends_the_budget_and_returns_the_best_point_evaluated(method):
    if method.startswith("pycma"):
        pytest.importorskip("cma")
    if method.startswith("ng_"):
        pytest.importorskip("nevergrad")
    values, points = [], []

    def function(x):
        points.append(np.array(x))
        values.append(sphere(x))
        return values[-1]

    result = solve(method, function, np.full(3, 2.0), 150, -5.0, 5.0, seed=0)
    assert isinstance(result, ESResult)
    assert result.evaluations == len(values) == 150
    assert result.fbest == min(values) == sphere(result.xbest)
    assert values[result.evals_best - 1] == result.fbest
    assert result.xfavorite.shape == (3,) and result.iterations > 0
    assert np.abs(points).max() <= 5.0 and result.fbest < sphere(np.full(3, 2.0))


def test_solve_refuses_an_unknown_method():
    with pytest.raises(ValueError, match=re.escape(f"solve: `method` must be one of {list(METHODS)}")):
        solve("nevergrad", sphere, np.zeros(2), 10, -5.0, 5.0, seed=0)


@pytest.mark.parametrize("method", ["sep_cma", "pycma"])
def test_solve_runs_the_given_population_size(method):
    if method == "pycma":
        pytest.importorskip("cma")
    # 60 evaluations: 4 generations of 15
    result = solve(method, sphere, np.full(4, 2.0), 60, -5.0, 5.0, seed=0, popsize=15)
    assert result.evaluations == 60 and result.iterations == 4


@pytest.mark.parametrize("method", ["ng_noisy_one_plus_one", "ng_tbpsa", "ng_ngopt"])
def test_nevergrad_runs_follow_the_seed_not_the_global_generator(method):
    """A suite run resumed in a new process must redo a problem the same way: Nevergrad's optimizers draw from the
    seeded parametrization, whatever numpy's global state is."""
    pytest.importorskip("nevergrad")
    results = []
    for global_seed in (1, 2):
        np.random.seed(global_seed)
        result = solve(method, sphere, np.full(3, 2.0), 200, -5.0, 5.0, seed=0)
        results.append((result.fbest, result.xfavorite.tolist()))
    assert results[0] == results[1]
