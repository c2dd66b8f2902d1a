import dataclasses
import itertools
import math

import numpy as np
import pytest
import torch

from hf_ext.companion.combinatorial.cam import (
    CAMConfig,
    FlipGNN,
    Graph,
    Trajectory,
    adjoint_targets,
    batch_graphs,
    energy,
    erdos_renyi,
    flip_benefit,
    initial_model,
    rollout,
    solve,
    train,
    training_signal_variance,
)
from hf_ext.companion.combinatorial.cam.train import base_logit, cam_loss, reinforce_loss, temperature


@pytest.mark.parametrize("problem", ["mis", "maxcut"])
def test_carried_adjoint_is_the_exact_gradient_of_the_expected_terminal_energy(problem):
    """Every trajectory of a 2-step chain with state-independent rates on a 4-node graph, enumerated: the mean of
    the carried adjoint given x_k equals V_k(x, x_i = 1) - V_k(x, x_i = 0), V_k(x) = E[E(x_T) | x_k = x]."""
    n, beta = 4, 1.3
    batch = batch_graphs([Graph(n, np.array([[0, 1], [1, 2], [2, 3], [0, 2]]))])
    rates = torch.tensor([[0.1, 0.7, 0.4, 0.9], [0.3, 0.2, 0.8, 0.6]])  # p_k[i], steps k = 0, 1
    cube = torch.tensor(list(itertools.product([0.0, 1.0], repeat=n)))  # all 16 states, index = binary number
    pick = torch.tensor(list(itertools.product(range(len(cube)), repeat=3)))  # x_0, f_0, f_1: 4096 trajectories
    x0, f0, f1 = cube[pick[:, 0]], cube[pick[:, 1]], cube[pick[:, 2]]
    states = torch.stack([x0, (x0 + f0) % 2, (x0 + f0 + f1) % 2])
    flips, probs = torch.stack([f0, f1]), rates[:, None, :].expand(2, len(pick), n)
    adjoint = adjoint_targets(problem, batch, Trajectory(states, flips, probs), beta)
    assert adjoint.shape == (3, len(pick), n)
    weight = torch.where(flips > 0, probs, 1 - probs).prod(-1).prod(0)  # P(f_0, f_1), same for every x_0

    def transition(p):  # P(x_{k+1} = y | x_k = x), (16, 16)
        return torch.where(cube[:, None, :] != cube[None, :, :], p, 1 - p).prod(-1)

    values = [energy(problem, batch, cube, beta)[:, 0]]  # V_2 = E, then V_1, V_0
    for p in rates.flip(0):
        values.append(transition(p) @ values[-1])
    powers, eye = 2 ** torch.arange(n - 1, -1, -1), torch.eye(n)
    for k, value in enumerate(values[::-1]):
        index = (states[k] * powers).sum(-1).long()
        for s, x in enumerate(cube):
            mask = index == s
            mean = (weight[mask, None] * adjoint[k, mask]).sum(0) / weight[mask].sum()
            with_i, without_i = ((x + (1 - x) * eye) * powers).sum(-1), ((x * (1 - eye)) * powers).sum(-1)
            torch.testing.assert_close(mean, value[with_i.long()] - value[without_i.long()], rtol=1e-5, atol=1e-5)


def test_training_improves_over_the_initialization():
    graphs = [erdos_renyi(40, 0.15, s) for s in range(6)]
    held_out = batch_graphs([erdos_renyi(40, 0.15, 100 + s) for s in range(4)])
    config = CAMConfig(steps=6, chains=4, hidden=16, layers=2, train_steps=40, learning_rate=1e-2, seed=0)
    initial = initial_model(config)  # the same initialization train() draws
    model, history = train(config, graphs, progress=False)

    def terminal_energy(m):
        states = rollout(m, held_out, 6, 16, torch.Generator().manual_seed(7)).states[-1]
        return energy("mis", held_out, states, config.beta).mean().item()

    assert len(history) == 40 and all(math.isfinite(h["loss"]) for h in history)
    assert len(history[-1]["adjoint_signal"]) == 6 and history[-1]["conflicts_per_node"] >= 0
    assert terminal_energy(model) < terminal_energy(initial) - 3  # random states: energy > 0; trained: < 0
    assert solve(model, "mis", held_out, 6, 4)[0].mean() >= solve(initial, "mis", held_out, 6, 4)[0].mean()


def test_reinforce_trains_in_the_same_loop_and_signal_variance_is_measured():
    graphs = [erdos_renyi(20, 0.2, s) for s in range(3)]
    for method in ("cam", "reinforce"):
        config = CAMConfig(method=method, steps=3, chains=4, hidden=8, layers=1, train_steps=3)
        model, history = train(config, graphs, progress=False)
        assert len(history) == 3
        signal = training_signal_variance(model, config, graphs, repeats=4)
        assert signal["variance"] > 0 and signal["relative_variance"] > 0


def test_train_seconds_stops_training():
    config = CAMConfig(steps=2, chains=2, hidden=4, layers=1, train_steps=10_000, train_seconds=0.5)
    _, history = train(config, [erdos_renyi(10, 0.3, 0)], progress=False)
    assert 1 <= len(history) < 10_000


def test_save_pretrained_round_trip_and_damaged_files(tmp_path):
    model = FlipGNN(6, 2)
    model.save_pretrained(tmp_path)
    loaded = FlipGNN.from_pretrained(tmp_path)
    for a, b in zip(model.state_dict().values(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    (tmp_path / "model.safetensors").write_bytes((tmp_path / "model.safetensors").read_bytes()[:50])
    with pytest.raises(ValueError, match="model.safetensors"):
        FlipGNN.from_pretrained(tmp_path)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("steps", 0, "`steps` must be an integer >= 1"),
        ("chains", 0, "`chains` must be an integer >= 1"),
        ("problem", "tsp", r"`problem` must be one of \['mis', 'maxcut'\]"),
        ("method", "ppo", r"`method` must be one of \['cam', 'reinforce'\]"),
        ("beta", math.nan, "`beta` must be a finite number"),
        ("tau_end", 5.0, "`tau_end` must be <= tau_start"),
        ("tau_end", 0.0, "`tau_end` must be > 0"),
        ("base_flip", 0.0, r"`base_flip` must be in \(0, 1\)"),
    ],
)
def test_bad_config_names_the_field(field, value, message):
    with pytest.raises(ValueError, match=f"CAMConfig: {message}"):
        CAMConfig(**{field: value})


def test_an_unset_end_temperature_is_the_problems_own():
    """Max-cut ends warmer than MIS (its training collapsed near its end at MIS's 0.2); a set ``tau_end`` wins."""
    assert CAMConfig(problem="mis").final_temperature == 0.2
    assert CAMConfig(problem="maxcut").final_temperature == 0.5
    assert CAMConfig(problem="maxcut", tau_end=0.2).final_temperature == 0.2
    assert temperature(CAMConfig(problem="maxcut"), 1.0) == pytest.approx(0.5)


def test_reinforce_baseline_is_per_graph_and_its_entropy_bonus_is_cams_temperature():
    """Identical chains on each graph (graphs of different energies): no advantage is left, so the loss is the
    KL term alone, KL(p || base_flip) / (T K N); a global baseline would leave the graphs' energy difference in it."""
    torch.manual_seed(0)
    model, batch = FlipGNN(8, 1), batch_graphs([erdos_renyi(12, 0.4, 0), erdos_renyi(5, 0.1, 1)])
    one = rollout(model, batch, 3, 1, torch.Generator().manual_seed(0))
    copies = Trajectory(*(t.expand(-1, 4, -1).clone() for t in (one.states, one.flips, one.probs)))
    config = CAMConfig(method="reinforce", steps=3, chains=4, base_flip=0.2)
    loss = reinforce_loss(model, config, batch, copies, tau=0.3)
    logits = model(batch, copies.states[:-1].reshape(12, -1), torch.arange(3).repeat_interleave(4) / 3)
    p = torch.sigmoid(logits)
    kl = (p * (p / 0.2).log() + (1 - p) * ((1 - p) / 0.8).log()).sum()
    torch.testing.assert_close(loss, kl / logits.numel())


def test_cam_targets_fall_back_to_the_reference_chain_without_signal():
    """Max-cut on a graph without edges: every adjoint is zero, so the optimum is base_flip everywhere and the
    network train() starts from already fits it (loss 0, no gradient)."""
    config = CAMConfig(problem="maxcut", steps=3, chains=2, hidden=4, layers=1, base_flip=0.2)
    model, batch = initial_model(config), batch_graphs([Graph(5, np.zeros((0, 2)))])
    trajectory = rollout(model, batch, 3, 2, torch.Generator().manual_seed(0))
    torch.testing.assert_close(trajectory.probs, torch.full((3, 2, 5), 0.2))
    loss = cam_loss(model, config, batch, trajectory, tau=0.5)
    loss.backward()
    torch.testing.assert_close(loss, torch.tensor(0.0))
    assert all(p.grad is None or not p.grad.any() for p in model.parameters())


def test_cam_loss_is_minimised_by_the_kl_optimal_flip_probability_of_the_mean_benefit():
    """One logit (the head's bias: zero weights) sees different benefits over the rollouts: the loss's gradient
    vanishes at p = sigmoid(logit(base_flip) + mean benefit / tau), the KL-optimal flip probability; the earlier
    cross-entropy to each rollout's sigmoid(logit(base_flip) + benefit / tau) stopped at the mean of the sigmoids."""
    config, tau = CAMConfig(steps=1, chains=64, hidden=4, layers=1), 0.2  # the old loss: gradient -0.03 there
    model, batch = initial_model(config), batch_graphs([Graph(2, np.array([[0, 1]]))])
    trajectory = rollout(model, batch, 1, 64, torch.Generator().manual_seed(0))
    benefit = flip_benefit("mis", batch, trajectory, config.beta)
    assert benefit.min() < 0 < benefit.max()
    with torch.no_grad():
        model.head.bias.fill_(base_logit(config) + benefit.mean().item() / tau)
    cam_loss(model, config, batch, trajectory, tau).backward()
    assert abs(model.head.bias.grad.item()) < 1e-6


@pytest.mark.parametrize(
    ("problem", "base_flip", "expected"), [("mis", None, 0.5), ("maxcut", None, 0.1), ("maxcut", 0.3, 0.3)]
)
def test_the_reference_chain_is_the_problems_own_unless_set(problem, base_flip, expected):
    """Max-cut gets no signal under the uniform chain: an unset `base_flip` gives it the lazy one MIS does not need."""
    config = CAMConfig(problem=problem, steps=2, chains=2, hidden=4, layers=1, base_flip=base_flip)
    trajectory = rollout(initial_model(config), batch_graphs([erdos_renyi(6, 0.5, 0)]), 2, 2, torch.Generator())
    torch.testing.assert_close(trajectory.probs, torch.full((2, 2, 6), expected))


def test_the_initial_model_is_a_function_of_the_seed_and_leaves_the_global_generator_alone():
    """Issue 37: it reseeded torch's global generator (torch.manual_seed), changing what every later draw gives."""
    config = CAMConfig(problem="mis", seed=3)
    torch.manual_seed(11)
    first = initial_model(config).state_dict()
    after = torch.rand(4)
    torch.manual_seed(12)
    again = initial_model(config).state_dict()
    torch.manual_seed(11)
    assert torch.equal(torch.rand(4), after)  # initial_model drew nothing from it
    assert all(torch.equal(first[name], again[name]) for name in first)


def test_a_model_trained_for_one_problem_is_refused_for_another(tmp_path):
    """Issue 72: ``solve(mis_model, "maxcut", ...)`` decoded cuts from MIS flip logits without a word."""
    graphs = [erdos_renyi(10, 0.3, 0)]
    config = CAMConfig(problem="mis", steps=2, chains=2, hidden=4, layers=1, train_steps=1)
    model, _ = train(config, graphs, progress=False)
    batch = batch_graphs(graphs)
    assert model.problem == "mis"
    with pytest.raises(ValueError, match=r"solve: the model was trained for 'mis', not 'maxcut'"):
        solve(model, "maxcut", batch, 2, 2)
    with pytest.raises(ValueError, match=r"train: the model was trained for 'mis', not 'maxcut'"):
        train(dataclasses.replace(config, problem="maxcut"), graphs, model=model, progress=False)
    model.save_pretrained(tmp_path)
    loaded = FlipGNN.from_pretrained(tmp_path)
    assert loaded.problem == "mis" and torch.equal(
        solve(loaded, "mis", batch, 2, 2)[0], solve(model, "mis", batch, 2, 2)[0]
    )
    with pytest.raises(ValueError, match=r"FlipGNN: `problem` must be one of \['mis', 'maxcut'\], got 'tsp'"):
        FlipGNN(4, 1, problem="tsp")
    bare = FlipGNN(4, 1)  # built by hand, or an older checkpoint: held to no problem, and train records its own
    solve(bare, "maxcut", batch, 2, 2)
    assert (
        train(dataclasses.replace(config, problem="maxcut"), graphs, model=bare, progress=False)[0].problem == "maxcut"
    )
