"""Undirected graphs, their block-diagonal batches, and seeded generators (Erdos-Renyi, Barabasi-Albert, RB).

Our own generators in numpy, so that an instance depends only on its seed (networkx's change between releases).
"""

import math
from dataclasses import dataclass

import numpy as np
import torch

from hf_ext._validation import check_count, check_finite_number


@dataclass(frozen=True)
class Graph:
    """``num_nodes`` nodes and ``edges``, an ``(E, 2)`` int64 array of distinct pairs ``i < j``."""

    num_nodes: int
    edges: np.ndarray

    def __post_init__(self):
        if not isinstance(self.num_nodes, int) or self.num_nodes < 0:
            raise ValueError(f"Graph: `num_nodes` must be an integer >= 0, got {self.num_nodes!r}")
        edges = np.asarray(self.edges, dtype=np.int64).reshape(-1, 2)
        if edges.size and (edges.min() < 0 or edges.max() >= self.num_nodes):
            raise ValueError(
                f"Graph: `edges` must index nodes in [0, {self.num_nodes}), got {edges.min()}..{edges.max()}"
            )
        if (edges[:, 0] == edges[:, 1]).any():
            raise ValueError("Graph: `edges` must not contain self-loops")
        edges = np.unique(np.sort(edges, axis=1), axis=0)
        object.__setattr__(self, "edges", edges)

    @property
    def degrees(self) -> np.ndarray:
        return np.bincount(self.edges.ravel(), minlength=self.num_nodes)

    def neighbours(self) -> list[set[int]]:
        sets = [set() for _ in range(self.num_nodes)]
        for i, j in self.edges.tolist():
            sets[i].add(j)
            sets[j].add(i)
        return sets


@dataclass(frozen=True)
class GraphBatch:
    """Graphs as one block-diagonal graph: ``adjacency`` (sparse, symmetric), ``graph_of`` each node, ``offsets``."""

    graphs: tuple[Graph, ...]
    adjacency: torch.Tensor
    edges: torch.Tensor
    degrees: torch.Tensor
    graph_of: torch.Tensor
    offsets: tuple[int, ...]

    @property
    def num_nodes(self) -> int:
        return self.offsets[-1]

    @property
    def num_graphs(self) -> int:
        return len(self.graphs)


def batch_graphs(graphs) -> GraphBatch:
    """Stack ``graphs`` into one block-diagonal :class:`GraphBatch`."""
    graphs = tuple(graphs)
    if not graphs:
        raise ValueError("batch_graphs: `graphs` must hold at least one Graph")
    offsets = np.concatenate([[0], np.cumsum([g.num_nodes for g in graphs])]).astype(int)
    edges = np.concatenate([g.edges + o for g, o in zip(graphs, offsets[:-1], strict=True)])
    edges = torch.as_tensor(edges, dtype=torch.long).reshape(-1, 2)
    n = int(offsets[-1])
    both = torch.cat([edges, edges.flip(1)]).T
    adjacency = torch.sparse_coo_tensor(both, torch.ones(both.shape[1]), (n, n), check_invariants=True).coalesce()
    degrees = torch.bincount(edges.reshape(-1), minlength=n).float()
    graph_of = torch.repeat_interleave(torch.arange(len(graphs)), torch.as_tensor([g.num_nodes for g in graphs]))
    return GraphBatch(graphs, adjacency, edges, degrees, graph_of, tuple(int(o) for o in offsets))


def _check_probability(owner: str, name: str, value) -> None:
    check_finite_number(owner, name, value)
    if not 0 <= value <= 1:
        raise ValueError(f"{owner}: `{name}` must be a probability in [0, 1], got {value!r}")


def erdos_renyi(num_nodes: int, p: float, seed: int) -> Graph:
    """G(n, p): each pair an edge with probability ``p``."""
    check_count("erdos_renyi", "num_nodes", num_nodes, 0)
    _check_probability("erdos_renyi", "p", p)
    check_count("erdos_renyi", "seed", seed, 0)
    rng = np.random.default_rng(seed)
    i, j = np.triu_indices(num_nodes, k=1)
    keep = rng.random(i.shape[0]) < p
    return Graph(num_nodes, np.stack([i[keep], j[keep]], 1))


def barabasi_albert(num_nodes: int, m: int, seed: int) -> Graph:
    """Preferential attachment: each new node links to ``m`` distinct earlier nodes chosen by degree."""
    check_count("barabasi_albert", "num_nodes", num_nodes, 2)
    check_count("barabasi_albert", "m", m, 1, num_nodes - 1)
    check_count("barabasi_albert", "seed", seed, 0)
    rng = np.random.default_rng(seed)
    edges, ends = [], list(range(m))
    for new in range(m, num_nodes):
        targets = set()
        while len(targets) < m:
            targets.add(int(ends[rng.integers(len(ends))]) if len(ends) > m else len(targets))
        for t in targets:
            edges.append((t, new))
            ends += [t, new]
    return Graph(num_nodes, np.array(edges, dtype=np.int64).reshape(-1, 2))


def rb_graph(num_vars: int, domain: int, seed: int, p: float = 0.25, r: float = 0.8) -> Graph:
    """Model RB as a hard MIS instance: ``num_vars`` cliques of ``domain`` nodes (one value per variable) and
    ``round(r n ln n)`` constraints, each forbidding ``round(p d^2)`` value pairs of two variables as edges."""
    check_count("rb_graph", "num_vars", num_vars, 2)
    check_count("rb_graph", "domain", domain, 1)
    check_count("rb_graph", "seed", seed, 0)
    _check_probability("rb_graph", "p", p)
    check_finite_number("rb_graph", "r", r)
    if not r >= 0:
        raise ValueError(f"rb_graph: `r` must be >= 0, got {r!r}")
    rng = np.random.default_rng(seed)
    edges = []
    for v in range(num_vars):
        base = v * domain
        edges += [(base + a, base + b) for a in range(domain) for b in range(a + 1, domain)]
    for _ in range(round(r * num_vars * math.log(max(num_vars, 2)))):
        u, v = rng.choice(num_vars, size=2, replace=False)
        pairs = rng.choice(domain * domain, size=round(p * domain * domain), replace=False)
        edges += [(u * domain + q // domain, v * domain + q % domain) for q in pairs.tolist()]
    return Graph(num_vars * domain, np.array(edges, dtype=np.int64).reshape(-1, 2))
