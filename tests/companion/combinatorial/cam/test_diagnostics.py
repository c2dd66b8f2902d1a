import numpy as np
import pytest
import torch

from hf_ext.companion.combinatorial.cam import Graph, Trajectory, batch_graphs, chain_diagnostics, flip_delta

# the 4-node graph of the adjoint's enumeration test: a triangle 0-1-2 and a pendant node 3 on node 2
FOUR = batch_graphs([Graph(4, np.array([[0, 1], [1, 2], [2, 3], [0, 2]]))])


def test_mis_diagnostics_of_a_hand_made_rollout():
    """Chain 0 ends in {0, 1, 3} (edge 0-1 inside), chain 1 in {0, 3} (independent); the expected terminal states
    round to {0, 1, 3} and {0, 2, 3} (edges 0-2 and 2-3 inside)."""
    x0 = torch.tensor([[1.0, 1, 1, 1], [0, 0, 0, 0]])
    flips = torch.tensor([[[0.0, 0, 1, 0], [1, 0, 0, 1]]])
    probs = torch.tensor([[[0.1, 0.2, 0.9, 0.3], [0.6, 0.4, 0.7, 0.8]]])
    trajectory = Trajectory(torch.stack([x0, (x0 + flips[0]) % 2]), flips, probs)
    out = chain_diagnostics("mis", FOUR, trajectory, beta=1.5)
    assert out["energy_per_node"] == pytest.approx(((-3 + 1.5) + -2) / 2 / 4)
    assert out["set_per_node"] == pytest.approx((3 + 2) / 2 / 4)
    assert out["conflicts_per_node"] == pytest.approx((1 + 0) / 2 / 4)
    assert out["conflict_free"] == pytest.approx(0.5)
    assert out["expected_conflicts_per_node"] == pytest.approx((1 + 2) / 2 / 4)
    assert out["flip_rate"] == pytest.approx([0.5])
    # one step: |benefit| = |E(x_T, x_i = 1) - E(x_T, x_i = 0)| = |1.5 * (set neighbours of i) - 1|
    assert out["adjoint_signal"] == pytest.approx([(0.5 + 0.5 + 3.5 + 1 + 1 + 0.5 + 2 + 1) / 8])


@pytest.mark.parametrize("problem", ["mis", "maxcut"])
@pytest.mark.parametrize("rate", [0.2, 0.5])
def test_adjoint_signal_shrinks_by_one_minus_twice_the_flip_rate_per_step(problem, rate):
    """With state-independent rates p the signal at step k is |1 - 2p|^(T - 1 - k) times the terminal one: under
    the uniform chain (p = 1/2) every step but the last gets none."""
    states = (torch.rand(4, 16, 4, generator=torch.Generator().manual_seed(0)) < 0.5).float()
    trajectory = Trajectory(states, (states[1:] - states[:-1]).abs(), torch.full((3, 16, 4), rate))
    signal = chain_diagnostics(problem, FOUR, trajectory, beta=1.5)["adjoint_signal"]
    last = flip_delta(problem, FOUR, states[-1], 1.5).abs().mean().item()
    assert signal == pytest.approx([abs(1 - 2 * rate) ** 2 * last, abs(1 - 2 * rate) * last, last])
    assert last > 0


def test_maxcut_has_no_constraint_to_report():
    states = torch.zeros(2, 1, 4)
    out = chain_diagnostics("maxcut", FOUR, Trajectory(states, states[1:], torch.full((1, 1, 4), 0.1)), beta=1.0)
    assert set(out) == {"energy_per_node", "flip_rate", "adjoint_signal"}
