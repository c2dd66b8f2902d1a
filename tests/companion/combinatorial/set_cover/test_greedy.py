import importlib

import numpy as np
import pytest

from hf_ext.companion.combinatorial.set_cover import SetCoverInstance, beasley, greedy, rail_like, remove_redundant

greedy_module = importlib.import_module("hf_ext.companion.combinatorial.set_cover.greedy")  # the name is the function


def _tiny():
    # columns: 0 covers {0, 1, 2} at cost 5, 1 covers {0} at 1, 2 covers {1} at 1, 3 covers {2} at 1
    matrix = np.array([[1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 0, 1]])
    return SetCoverInstance(np.array([5.0, 1.0, 1.0, 1.0]), matrix)


def test_greedy_picks_lowest_cost_per_new_row():
    # ratios: 5/3 for column 0 against 1/1 for the singletons: greedy takes the three singletons, cost 3
    assert greedy(_tiny()).tolist() == [False, True, True, True]


def test_redundancy_removal_drops_the_most_expensive_covered_column_first():
    instance = _tiny()
    cleaned = remove_redundant(instance, np.array([True, True, True, True]))
    assert cleaned.tolist() == [False, True, True, True]
    assert instance.objective(cleaned) == 3.0


def test_greedy_is_feasible_and_irredundant_on_generated_instances():
    for instance in (beasley(300, 3000, 0.02, seed=0), rail_like(400, 4000, seed=0)):
        selected = greedy(instance)
        assert instance.is_feasible(selected)
        coverage = instance.coverage(selected)
        for j in np.flatnonzero(selected):
            rows = instance.matrix.indices[instance.matrix.indptr[j] : instance.matrix.indptr[j + 1]]
            assert coverage[rows].min() == 1  # every chosen column is the only cover of some row


def test_feasibility_and_objective_checks():
    instance = _tiny()
    assert not instance.is_feasible(np.array([False, True, True, False]))
    assert instance.objective(np.array([True, False, False, True])) == 6.0


def _sequential_greedy(instance):
    """Chvatal's rule one column at a time: least (cost / newly covered rows, index), then one-at-a-time removal."""
    dense = instance.matrix.toarray().astype(bool)
    uncovered, selected = np.ones(instance.n_rows, dtype=bool), np.zeros(instance.n_columns, dtype=bool)
    while uncovered.any():
        new = (dense & uncovered[:, None]).sum(axis=0)
        with np.errstate(divide="ignore"):
            ratio = np.where(new > 0, instance.costs / np.maximum(new, 1), np.inf)
        j = int(np.argmin(ratio))  # the first index among equal ratios
        selected[j], uncovered[dense[:, j]] = True, False
    coverage = dense[:, selected].sum(axis=1)
    chosen = np.flatnonzero(selected)
    for j in chosen[np.argsort(-instance.costs[chosen], kind="stable")]:
        if coverage[dense[:, j]].min() >= 2:
            selected[j], coverage[dense[:, j]] = False, coverage[dense[:, j]] - 1
    return selected


@pytest.mark.parametrize(
    "pool, shortlist_pools, run", [(7, 2, 1024), (64, 2, 1024), (64, 8, 3), (16384, 8, 1024), (16384, 8, 5)]
)
def test_rounds_pick_exactly_the_sequential_rule(monkeypatch, pool, shortlist_pools, run):
    # small pools and shortlists force many refreshes and ties at their edges (unit costs, rail's costs 1-2); a
    # short run makes its last column's (ratio, index) the bound that picking stops at
    monkeypatch.setattr(greedy_module, "POOL", pool)
    monkeypatch.setattr(greedy_module, "SHORTLIST_POOLS", shortlist_pools)
    monkeypatch.setattr(greedy_module, "RUN", run)
    instances = (
        beasley(150, 1500, 0.03, seed=1),
        beasley(60, 800, 0.05, cost_range=(1, 1), seed=2),
        rail_like(200, 1500, seed=3),
    )
    for instance in instances:
        assert greedy(instance).tolist() == _sequential_greedy(instance).tolist(), instance.name


def test_redundancy_rounds_match_one_at_a_time_removal():
    instance = rail_like(120, 900, seed=5)
    everything = np.ones(instance.n_columns, dtype=bool)  # many overlapping removable columns
    dense = instance.matrix.toarray().astype(bool)
    expected, coverage = everything.copy(), dense.sum(axis=1)
    for j in np.argsort(-instance.costs, kind="stable"):
        if coverage[dense[:, j]].min() >= 2:
            expected[j], coverage[dense[:, j]] = False, coverage[dense[:, j]] - 1
    assert remove_redundant(instance, everything).tolist() == expected.tolist()
