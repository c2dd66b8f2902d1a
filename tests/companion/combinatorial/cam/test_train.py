import math

import pytest
import torch

from hf_ext.companion.combinatorial.cam import (
    CAMConfig,
    FlipGNN,
    adjoint_targets,
    batch_graphs,
    energy,
    erdos_renyi,
    rollout,
    solve,
    train,
    training_signal_variance,
)


@pytest.mark.parametrize("problem", ["mis", "maxcut"])
def test_adjoint_targets_match_finite_differences_of_the_terminal_energy(problem):
    """Flip node i at step k, replay the later flips: the terminal energy moves by exactly a_k[i]."""
    batch = batch_graphs([erdos_renyi(9, 0.4, 0), erdos_renyi(6, 0.5, 1)])
    trajectory = rollout(FlipGNN(8, 1), batch, steps=4, chains=2, generator=torch.Generator().manual_seed(0))
    adjoint = adjoint_targets(problem, batch, trajectory, beta=1.3)
    assert adjoint.shape == trajectory.flips.shape
    base = energy(problem, batch, trajectory.states[-1], 1.3).sum(1)
    for k in range(4):
        for i in range(batch.num_nodes):
            x = trajectory.states[k].clone()
            x[:, i] = 1 - x[:, i]
            for later in trajectory.flips[k:]:
                x = (x + later) % 2
            torch.testing.assert_close(energy(problem, batch, x, 1.3).sum(1) - base, adjoint[k, :, i])


def test_training_improves_over_the_initialization():
    graphs = [erdos_renyi(40, 0.15, s) for s in range(6)]
    held_out = batch_graphs([erdos_renyi(40, 0.15, 100 + s) for s in range(4)])
    config = CAMConfig(steps=6, chains=4, hidden=16, layers=2, train_steps=40, learning_rate=1e-2, seed=0)
    torch.manual_seed(config.seed)
    initial = FlipGNN(16, 2)  # the same initialization train() draws
    model, history = train(config, graphs, progress=False)

    def terminal_energy(m):
        states = rollout(m, held_out, 6, 16, torch.Generator().manual_seed(7)).states[-1]
        return energy("mis", held_out, states, config.beta).mean().item()
    assert len(history) == 40 and all(math.isfinite(h["loss"]) for h in history)
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
    ],
)
def test_bad_config_names_the_field(field, value, message):
    with pytest.raises(ValueError, match=f"CAMConfig: {message}"):
        CAMConfig(**{field: value})
