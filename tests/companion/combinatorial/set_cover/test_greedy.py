import numpy as np

from hf_ext.companion.combinatorial.set_cover import SetCoverInstance, beasley, greedy, rail_like, remove_redundant


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
