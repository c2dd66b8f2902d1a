"""Neighbourhood policies of the LNS: which columns to free around the incumbent (at most ``size`` of them)."""

import heapq

import numpy as np

from .instance import SetCoverInstance


def random_neighbourhood(instance: SetCoverInstance, incumbent: np.ndarray, size: int, rng) -> np.ndarray:
    """Half the budget on random incumbent columns, half on random other columns (all-random would rarely free
    a column the incumbent uses, and a subproblem without one cannot improve)."""
    inside, outside = np.flatnonzero(incumbent), np.flatnonzero(~incumbent)
    k_in = min(len(inside), size // 2)
    k_out = min(len(outside), size - k_in)
    return np.concatenate([rng.choice(inside, k_in, replace=False), rng.choice(outside, k_out, replace=False)])


def grow_neighbourhood(
    instance: SetCoverInstance, scores: np.ndarray, size: int, start: int, allowed: np.ndarray | None = None
) -> np.ndarray:
    """A connected set of at most ``size`` columns grown from ``start`` through shared rows, taking the highest
    ``scores`` on the frontier first (best-first search on the column-row-column graph); ``allowed`` (a column
    mask) limits which columns it may take, the rows of taken columns connect them."""
    csc, csr = instance.matrix, instance.rows_to_columns
    taken, seen_rows, queued = [], set(), {start}
    frontier = [(-scores[start], start)]
    while frontier and len(taken) < size:
        _, j = heapq.heappop(frontier)
        taken.append(j)
        for i in csc.indices[csc.indptr[j] : csc.indptr[j + 1]].tolist():
            if i in seen_rows:
                continue
            seen_rows.add(i)
            for k in csr.indices[csr.indptr[i] : csr.indptr[i + 1]].tolist():
                if k not in queued and (allowed is None or allowed[k]):
                    queued.add(k)
                    heapq.heappush(frontier, (-scores[k], k))
    return np.asarray(taken, dtype=np.int64)


def grow_in_region(instance: SetCoverInstance, region: np.ndarray, scores: np.ndarray, size: int) -> np.ndarray:
    """At most ``size`` connected columns of ``region`` grown best-first from its highest score (``scores`` are
    the region's, in its order): how GLNS turns a region's scores into a neighbourhood."""
    whole = np.full(instance.n_columns, -np.inf)
    whole[region] = scores
    allowed = np.zeros(instance.n_columns, dtype=bool)
    allowed[region] = True
    return grow_neighbourhood(instance, whole, size, int(region[np.argmax(scores)]), allowed)


def near_incumbent(instance: SetCoverInstance, incumbent: np.ndarray, count: int, start: int, rng) -> np.ndarray:
    """Up to ``count`` incumbent columns around the incumbent column ``start``, in layers of nearness, the last layer
    sampled. Two incumbent columns are near when some column shares a row with each: one a repair could swap in
    for parts of both.

    Why not only incumbent columns that share a row: a cover with little overlap (on correlated costs every row is
    covered 1.09 times on average) falls apart into pieces of two or three columns that way, and a neighbourhood
    freeing two incumbent columns holds no improvement."""
    seen = np.zeros(instance.n_columns, dtype=bool)
    seen[start] = True
    layer = np.array([start])
    layers, total = [layer], 1
    while total < count and len(layer):
        bridges = instance.columns_of(instance.rows_of(layer))
        reached = instance.columns_of(instance.rows_of(bridges))
        layer = reached[incumbent[reached] & ~seen[reached]]
        if total + len(layer) > count:
            layer = rng.choice(layer, count - total, replace=False)
        seen[layer] = True
        layers.append(layer)
        total += len(layer)
    return np.concatenate(layers)


def local_neighbourhood(instance: SetCoverInstance, incumbent: np.ndarray, size: int, rng) -> np.ndarray:
    """Row-based local: up to ``size // 2`` incumbent columns near a random one (:func:`near_incumbent`), then the
    columns covering most of their rows per unit cost, up to ``size`` in all."""
    start = int(rng.choice(np.flatnonzero(incumbent)))
    inside = near_incumbent(instance, incumbent, size // 2 or 1, start, rng)
    rows = instance.rows_of(inside)
    hits = np.bincount(instance.rows_to_columns[rows].indices, minlength=instance.n_columns).astype(np.float64)
    hits[incumbent] = 0
    k = min(size - len(inside), int((hits > 0).sum()))
    ratio = hits / np.maximum(instance.costs, 1e-12)
    outside = np.argpartition(-ratio, k - 1)[:k] if k else np.zeros(0, dtype=np.int64)
    return np.concatenate([inside, outside])
