"""Classical references CAM is judged against: greedy, the best of several local searches from random starts (the
searches themselves are CAM's post-processing, :mod:`hf_ext.companion.combinatorial.cam.local_search`), iterated
local search for MIS, and exact ILPs by HiGHS."""

import time

import numpy as np

from hf_ext._validation import check_count, check_finite_number
from hf_ext.companion.combinatorial._highs import solve_binary_program
from hf_ext.companion.combinatorial.cam import Graph, local_search_maxcut, local_search_mis


def _check_graph(owner: str, graph) -> None:
    """Refuse anything but our :class:`Graph`: a networkx graph or an adjacency matrix fails on a missing attribute."""
    if not isinstance(graph, Graph):
        kind = f"{type(graph).__module__}.{type(graph).__qualname__}"
        raise TypeError(
            f"{owner}: `graph` must be a hf_ext.companion.combinatorial.cam.Graph (Graph(num_nodes, edges), edges an "
            f"(E, 2) array of node pairs), got {graph!r} ({kind})"
        )


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


def iterated_local_search_mis(
    graph: Graph, start: np.ndarray, time_limit: float = 10.0, max_iterations: int | None = None, seed: int = 0
) -> np.ndarray:
    """Iterated local search in the style of Andrade, Resende and Werneck (2012), the local search inside KaMIS: force
    a random outside node into the set (its set neighbours leave), repair by free insertions and (1, 2)-swaps, keep
    the result when it is no smaller, else go back; the largest set seen within ``time_limit`` seconds (or
    ``max_iterations`` perturbations) is returned. No reductions: on dense ER graphs they remove nothing."""
    owner = "iterated_local_search_mis"
    _check_graph(owner, graph)
    check_finite_number(owner, "time_limit", time_limit)
    if not time_limit > 0:
        raise ValueError(f"{owner}: `time_limit` must be > 0 seconds, got {time_limit!r}")
    if max_iterations is not None:
        check_count(owner, "max_iterations", max_iterations)
    check_count(owner, "seed", seed)
    n, rng = graph.num_nodes, np.random.default_rng(seed)
    adjacency = np.zeros((n, n), dtype=bool)
    adjacency[graph.edges[:, 0], graph.edges[:, 1]] = adjacency[graph.edges[:, 1], graph.edges[:, 0]] = True
    nbrs = [np.flatnonzero(row) for row in adjacency]
    chosen = np.asarray(start, dtype=bool).copy()
    if chosen.shape != (n,) or (adjacency[chosen][:, chosen]).any():
        raise ValueError(f"iterated_local_search_mis: `start` must be an independent set of {n} booleans")
    tight = adjacency[chosen].sum(0)
    _swap_and_fill(adjacency, nbrs, chosen, tight, rng)  # a maximal set with no (1, 2)-swap left
    best, deadline, iteration = chosen.copy(), time.perf_counter() + time_limit, 0
    while n > int(chosen.sum()) and time.perf_counter() < deadline:
        if max_iterations is not None and iteration >= max_iterations:
            break
        iteration += 1
        kept = chosen.copy(), tight.copy()
        forced = int(rng.choice(np.flatnonzero(~chosen)))
        for u in nbrs[forced][chosen[nbrs[forced]]].tolist():
            chosen[u] = False
            tight[nbrs[u]] -= 1
        _insert(nbrs, chosen, tight, forced)
        _swap_and_fill(adjacency, nbrs, chosen, tight, rng)
        if chosen.sum() > best.sum():
            best = chosen.copy()
        elif chosen.sum() < kept[0].sum():
            chosen, tight = kept
    return best


def _insert(nbrs, chosen, tight, v) -> None:
    chosen[v] = True
    tight[nbrs[v]] += 1


def _swap_and_fill(adjacency, nbrs, chosen, tight, rng) -> None:
    """Insert free nodes and make (1, 2)-swaps (one set node out, two of its 1-tight neighbours in) until neither
    is left; nodes are visited in random order so that the search does not cycle on one plateau."""
    while True:
        for v in rng.permutation(np.flatnonzero(~chosen & (tight == 0))).tolist():
            if tight[v] == 0:
                _insert(nbrs, chosen, tight, v)
        for x in rng.permutation(np.flatnonzero(chosen)).tolist():
            candidates = nbrs[x][tight[nbrs[x]] == 1]
            if len(candidates) < 2:
                continue
            free_pairs = np.argwhere(np.triu(~adjacency[np.ix_(candidates, candidates)], 1))
            if len(free_pairs):
                u, w = candidates[free_pairs[rng.integers(len(free_pairs))]].tolist()
                chosen[x] = False
                tight[nbrs[x]] -= 1
                _insert(nbrs, chosen, tight, u)
                _insert(nbrs, chosen, tight, w)
                break
        else:
            return


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


def multistart_local_search(problem: str, graph: Graph, starts: int, seed: int = 0) -> np.ndarray:
    """The best of ``starts`` local searches from random starts (MIS: random-order greedy maximal independent sets,
    2-improvement; max-cut: random sides, one-flip): the classical counterpart of best-of-K chains with local
    search at the same K."""
    if problem not in ("mis", "maxcut"):
        raise ValueError(f"multistart_local_search: `problem` must be 'mis' or 'maxcut', got {problem!r}")
    _check_graph("multistart_local_search", graph)
    check_count("multistart_local_search", "starts", starts, 1)
    check_count("multistart_local_search", "seed", seed)
    rng = np.random.default_rng(seed)
    if problem == "maxcut":
        found = (local_search_maxcut(graph, rng.random(graph.num_nodes) < 0.5) for _ in range(starts))
        return max(found, key=lambda side: cut_value(graph, side))
    nbrs = graph.neighbours()
    found = (local_search_mis(graph, _random_maximal_set(nbrs, rng)) for _ in range(starts))
    return max(found, key=np.sum)


def _random_maximal_set(nbrs: list[set[int]], rng) -> np.ndarray:
    chosen = np.zeros(len(nbrs), dtype=bool)
    for v in rng.permutation(len(nbrs)).tolist():
        chosen[v] = not any(chosen[u] for u in nbrs[v])
    return chosen


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
