import numpy as np
import pytest
from scipy.stats import kendalltau

from hf_ext.companion.evaluation.es import misranking_by_generation, pair_misranking


def test_pair_misranking_counts_reversed_pairs():
    true = np.array([1.0, 2.0, 3.0, 4.0])
    assert pair_misranking(true * 10, true) == 0
    assert pair_misranking(-true, true) == 1
    assert pair_misranking([2.0, 1.0, 3.0, 4.0], true) == pytest.approx(1 / 6)  # one of six pairs swapped


def test_pair_misranking_skips_true_ties_and_halves_observed_ties():
    # pairs with distinct true values: (0, 2), (1, 2); the first is tied in the observation, the second kept
    assert pair_misranking([5.0, 1.0, 5.0], [0.0, 0.0, 1.0]) == pytest.approx(0.25)
    assert np.isnan(pair_misranking([1.0, 2.0], [3.0, 3.0]))


def test_pair_misranking_is_kendall_discordance():
    rng = np.random.default_rng(0)
    true = rng.standard_normal(12)
    observed = true + rng.standard_normal(12)
    tau = kendalltau(observed, true).statistic
    assert pair_misranking(observed, true) == pytest.approx((1 - tau) / 2)


def test_pair_misranking_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match="pair_misranking: `observed` and `true` must be 1-D of one length"):
        pair_misranking([1.0, 2.0], [1.0, 2.0, 3.0])


def test_misranking_by_generation_splits_into_blocks_and_drops_a_partial_one():
    true = np.arange(7.0)
    observed = np.array([0.0, 1.0, 2.0, 5.0, 4.0, 3.0, 9.0])  # first block in order, second reversed
    np.testing.assert_array_equal(misranking_by_generation(observed, true, 3), [0.0, 1.0])
    with pytest.raises(ValueError, match="`popsize` must be an integer >= 2"):
        misranking_by_generation(observed, true, 1)
