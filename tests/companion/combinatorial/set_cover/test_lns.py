import importlib

import numpy as np
import pytest
import scipy.sparse as sp

from hf_ext.companion.combinatorial.set_cover import (
    LNSConfig,
    SetCoverInstance,
    beasley,
    greedy,
    local_neighbourhood,
    random_neighbourhood,
    repair,
    run_lns,
)

lns_module = importlib.import_module("hf_ext.companion.combinatorial.set_cover.lns")


@pytest.fixture(scope="module")
def instance():
    return beasley(300, 3000, 0.02, seed=0)


def test_repair_changes_only_the_freed_columns(instance):
    incumbent = greedy(instance)
    free = local_neighbourhood(instance, incumbent, 300, np.random.default_rng(0))
    repaired = repair(instance, incumbent, free, time_limit=2.0).selected
    fixed = np.ones(instance.n_columns, dtype=bool)
    fixed[free] = False
    assert np.array_equal(repaired[fixed], incumbent[fixed])
    assert instance.is_feasible(repaired) and instance.objective(repaired) <= instance.objective(incumbent)


def test_repair_reports_the_subproblem_gap_highs_left(instance):
    """A proved subproblem has gap 0; one cut short by the time limit reports HiGHS's relative gap, which the
    neighbourhood benchmark reads to tell hard neighbourhoods from easy ones."""
    incumbent = greedy(instance)
    small = local_neighbourhood(instance, incumbent, 30, np.random.default_rng(0))
    assert repair(instance, incumbent, small, time_limit=5.0)[1:] == (True, 0.0)
    whole = repair(instance, incumbent, np.arange(instance.n_columns), time_limit=0.05)
    assert not whole.optimal and whole.gap > 0  # inf while HiGHS has no dual bound yet


@pytest.mark.parametrize("policy", ["random", "local"])
def test_lns_never_worsens_the_incumbent_and_improves_greedy(instance, policy):
    start = greedy(instance)
    result = run_lns(instance, LNSConfig(policy=policy, neighbourhood_size=400, time_limit=3.0, sub_time_limit=0.3))
    assert instance.is_feasible(result.selected) and result.objective == instance.objective(result.selected)
    assert result.values[0] == instance.objective(start)
    assert all(b < a for a, b in zip(result.values, result.values[1:], strict=False))
    assert result.objective < instance.objective(start)  # greedy is far from optimal at this size


@pytest.mark.parametrize("policy", [random_neighbourhood, local_neighbourhood])
def test_neighbourhoods_are_bounded_and_free_incumbent_columns(instance, policy):
    incumbent = greedy(instance)
    free = policy(instance, incumbent, 100, np.random.default_rng(1))
    assert len(free) <= 100 and len(np.unique(free)) == len(free)
    assert incumbent[free].any() and (~incumbent[free]).any()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"time_limit": 0.0}, "`time_limit` must be > 0 seconds"),
        ({"neighbourhood_size": 0}, "`neighbourhood_size` must be an integer >= 1"),
        ({"policy": "diffusion"}, r"`policy` must be one of \['random', 'local'\]"),
        ({"policy": ["local"]}, r"`policy` must be one of \['random', 'local'\]"),  # issue 72: unhashable type
        ({"sub_time_limit": float("nan")}, "`sub_time_limit` must be a finite number"),
        ({"seed": -1}, "`seed` must be an integer >= 0, got -1"),  # issue 72: numpy's error at run_lns's start
    ],
)
def test_bad_settings_are_refused_at_construction(fields, message):
    with pytest.raises(ValueError, match=message):
        LNSConfig(**fields)


@pytest.mark.parametrize(
    ("optimal", "expected"),
    [(True, [100, 125, 156, 195, 244, 305, 381, 400]), (False, [100, 80, 64, 51, 40, 32, 26, 25])],
)
def test_adapted_size_grows_after_solved_subproblems_and_shrinks_after_timeouts(
    instance, monkeypatch, optimal, expected
):
    sizes = []

    def record(instance, incumbent, size, rng):
        sizes.append(size)
        return random_neighbourhood(instance, incumbent, size, rng)

    monkeypatch.setattr(lns_module, "repair", lambda instance, incumbent, free, limit: (incumbent.copy(), optimal, 0.0))
    config = LNSConfig(neighbourhood_size=100, time_limit=30.0, sub_time_limit=5.0, max_iterations=8, adapt_size=True)
    run_lns(instance, config, neighbourhood=record)
    assert sizes == expected  # no gain each time; bounded by 4x and 1/4 of neighbourhood_size


class FakeClock:
    """``time.perf_counter`` for ``run_lns``: it reads ``now``, which only the test moves."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


def test_a_cover_found_after_the_time_limit_is_not_returned(instance, monkeypatch):
    """Issue 72: a repair that ended past the limit (10.25 s of 10 s) was kept, and HiGHS was given the time left
    before the neighbourhood was chosen. Here choosing takes 0.1 s and each repair 0.5 s of a 1 s limit, dropping one
    column of a cover of every column: the second repair ends at 1.2 s, so the first one's cover is the result."""
    clock, limits = FakeClock(), []

    def choose(instance, incumbent, size, rng):
        clock.now += 0.1
        return np.arange(2)

    def drop_a_column(instance, incumbent, free, limit):
        limits.append(limit)
        clock.now += 0.5
        candidate = incumbent.copy()
        candidate[np.flatnonzero(incumbent)[0]] = False
        return candidate, True, 0.0

    monkeypatch.setattr(lns_module, "time", clock)
    monkeypatch.setattr(lns_module, "repair", drop_a_column)
    every = np.ones(instance.n_columns, dtype=bool)
    result = run_lns(instance, LNSConfig(time_limit=1.0), initial=every, neighbourhood=choose)
    assert limits == pytest.approx([0.9, 0.3])  # the time left once the neighbourhood is chosen
    assert result.times == [0.0, 0.6] and result.iterations == 1
    assert np.array_equal(result.selected, np.arange(instance.n_columns) > 0) and instance.is_feasible(result.selected)


def test_an_initial_cover_of_the_wrong_length_is_named(instance):
    message = r"`initial` must be a mask of one entry per column \(3000\), got shape \(2999,\)"
    with pytest.raises(ValueError, match=message):
        run_lns(instance, LNSConfig(time_limit=1.0), initial=greedy(instance)[:-1])


def test_local_neighbourhood_reaches_incumbent_columns_that_share_no_row():
    """A cover without overlap (rows 0..9 each covered by its own incumbent column; bridge columns cover rows i and
    i + 1): incumbent columns are near through the bridges, so the neighbourhood frees ``size // 2`` of them and
    not just the one it starts from, which could not improve. On correlated costs GLNS's regions held 2 of 1063."""
    n = 10
    rows = [*range(n), *range(n - 1), *range(1, n)]
    columns = [*range(n), *range(n, 2 * n - 1), *range(n, 2 * n - 1)]
    matrix = sp.csc_array((np.ones(len(rows)), (rows, columns)), shape=(n, 2 * n - 1))
    instance = SetCoverInstance(np.r_[np.full(n, 2.0), np.full(n - 1, 3.0)], matrix)
    incumbent = np.arange(2 * n - 1) < n
    free = local_neighbourhood(instance, incumbent, 10, np.random.default_rng(0))
    inside = np.sort(free[incumbent[free]])
    assert len(inside) == 5 and inside[-1] - inside[0] <= 5  # five incumbent columns, the start's nearest
    assert len(free) == 10 and len(np.unique(free)) == 10
