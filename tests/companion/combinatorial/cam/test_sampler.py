import numpy as np
import pytest
import torch

from hf_ext.companion.combinatorial.cam import (
    FlipGNN,
    Graph,
    batch_graphs,
    decode,
    erdos_renyi,
    local_search_maxcut,
    local_search_mis,
    objective,
    rollout,
    solve,
)


def test_rollout_shapes_and_xor_dynamics():
    batch = batch_graphs([erdos_renyi(10, 0.3, 0), erdos_renyi(7, 0.3, 1)])
    trajectory = rollout(FlipGNN(8, 2), batch, steps=5, chains=3, generator=torch.Generator().manual_seed(0))
    assert trajectory.states.shape == (6, 3, 17) and trajectory.flips.shape == trajectory.probs.shape == (5, 3, 17)
    torch.testing.assert_close(trajectory.probs[0], torch.full((3, 17), 0.5))  # zero head: the uniform chain
    expected = trajectory.states[-2] + (1 - 2 * trajectory.states[-2]) * trajectory.probs[-1]
    torch.testing.assert_close(trajectory.expected_terminal(), expected)
    torch.testing.assert_close(trajectory.states[1:], (trajectory.states[:-1] + trajectory.flips) % 2)


def test_rollout_and_solve_are_deterministic_by_seed():
    torch.manual_seed(0)
    model = FlipGNN(8, 2)
    batch = batch_graphs([erdos_renyi(20, 0.2, 0)])
    runs = [rollout(model, batch, 4, 2, torch.Generator().manual_seed(s)).states for s in (0, 0, 1)]
    assert torch.equal(runs[0], runs[1]) and not torch.equal(runs[0], runs[2])
    assert torch.equal(solve(model, "mis", batch, 4, 2, seed=3)[1], solve(model, "mis", batch, 4, 2, seed=3)[1])


def test_best_of_k_is_the_best_chain_per_graph_and_batching_keeps_graphs_apart():
    torch.manual_seed(0)
    model = FlipGNN(8, 2)
    graphs = [erdos_renyi(15, 0.3, 0), Graph(0, np.zeros((0, 2))), erdos_renyi(12, 0.3, 1)]
    batch = batch_graphs(graphs)
    values, solution = solve(model, "mis", batch, steps=3, chains=6, seed=0)
    assert values.shape == (3,) and solution.shape == (27,) and values[1] == 0
    assert values[0] == solution[:15].sum() and values[2] == solution[15:].sum()
    assert (solution[batch.edges[:, 0]] * solution[batch.edges[:, 1]]).sum() == 0
    assert values.min() >= solve(model, "mis", batch, steps=3, chains=1, seed=0)[0].min()


@pytest.mark.parametrize("problem, search", [("mis", local_search_mis), ("maxcut", local_search_maxcut)])
def test_local_search_improves_every_chain_before_the_best_is_kept(problem, search):
    torch.manual_seed(0)
    model = FlipGNN(8, 2)
    graphs = [erdos_renyi(30, 0.2, 0), Graph(0, np.zeros((0, 2))), erdos_renyi(25, 0.3, 1)]
    batch = batch_graphs(graphs)
    plain = solve(model, problem, batch, steps=3, chains=5, seed=2)[0]
    values, solution = solve(model, problem, batch, steps=3, chains=5, seed=2, local_search=True)
    decoded = decode(problem, batch, rollout(model, batch, 3, 5, torch.Generator().manual_seed(2)).expected_terminal())
    searched = torch.zeros_like(decoded)
    for k, chain in enumerate(decoded.bool().numpy()):
        for g, graph in enumerate(graphs):
            low, high = batch.offsets[g], batch.offsets[g + 1]
            searched[k, low:high] = torch.as_tensor(search(graph, chain[low:high]), dtype=torch.float32)
    torch.testing.assert_close(values, objective(problem, batch, searched).max(0).values)
    assert (values >= plain).all() and (values > plain).any()
    if problem == "mis":
        assert (solution[batch.edges[:, 0]] * solution[batch.edges[:, 1]]).sum() == 0


@pytest.mark.parametrize(
    ("steps", "chains", "error", "message"),
    [
        (0, 2, ValueError, "`steps` must be an integer >= 1, got 0"),
        (3, 0, ValueError, "`chains` must be an integer >= 1, got 0"),
        (2.5, 2, TypeError, "`steps` must be an integer >= 1, got 2.5"),
        (3, "2", TypeError, "`chains` must be an integer >= 1, got '2'"),
        (float("nan"), 2, ValueError, "`steps` must be a finite number, got nan"),
    ],
)
def test_steps_and_chains_that_are_not_integers_at_least_one_are_refused(steps, chains, error, message):
    """Issue 72 added the types: ``steps=nan`` failed in torch (``unsupported range: 0 -> nan``), ``chains="2"`` in
    a comparison, naming neither."""
    batch = batch_graphs([erdos_renyi(5, 0.5, 0)])
    with pytest.raises(error, match=f"rollout: {message}"):
        rollout(FlipGNN(4, 1), batch, steps, chains, torch.Generator())
    with pytest.raises(error, match=f"rollout: {message}"):
        solve(FlipGNN(4, 1), "mis", batch, steps, chains)


@pytest.mark.parametrize(
    ("name", "value", "allowed"), [("seed", "0", "an integer"), ("local_search", "no", "True or False")]
)
def test_solve_refuses_a_seed_or_local_search_of_another_type(name, value, allowed):
    """Issue 72: ``local_search="no"`` ran the local search (a true string), ``seed="0"`` failed inside torch."""
    batch = batch_graphs([erdos_renyi(5, 0.5, 0)])
    with pytest.raises(TypeError, match=f"solve: `{name}` must be {allowed}, got '{value}'"):
        solve(FlipGNN(4, 1), "mis", batch, 2, 2, **{name: value})


def test_solve_refuses_an_unknown_problem_naming_the_choices_before_the_models_problem():
    """The walk of issue 72: a model trained for MIS asked for "tsp" was told to train one for "tsp"."""
    batch = batch_graphs([erdos_renyi(5, 0.5, 0)])
    with pytest.raises(ValueError, match=r"solve: `problem` must be one of \['mis', 'maxcut'\], got 'tsp'"):
        solve(FlipGNN(4, 1, problem="mis"), "tsp", batch, 2, 2)


@pytest.mark.parametrize("problem", ["mis", "maxcut"])
def test_a_batch_of_only_an_empty_graph_solves_to_nothing(problem):
    values, solution = solve(FlipGNN(4, 1), problem, batch_graphs([Graph(0, np.zeros((0, 2)))]), 3, 2)
    assert values.tolist() == [0.0] and solution.numel() == 0
