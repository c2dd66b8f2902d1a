import itertools

import numpy as np
import pytest
import torch

from hf_ext.companion.combinatorial.cam import (
    Graph,
    batch_graphs,
    decode,
    energy,
    erdos_renyi,
    flip_delta,
    is_independent,
    objective,
)

# a path 0-1-2-3, a triangle 4-5-6 and an isolated node 7 (a disconnected graph)
PATH_TRIANGLE = Graph(8, np.array([[0, 1], [1, 2], [2, 3], [4, 5], [5, 6], [4, 6]]))


def test_mis_energy_and_cut_by_hand():
    batch = batch_graphs([PATH_TRIANGLE])
    x = torch.tensor([[1.0, 1, 0, 1, 1, 1, 0, 1]])  # 6 nodes set, edges (0,1) and (4,5) inside
    assert energy("mis", batch, x, beta=2.0).item() == -6 + 2 * 2
    # cut edges: (1,2) (2,3) (5,6) (4,6)
    assert energy("maxcut", batch, x).item() == -4
    assert objective("maxcut", batch, x).item() == 4


@pytest.mark.parametrize("problem", ["mis", "maxcut"])
def test_flip_delta_is_the_energy_change_of_each_single_flip(problem):
    batch = batch_graphs([PATH_TRIANGLE, erdos_renyi(9, 0.4, 3)])
    x = (torch.rand(3, batch.num_nodes, generator=torch.Generator().manual_seed(0)) < 0.5).float()
    delta = flip_delta(problem, batch, x, beta=1.7)
    for i in range(batch.num_nodes):
        flipped = x.clone()
        flipped[:, i] = 1 - flipped[:, i]
        change = (energy(problem, batch, flipped, 1.7) - energy(problem, batch, x, 1.7)).sum(1)
        torch.testing.assert_close(delta[:, i], change)


def test_decoded_mis_is_independent_and_maximal_and_follows_the_scores():
    batch = batch_graphs([PATH_TRIANGLE, erdos_renyi(30, 0.3, 0)])
    states = torch.ones(4, batch.num_nodes)
    states[1:] = (torch.rand(3, batch.num_nodes, generator=torch.Generator().manual_seed(1)) < 0.5).float()
    solutions = decode("mis", batch, states)
    assert is_independent(batch, solutions).all()
    blocked = torch.sparse.mm(batch.adjacency, solutions.T).T > 0
    assert bool(((solutions > 0) | blocked).all())  # maximal: every node is in the set or has a neighbour in it
    # on the path, set nodes come first: {0, 2} beats the low-degree ends {0, 3} when scored
    scored = torch.zeros(1, 8)
    scored[0, [1, 3]] = 1
    assert decode("mis", batch_graphs([PATH_TRIANGLE]), scored)[0, :4].tolist() == [0, 1, 0, 1]
    assert objective("mis", batch_graphs([PATH_TRIANGLE]), decode("mis", batch_graphs([PATH_TRIANGLE]), scored))[
        0
    ].item() == 4  # plus one triangle node and the isolated node


def test_decoding_matches_brute_force_greedy_by_priority():
    graph = erdos_renyi(12, 0.35, 5)
    batch = batch_graphs([graph])
    x = (torch.rand(1, 12, generator=torch.Generator().manual_seed(2)) < 0.5).float()
    degree = graph.degrees
    order = sorted(range(12), key=lambda v: (-x[0, v].item(), degree[v], v))
    chosen, nbrs = set(), graph.neighbours()
    for v in order:
        if not nbrs[v] & chosen:
            chosen.add(v)
    assert set(np.flatnonzero(decode("mis", batch, x)[0].numpy()).tolist()) == chosen


def test_empty_graph_and_edgeless_graph():
    batch = batch_graphs([Graph(0, np.zeros((0, 2))), Graph(3, np.zeros((0, 2)))])
    x = torch.zeros(2, 3)
    assert energy("mis", batch, x).tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert decode("mis", batch, x).sum().item() == 6  # every isolated node is taken


@pytest.mark.parametrize("fn", [energy, flip_delta, decode])
def test_unknown_problem_names_the_field_and_the_choices(fn):
    with pytest.raises(ValueError, match=r"`problem` must be one of \['mis', 'maxcut'\], got 'tsp'"):
        fn("tsp", batch_graphs([PATH_TRIANGLE]), torch.zeros(1, 8))


def test_bad_graphs_are_refused():
    with pytest.raises(ValueError, match="self-loops"):
        Graph(3, np.array([[1, 1]]))
    with pytest.raises(ValueError, match=r"`edges` must index nodes in \[0, 3\)"):
        Graph(3, np.array([[0, 3]]))
    assert len(Graph(3, np.array([[1, 0], [0, 1]])).edges) == 1  # duplicates merged


def test_all_pairs_of_the_triangle_conflict():
    batch = batch_graphs([PATH_TRIANGLE])
    for a, b in itertools.combinations([4, 5, 6], 2):
        x = torch.zeros(1, 8)
        x[0, [a, b]] = 1
        assert not is_independent(batch, x).item()
