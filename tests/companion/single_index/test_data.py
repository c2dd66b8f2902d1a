import numpy as np
import pytest

from hf_ext.companion.single_index import direction_with_overlap


@pytest.mark.parametrize("seed", [0, 3, 11])
@pytest.mark.parametrize("overlap", [-0.5, 0.0, 0.3, 0.99])
def test_the_start_has_unit_norm_and_the_overlap_even_when_w_star_shares_its_seed(seed, overlap):
    w_star = np.random.default_rng(seed).standard_normal(8)  # the same draw direction_with_overlap starts from
    w0 = direction_with_overlap(w_star, overlap, seed=seed)
    assert np.linalg.norm(w0) == pytest.approx(1.0, abs=1e-12)
    assert w0 @ w_star / np.linalg.norm(w_star) == pytest.approx(overlap, abs=1e-12)


def test_one_dimension_allows_only_plus_or_minus_one():
    np.testing.assert_array_equal(direction_with_overlap(np.array([2.0]), -1.0), [-1.0])
    with pytest.raises(ValueError, match="in 1 dimension `overlap` must be -1 or 1"):
        direction_with_overlap(np.array([2.0]), 0.5)


@pytest.mark.parametrize("w_star", [np.zeros(4), np.array([1.0, np.nan]), np.ones((2, 2))])
def test_a_degenerate_w_star_is_refused(w_star):
    with pytest.raises(ValueError, match="`w_star` must be a finite non-zero 1-d vector"):
        direction_with_overlap(w_star, 0.5)
