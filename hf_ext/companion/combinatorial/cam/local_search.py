"""The classical local searches CAM + LS improves each chain's decoded solution with: MIS 2-improvement and
max-cut one-flip."""

import numpy as np

from .graphs import Graph


def local_search_mis(graph: Graph, start: np.ndarray, max_rounds: int = 1000) -> np.ndarray:
    """2-improvements until none is left: drop one set node v, add two non-adjacent nodes whose only set
    neighbour is v (free nodes are added as they appear)."""
    nbrs, chosen = graph.neighbours(), start.astype(bool).copy()
    for _ in range(max_rounds):
        tight = _chosen_neighbours(graph, chosen)
        free = np.flatnonzero(~chosen & (tight == 0)).tolist()
        if free:
            for u in free:
                if not any(chosen[w] for w in nbrs[u]):
                    chosen[u] = True
            continue
        if not _two_improve(nbrs, chosen, tight):
            break
    return chosen


def _chosen_neighbours(graph: Graph, chosen: np.ndarray) -> np.ndarray:
    """How many chosen neighbours each node has."""
    i, j = graph.edges.T
    n = graph.num_nodes
    return (np.bincount(i, chosen[j], n) + np.bincount(j, chosen[i], n)).astype(int)


def _two_improve(nbrs, chosen, tight) -> bool:
    for v in np.flatnonzero(chosen).tolist():
        candidates = [u for u in nbrs[v] if tight[u] == 1]
        for a, u in enumerate(candidates):
            for w in candidates[a + 1 :]:
                if w not in nbrs[u]:
                    chosen[v], chosen[u], chosen[w] = False, True, True
                    return True
    return False


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
