"""Classical references: greedy and local search (MIS 2-improvement, max-cut one-flip), and exact ILPs by HiGHS."""

import numpy as np

from .._highs import solve_binary_program
from .graphs import Graph


def greedy_mis(graph: Graph) -> np.ndarray:
    """Minimum-degree greedy: take a node of least remaining degree, delete it and its neighbours."""
    nbrs = graph.neighbours()
    alive, chosen = set(range(graph.num_nodes)), np.zeros(graph.num_nodes, dtype=bool)
    degree = {v: len(nbrs[v]) for v in alive}
    while alive:
        v = min(alive, key=lambda u: (degree[u], u))
        chosen[v] = True
        removed = {v} | (nbrs[v] & alive)
        alive -= removed
        for u in removed:
            for w in nbrs[u] & alive:
                degree[w] -= 1
    return chosen


def local_search_mis(graph: Graph, start: np.ndarray, max_rounds: int = 1000) -> np.ndarray:
    """2-improvements until none is left: drop one set node v, add two non-adjacent nodes whose only set
    neighbour is v (free nodes are added as they appear)."""
    nbrs, chosen = graph.neighbours(), start.astype(bool).copy()
    for _ in range(max_rounds):
        tight = np.zeros(graph.num_nodes, dtype=int)
        for u, v in graph.edges.tolist():
            tight[u] += chosen[v]
            tight[v] += chosen[u]
        free = [u for u in range(graph.num_nodes) if not chosen[u] and tight[u] == 0]
        if free:
            for u in free:
                if not any(chosen[w] for w in nbrs[u]):
                    chosen[u] = True
            continue
        if not _two_improve(nbrs, chosen, tight):
            break
    return chosen


def _two_improve(nbrs, chosen, tight) -> bool:
    for v in np.flatnonzero(chosen).tolist():
        candidates = [u for u in nbrs[v] if tight[u] == 1]
        for a, u in enumerate(candidates):
            for w in candidates[a + 1 :]:
                if w not in nbrs[u]:
                    chosen[v], chosen[u], chosen[w] = False, True, True
                    return True
    return False


def cut_value(graph: Graph, side: np.ndarray) -> int:
    side = np.asarray(side, dtype=bool)
    return int((side[graph.edges[:, 0]] != side[graph.edges[:, 1]]).sum())


def greedy_maxcut(graph: Graph) -> np.ndarray:
    """Place nodes in order on the side that cuts more edges to the nodes already placed."""
    nbrs, side, placed = graph.neighbours(), np.zeros(graph.num_nodes, dtype=bool), np.zeros(graph.num_nodes, bool)
    for v in range(graph.num_nodes):
        ones = sum(side[u] for u in nbrs[v] if placed[u])
        zeros = sum(not side[u] for u in nbrs[v] if placed[u])
        side[v], placed[v] = zeros > ones, True
    return side


def local_search_maxcut(graph: Graph, start: np.ndarray, max_rounds: int = 100_000) -> np.ndarray:
    """One-flip local search: flip a node while that raises the cut."""
    nbrs, side = graph.neighbours(), np.asarray(start, dtype=bool).copy()
    for _ in range(max_rounds):
        gains = [sum(side[u] == side[v] for u in nbrs[v]) - sum(side[u] != side[v] for u in nbrs[v])
                 for v in range(graph.num_nodes)]
        best = int(np.argmax(gains)) if gains else 0
        if not gains or gains[best] <= 0:
            break
        side[best] = ~side[best]
    return side


def _solve_binary_ilp(cost: np.ndarray, entries, upper: np.ndarray, time_limit: float):
    """``min cost @ x`` over binary ``x`` with ``A @ x <= upper``, ``A``'s nonzeros ``entries = (values, (rows,
    columns))``: ``(x, proven optimal)``, all-false where HiGHS found no solution in time (feasible for both
    problems)."""
    result = solve_binary_program(cost, entries, np.full(len(upper), -np.inf), upper, time_limit)
    return (np.zeros(len(cost), dtype=bool) if result.values is None else result.values), result.optimal


def exact_mis(graph: Graph, time_limit: float = 60.0) -> tuple[np.ndarray, bool]:
    """Maximum independent set as an ILP (``max sum x``, ``x_i + x_j <= 1``) by HiGHS; ``(set, proven optimal)``."""
    n, m = graph.num_nodes, len(graph.edges)
    entries = (np.ones(2 * m), (np.repeat(np.arange(m), 2), graph.edges.ravel()))
    return _solve_binary_ilp(-np.ones(n), entries, np.ones(m), time_limit)


def exact_maxcut(graph: Graph, time_limit: float = 60.0) -> tuple[np.ndarray, bool]:
    """Max-cut as an ILP: sides ``x``, edge cut indicators ``y_e <= x_i + x_j`` and ``y_e <= 2 - x_i - x_j``."""
    n, m = graph.num_nodes, len(graph.edges)
    edge = np.arange(m)
    # row 2e: y_e - x_i - x_j <= 0 and row 2e + 1: y_e + x_i + x_j <= 2, where column n + e is y_e
    rows = np.concatenate([np.repeat(2 * edge, 3), np.repeat(2 * edge + 1, 3)])
    columns = np.tile(np.stack([n + edge, *graph.edges.T], axis=1).ravel(), 2)
    values = np.concatenate([np.tile([1.0, -1.0, -1.0], m), np.ones(3 * m)])
    cost = np.concatenate([np.zeros(n), -np.ones(m)])
    solution, optimal = _solve_binary_ilp(cost, (values, (rows, columns)), np.tile([0.0, 2.0], m), time_limit)
    return solution[:n], optimal
