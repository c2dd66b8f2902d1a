import numpy as np
import pytest
import torch
from scipy.sparse.csgraph import connected_components

from hf_ext.companion.combinatorial.set_cover import (
    ColumnDenoiser,
    GenerativeNeighbourhood,
    beasley,
    default_denoiser,
    greedy,
    train_denoiser,
    trajectory,
)
from hf_ext.companion.combinatorial.set_cover.diffusion import STEPS, add_noise, region_graph


@pytest.fixture(scope="module")
def instance():
    return beasley(300, 3000, 0.02, seed=0)


def test_noise_keeps_every_bit_at_t0_and_is_a_fair_coin_at_the_last_step():
    generator = torch.Generator().manual_seed(0)
    bits = torch.ones(20000)
    assert torch.equal(add_noise(bits, 0, generator), bits)
    assert abs(add_noise(bits, STEPS, generator).mean().item() - 0.5) < 0.02


def test_trajectory_has_one_probability_row_per_step(instance):
    incumbent = greedy(instance)
    region = region_graph(instance, incumbent, np.arange(200))
    path = trajectory(ColumnDenoiser(), region, torch.Generator().manual_seed(0))
    assert path.shape == (STEPS, 200) and ((path >= 0) & (path <= 1)).all()


def test_generative_neighbourhood_is_bounded_and_connected(instance):
    incumbent = greedy(instance)
    policy = GenerativeNeighbourhood(ColumnDenoiser(), seed=0)
    free = policy(instance, incumbent, 150, np.random.default_rng(0))
    assert 1 <= len(free) <= 150 and len(np.unique(free)) == len(free)
    matrix = instance.matrix[:, free].astype(np.int32)
    n_components, _ = connected_components(matrix.T @ matrix, directed=False)  # columns linked by shared rows
    assert n_components == 1


def test_default_denoiser_is_trained_once_then_loaded_from_its_cache(tmp_path):
    first = default_denoiser(tmp_path, examples=2, epochs=1)
    assert (tmp_path / "set_cover_denoiser.safetensors").exists()
    second = default_denoiser(tmp_path, examples=2, epochs=1)
    for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_training_refuses_zero_examples():
    with pytest.raises(ValueError, match="`examples` and `epochs` must be integers >= 1"):
        train_denoiser(examples=0)
