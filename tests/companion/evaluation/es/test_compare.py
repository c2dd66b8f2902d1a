import numpy as np
import pytest
from scipy.stats import wilcoxon

from hf_ext.companion.evaluation.es.compare import ecdf, paired_test, slice_tests, win_rate_by_misranking, wins_losses


def _record(method, function, final, trajectory=None, instance=1, misranking=None, seed=0):
    return {
        "method": method,
        "budget_multiplier": 100,
        "function": function,
        "instance": instance,
        "dimension": 2,
        "seed": seed,
        "final": final,
        "trajectory": trajectory or [[1, final]],
        "misranking": misranking or [],
    }


def test_wins_losses_and_sign_test():
    records = [_record("a", f, 1.0) for f in range(101, 113)] + [_record("b", f, 2.0) for f in range(101, 112)]
    records += [_record("a", 113, 1e-9), _record("b", 113, 1e-10), _record("b", 112, 0.5)]
    result = wins_losses(records, "a", "b", 100)
    assert (result["wins"], result["losses"], result["ties"]) == (11, 1, 1)
    assert result["p_value"] == pytest.approx(2 * 13 / 2**12)  # P(X <= 1) + P(X >= 11), X ~ Bin(12, 1/2)


def test_paired_test_runs_wilcoxon_on_log_differences_without_ties():
    pairs = [(1.0, 10.0), (1.0, 100.0), (1e3, 1.0), (1e-9, 1e-12), (2.0, 2.0)]  # two ties at the end
    result = paired_test(pairs)
    assert (result["wins"], result["losses"], result["ties"], result["pairs"]) == (2, 1, 2, 5)
    assert result["wilcoxon_p_value"] == pytest.approx(wilcoxon([-1.0, -2.0, 3.0]).pvalue)


def test_slices_split_problems_by_the_reference_runs_misranking():
    # f101-f104: noisy (misranking 0.4), a wins; f105-f108: clean (0.05), a loses
    records = []
    for f in range(101, 109):
        noisy = f < 105
        records += [_record("a", f, 1.0 if noisy else 3.0), _record("b", f, 2.0)]
        records.append(_record("sep_cma", f, 5.0, misranking=[0.4, 0.4] if noisy else [0.05, None]))
    rows = {(r["slice"], r["group"]): r for r in slice_tests(records, "a", "b", threshold=0.25)}
    high, low = rows["misranking >= 0.25", "all"], rows["misranking < 0.25", "all"]
    assert (high["wins"], high["losses"], low["wins"], low["losses"]) == (4, 0, 0, 4)
    assert rows["misranking >= 0.25", "moderate noise"]["pairs"] == 4  # f101-f104
    assert rows["misranking < 0.25", "severe noise"]["pairs"] == 2  # f107, f108
    bins = win_rate_by_misranking(records, "a", "b", 100, [0.0, 0.25, 0.5])
    assert [(b["pairs"], b["win_rate"]) for b in bins] == [(4, 0.0), (4, 1.0)]


def test_each_seed_of_a_problem_is_its_own_pair_with_its_own_misranking():
    # seed 0: a wins in a noisy run; seed 1 of the same problem: a loses in a clean one. Keyed without the seed,
    # one seed's runs would overwrite the other's.
    records = [
        _record("a", 101, 1.0, seed=0),
        _record("b", 101, 2.0, seed=0),
        _record("sep_cma", 101, 5.0, misranking=[0.4], seed=0),
        _record("a", 101, 3.0, seed=1),
        _record("b", 101, 2.0, seed=1),
        _record("sep_cma", 101, 5.0, misranking=[0.05], seed=1),
    ]
    assert wins_losses(records, "a", "b", 100)["pairs"] == 2
    rows = {r["slice"]: r for r in slice_tests(records, "a", "b", threshold=0.25) if r["group"] == "all"}
    high, low = rows["misranking >= 0.25"], rows["misranking < 0.25"]
    assert (high["wins"], high["losses"], low["wins"], low["losses"]) == (1, 0, 0, 1)


def test_a_problem_without_a_reference_run_is_in_neither_slice():
    """A run of the suite without sep-CMA-ES has no misranking to slice by: its pairs must not land in the low slice."""
    records = [_record("a", 101, 1.0), _record("b", 101, 2.0), _record("a", 102, 1.0), _record("b", 102, 2.0)]
    records.append(_record("sep_cma", 102, 5.0, misranking=[0.4]))
    rows = {r["slice"]: r for r in slice_tests(records, "a", "b", threshold=0.25) if r["group"] == "all"}
    assert (rows["misranking >= 0.25"]["pairs"], rows["misranking < 0.25"]["pairs"]) == (1, 0)


def test_ecdf_counts_targets_reached_by_each_budget():
    records = [_record("a", 101, 1e-3, [[1, 10.0], [50, 1e-3]])]
    curve = ecdf(records, np.array([1, 49, 50]), targets=np.array([100.0, 1.0, 1e-3, 1e-8]))[("a", 100)]
    np.testing.assert_allclose(curve, [0.25, 0.25, 0.75])
