import math

import numpy as np
import pytest
import torch

from hf_ext.optim import TOPOLOGIES, Topology, check_mixing_matrix, spectral_gap
from hf_ext.optim.decentralized.topology import torus_shape

SIZES = {"torus": [4, 6, 8, 9, 12], "one_peer_exponential": [1, 2, 3, 4, 8, 16]}


def _cases():
    for name in TOPOLOGIES:
        for n in SIZES.get(name, [1, 2, 3, 4, 5, 8]):
            yield pytest.param(name, n, id=f"{name}-{n}")


@pytest.mark.parametrize(("name", "n"), list(_cases()))
def test_named_topologies_are_doubly_stochastic_and_connected(name, n):
    topology = Topology(name, n)
    for step in range(topology.period):
        matrix = topology.matrix(step).numpy()
        assert (matrix >= 0).all()
        np.testing.assert_allclose(matrix.sum(0), 1, atol=1e-12)
        np.testing.assert_allclose(matrix.sum(1), 1, atol=1e-12)
    assert 0 < topology.spectral_gap() <= 1 + 1e-12


def _numpy_gap(matrix: np.ndarray) -> float:
    n = len(matrix)
    if np.allclose(matrix, matrix.T):
        magnitudes = sorted(abs(np.linalg.eigvalsh(matrix)), reverse=True)
        return 1 - magnitudes[1] if n > 1 else 1.0
    return 1 - np.linalg.svd(matrix - 1 / n, compute_uv=False)[0]


@pytest.mark.parametrize(("name", "n"), [("ring", 8), ("torus", 8), ("exponential", 8), ("complete", 5), ("ring", 5)])
def test_spectral_gap_matches_numpy(name, n):
    matrix = Topology(name, n).matrix()
    assert spectral_gap(matrix) == pytest.approx(_numpy_gap(matrix.numpy()), abs=1e-10)


def test_ring_gap_by_hand():
    # Ring of n: eigenvalues 1/3 + 2/3 cos(2 pi k / n); for n = 8 the largest other than 1 in size is at k = 1.
    assert Topology("ring", 8).spectral_gap() == pytest.approx(1 - (1 / 3 + 2 / 3 * math.cos(2 * math.pi / 8)))
    assert Topology("complete", 6).spectral_gap() == pytest.approx(1.0)


def test_exponential_graph_by_hand():
    matrix = Topology("exponential", 8).matrix()
    # worker 0 hears from itself and from 0 - 1, 0 - 2, 0 - 4 (mod 8) = 7, 6, 4, a quarter each
    assert matrix[0].nonzero().flatten().tolist() == [0, 4, 6, 7]
    assert torch.allclose(matrix[0][[0, 4, 6, 7]], torch.full((4,), 0.25, dtype=torch.float64))


def test_one_peer_exponential_averages_exactly_over_a_period():
    topology = Topology("one_peer_exponential", 8)
    assert topology.period == 3
    product = torch.eye(8, dtype=torch.float64)
    for step in range(3):
        assert (topology.matrix(step) > 0).sum(1).tolist() == [2] * 8  # one peer per round
        product = topology.matrix(step) @ product
    torch.testing.assert_close(product, torch.full((8, 8), 1 / 8, dtype=torch.float64))
    assert topology.spectral_gap() == pytest.approx(1.0)
    assert torch.equal(topology.matrix(4), topology.matrix(1))  # the schedule repeats


def test_torus_shape():
    assert torus_shape(8) == (2, 4) and torus_shape(9) == (3, 3) and torus_shape(12) == (3, 4)
    assert Topology("torus", 9).matrix()[0].nonzero().flatten().tolist() == [0, 1, 2, 3, 6]


def test_a_user_matrix_is_accepted_when_valid():
    matrix = [[0.5, 0.5, 0.0], [0.0, 0.5, 0.5], [0.5, 0.0, 0.5]]  # directed cycle with self-loops
    topology = Topology(matrix, 3)
    assert topology.name == "custom"
    assert topology.spectral_gap() == pytest.approx(_numpy_gap(np.array(matrix)))


@pytest.mark.parametrize(
    ("topology", "world_size", "message"),
    [
        ("star", 4, r"`topology` must be one of \['ring', 'torus', 'exponential', 'one_peer_exponential', 'comp"),
        ("torus", 2, "`topology='torus'` needs a world size r x c with r, c >= 2 .*got 2 processes"),
        ("torus", 7, "got 7 processes"),
        ([[0.5, 0.5], [0.5, 0.5]], 4, "the 2 x 2 mixing matrix needs 2 processes, but 4 exist"),
        ([[0.6, 0.6], [0.4, 0.4]], 2, "must be doubly stochastic; row 0 sums to 1.2"),
        ([[0.7, 0.3], [0.2, 0.8]], 2, "must be doubly stochastic; column 0 sums to 0.9"),
        ([[1.5, -0.5], [-0.5, 1.5]], 2, "must be non-negative"),
        ([[float("nan"), 0.5], [0.5, 0.5]], 2, "must be finite"),
        ([[0.5, 0.5, 0], [0.5, 0.5, 0], [0, 0, 1]], 3, "graph is not connected"),
        ([[0.0, 1.0], [1.0, 0.0]], 2, "spectral gap 0"),
        ([1.0, 0.0], 2, "must be square"),
        ("ring", 0, "`world_size` must be a positive integer"),
    ],
)
def test_bad_topologies_are_refused_by_name(topology, world_size, message):
    with pytest.raises(ValueError, match=message):
        Topology(topology, world_size)


def test_check_mixing_matrix_returns_float64():
    assert check_mixing_matrix([[1.0]], 1).dtype == torch.float64
