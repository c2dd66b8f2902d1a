import numpy as np
import pytest
import torch
from scipy.sparse.csgraph import connected_components

from hf_ext.companion.combinatorial.set_cover import (
    ColumnDenoiser,
    GenerativeNeighbourhood,
    beasley,
    greedy,
    trajectory,
)
from hf_ext.companion.combinatorial.set_cover.diffusion import STEPS, add_noise, keep, posterior, region_graph


@pytest.fixture(scope="module")
def instance():
    return beasley(300, 3000, 0.02, seed=0)


def test_noise_keeps_every_bit_at_t0_and_is_a_fair_coin_at_the_last_step():
    generator = torch.Generator().manual_seed(0)
    bits = torch.ones(20000)
    assert torch.equal(add_noise(bits, 0, generator), bits)
    assert abs(add_noise(bits, STEPS, generator).mean().item() - 0.5) < 0.02


def _bayes(x0: int, bit: int, t: int, s: int) -> float:
    """q(x_s = 1 | x_t = bit, x_0) by enumerating the forward chain x_0 -> x_s -> x_t."""
    joint = np.zeros(2)
    for xs in (0, 1):
        q_s = keep(s) * (xs == x0) + (1 - keep(s)) / 2
        q_t = keep(t) / keep(s) * (bit == xs) + (1 - keep(t) / keep(s)) / 2
        joint[xs] = q_s * q_t
    return joint[1] / joint.sum()


def test_posterior_is_bayes_rule_on_the_forward_chain_mixed_over_the_prediction():
    # t = 2, s = 1, x_0 = 1 surely, x_t = 1: (17/18 * 0.95) / (17/18 * 0.95 + 1/18 * 0.05) by hand
    assert posterior(torch.tensor([1.0]), torch.tensor([1.0]), 2, 1).item() == pytest.approx(
        (17 / 18 * 0.95) / (17 / 18 * 0.95 + 1 / 18 * 0.05)
    )
    p, bits = torch.tensor([0.0, 0.3, 0.8, 1.0]), torch.tensor([0.0, 1.0, 0.0, 1.0])
    for t, s in ((STEPS, 7), (5, 4), (4, 1), (1, 0)):
        pairs = zip(p.tolist(), bits.tolist(), strict=True)
        expected = [a * _bayes(1, int(b), t, s) + (1 - a) * _bayes(0, int(b), t, s) for a, b in pairs]
        assert posterior(p, bits, t, s).tolist() == pytest.approx(expected)
    assert posterior(p, bits, 1, 0).tolist() == pytest.approx(p.tolist())  # the last step samples x_0 itself


def test_trajectory_has_one_probability_row_per_step(instance):
    incumbent = greedy(instance)
    region = region_graph(instance, incumbent, np.arange(200))
    path = trajectory(ColumnDenoiser(), region, torch.Generator().manual_seed(0))
    assert path.shape == (STEPS, 200) and ((path >= 0) & (path <= 1)).all()
    assert trajectory(ColumnDenoiser(), region, torch.Generator().manual_seed(0), steps=4).shape == (4, 200)
    with pytest.raises(ValueError, match="`steps` must be an integer in 2..10"):
        trajectory(ColumnDenoiser(), region, torch.Generator(), steps=1)


def test_generative_neighbourhood_is_bounded_and_connected(instance):
    incumbent = greedy(instance)
    policy = GenerativeNeighbourhood(ColumnDenoiser(), seed=0)
    free = policy(instance, incumbent, 150, np.random.default_rng(0))
    assert 1 <= len(free) <= 150 and len(np.unique(free)) == len(free)
    matrix = instance.matrix[:, free].astype(np.int32)
    n_components, _ = connected_components(matrix.T @ matrix, directed=False)  # columns linked by shared rows
    assert n_components == 1


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: ColumnDenoiser(hidden=0), ValueError, "ColumnDenoiser: `hidden` must be an integer >= 1, got 0"),
        (lambda: ColumnDenoiser(rounds=-1), ValueError, "ColumnDenoiser: `rounds` must be an integer >= 0, got -1"),
        (lambda: ColumnDenoiser(rounds=None), TypeError, "ColumnDenoiser: `rounds` must be an integer >= 0, got None"),
        (
            lambda: GenerativeNeighbourhood(ColumnDenoiser(), region_factor=float("nan")),
            ValueError,
            "GenerativeNeighbourhood: `region_factor` must be a finite number, got nan",
        ),
        (
            lambda: GenerativeNeighbourhood(ColumnDenoiser(), steps=1),
            ValueError,
            r"`steps` must be an integer in 2..10",
        ),
        (lambda: GenerativeNeighbourhood(ColumnDenoiser(), seed="0"), TypeError, "`seed` must be an integer, got '0'"),
    ],
)
def test_the_denoiser_and_its_neighbourhood_refuse_bad_settings_by_name(make, error, message):
    """Issue 72: ``region_factor=nan`` and ``rounds=-1`` were taken, ``hidden=-1`` and a string seed failed inside
    torch naming nothing."""
    with pytest.raises(error, match=message):
        make()
