import itertools

import numpy as np
import pytest

from hf_ext.companion.portfolio import dc_penalty, project_k_sparse, project_simplex, top_k_sum


def _random_point(generator, assets, support):
    b = np.zeros(assets)
    chosen = generator.choice(assets, support, replace=False)
    b[chosen] = generator.dirichlet(np.ones(support))
    return b


@pytest.mark.parametrize("k", [1, 2, 4])
def test_the_dc_penalty_is_zero_exactly_on_k_sparse_points_of_the_simplex(k):
    generator = np.random.default_rng(k)
    for support in range(1, 8):
        for _ in range(20):
            b = _random_point(generator, 7, support)
            penalty = dc_penalty(b, k)
            assert penalty >= -1e-15
            assert (abs(penalty) <= 1e-12) == (support <= k), (support, k, penalty)


def test_top_k_sum_by_hand():
    assert top_k_sum(np.array([0.1, 0.4, 0.2, 0.3]), 2) == pytest.approx(0.7)


def test_projection_onto_the_simplex_by_hand_and_batched():
    np.testing.assert_allclose(project_simplex(np.array([1.4, -0.4])), [1.0, 0.0])
    np.testing.assert_allclose(project_simplex(np.array([0.5, 0.5, 0.5])), [1 / 3, 1 / 3, 1 / 3])
    np.testing.assert_allclose(project_simplex(np.array([0.2, 0.3, 0.5])), [0.2, 0.3, 0.5])
    rows = np.random.default_rng(0).normal(size=(5, 6))
    np.testing.assert_allclose(project_simplex(rows), np.stack([project_simplex(row) for row in rows]))


def test_projection_is_nearest_among_many_simplex_points():
    generator = np.random.default_rng(1)
    y = generator.normal(size=5)
    projection = project_simplex(y)
    others = generator.dirichlet(np.ones(5), size=2000)
    assert np.linalg.norm(y - projection) <= np.linalg.norm(y - others, axis=1).min()
    assert projection.min() >= 0 and projection.sum() == pytest.approx(1)


def test_k_sparse_projection_equals_the_best_support_by_enumeration():
    generator = np.random.default_rng(2)
    for _ in range(10):
        y = generator.normal(size=6)
        best = min(
            (np.linalg.norm(y - _on_support(y, support)), support) for support in itertools.combinations(range(6), 3)
        )
        assert np.linalg.norm(y - project_k_sparse(y, 3)) == pytest.approx(best[0])


def _on_support(y, support):
    b = np.zeros_like(y)
    b[list(support)] = project_simplex(y[list(support)])
    return b


@pytest.mark.parametrize(("k", "error"), [(0, ValueError), (4, ValueError), (-1, ValueError), (1.5, TypeError)])
def test_project_k_sparse_refuses_a_k_outside_one_to_the_number_of_assets(k, error):
    """Issue 72: ``k=-1`` kept all but one asset and ``k=0`` failed inside numpy (``index -1 is out of bounds``)."""
    with pytest.raises(error, match=rf"project_k_sparse: `k` must be an integer in 1..3, got {k}"):
        project_k_sparse(np.ones(3) / 3, k)
