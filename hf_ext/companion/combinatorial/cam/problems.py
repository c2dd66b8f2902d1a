"""Energies, single-flip energy changes and decoders of maximum independent set and max-cut, batched.

States are ``(K, N)`` float 0/1 tensors: K chains over the N nodes of a :class:`GraphBatch`.
MIS: ``E = -sum x + beta sum_edges x_i x_j``; max-cut: ``E = -cut(x)``.
"""

import torch

from .graphs import GraphBatch

PROBLEMS = ("mis", "maxcut")


def check_problem(owner: str, problem: str) -> None:
    if problem not in PROBLEMS:
        raise ValueError(f"{owner}: `problem` must be one of {list(PROBLEMS)}, got {problem!r}")


def neighbour_sum(batch: GraphBatch, x: torch.Tensor) -> torch.Tensor:
    """``(A x)_i`` for every chain: how many neighbours of node i are set."""
    return torch.sparse.mm(batch.adjacency, x.T).T


def per_graph(batch: GraphBatch, node_values: torch.Tensor) -> torch.Tensor:
    """Sum ``(K, N)`` node values within each graph: ``(K, G)``."""
    out = node_values.new_zeros(node_values.shape[0], batch.num_graphs)
    return out.index_add_(1, batch.graph_of, node_values)


def energy(problem: str, batch: GraphBatch, x: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """The energy of each chain on each graph, ``(K, G)``."""
    check_problem("energy", problem)
    nbr = neighbour_sum(batch, x)
    if problem == "mis":
        return per_graph(batch, -x + 0.5 * beta * x * nbr)
    return per_graph(batch, -x * (batch.degrees - nbr))


def flip_delta(problem: str, batch: GraphBatch, x: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """``E(x with node i flipped) - E(x)`` for every node and chain, ``(K, N)``: the discrete gradient."""
    check_problem("flip_delta", problem)
    sign, nbr = 1 - 2 * x, neighbour_sum(batch, x)
    if problem == "mis":
        return sign * (beta * nbr - 1)
    return -sign * (batch.degrees - 2 * nbr)


def decode(problem: str, batch: GraphBatch, x: torch.Tensor) -> torch.Tensor:
    """Feasible solutions from states or scores in [0, 1] (expected states): for MIS, greedy conflict-free selection
    by priority ``4 x + (1 - degree / (max degree + 1))`` (set or likely nodes first, then low degree, then low
    index), which always yields a maximal independent set; for max-cut the rounded state."""
    check_problem("decode", problem)
    if problem == "maxcut":
        return (x > 0.5).float()
    n = batch.num_nodes
    degree_rank = 1 - batch.degrees.double() / (batch.degrees.max().double() + 1 if n else 1)
    priority = x.double() * 4 + degree_rank - torch.arange(n, dtype=torch.float64) * 1e-9
    undecided = torch.ones_like(x, dtype=torch.bool)
    chosen = torch.zeros_like(undecided)
    i, j = batch.edges[:, 0], batch.edges[:, 1]
    while undecided.any():
        # greedy by priority == repeatedly taking every undecided node that beats all its undecided neighbours
        p = torch.where(undecided, priority, torch.full_like(priority, -1.0))
        best = torch.full_like(p, -1.0)
        best.scatter_reduce_(1, i.expand(len(p), -1), p[:, j], "amax")
        best.scatter_reduce_(1, j.expand(len(p), -1), p[:, i], "amax")
        take = undecided & (p > best)
        chosen |= take
        blocked = neighbour_sum(batch, take.float()) > 0
        undecided &= ~take & ~blocked
    return chosen.float()


def objective(problem: str, batch: GraphBatch, solution: torch.Tensor) -> torch.Tensor:
    """What is maximised, ``(K, G)``: the set size (MIS) or the cut value (max-cut) of decoded solutions."""
    check_problem("objective", problem)
    if problem == "mis":
        return per_graph(batch, solution)
    return -energy("maxcut", batch, solution)


def is_independent(batch: GraphBatch, solution: torch.Tensor) -> torch.Tensor:
    """Whether each chain's set has no edge inside, ``(K,)``."""
    return (solution[:, batch.edges[:, 0]] * solution[:, batch.edges[:, 1]]).sum(1) == 0
