"""Classical references: greedy and local search (MIS 2-improvement, max-cut one-flip), and exact ILPs by HiGHS."""

import numpy as np

from .._highs import highs_model, run_highs
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


def _solve_binary_ilp(n_vars: int, cost: np.ndarray, rows, upper: np.ndarray, time_limit: float):
    import highspy

    if n_vars == 0:
        return np.zeros(0, dtype=bool), True  # HiGHS calls an empty model "empty", not optimal
    h = highs_model(time_limit)
    h.addVars(n_vars, np.zeros(n_vars), np.ones(n_vars))
    idx = np.arange(n_vars, dtype=np.int32)
    h.changeColsCost(n_vars, idx, cost.astype(float))
    h.changeColsIntegrality(n_vars, idx, np.array([highspy.HighsVarType.kInteger] * n_vars))
    for (columns, values), hi in zip(rows, upper, strict=True):
        h.addRow(-highspy.kHighsInf, float(hi), len(columns), np.asarray(columns, np.int32), np.asarray(values, float))
    run_highs(h)
    optimal = h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    solution = np.round(np.asarray(h.getSolution().col_value)).astype(bool)
    return solution, optimal


def exact_mis(graph: Graph, time_limit: float = 60.0) -> tuple[np.ndarray, bool]:
    """Maximum independent set as an ILP (``max sum x``, ``x_i + x_j <= 1``) by HiGHS; ``(set, proven optimal)``."""
    rows = [((i, j), (1.0, 1.0)) for i, j in graph.edges.tolist()]
    return _solve_binary_ilp(graph.num_nodes, -np.ones(graph.num_nodes), rows, np.ones(len(rows)), time_limit)


def exact_maxcut(graph: Graph, time_limit: float = 60.0) -> tuple[np.ndarray, bool]:
    """Max-cut as an ILP: sides ``x``, edge cut indicators ``y_e <= x_i + x_j`` and ``y_e <= 2 - x_i - x_j``."""
    n, m = graph.num_nodes, len(graph.edges)
    rows, upper = [], []
    for e, (i, j) in enumerate(graph.edges.tolist()):
        rows += [((n + e, i, j), (1.0, -1.0, -1.0)), ((n + e, i, j), (1.0, 1.0, 1.0))]
        upper += [0.0, 2.0]
    cost = np.concatenate([np.zeros(n), -np.ones(m)])
    solution, optimal = _solve_binary_ilp(n + m, cost, rows, np.array(upper), time_limit)
    return solution[:n], optimal
