"""Chvatal's greedy (cost per newly covered row) with a lazy priority queue, and a redundancy-removal pass."""

import heapq

import numpy as np

from .instance import SetCoverInstance


def greedy(instance: SetCoverInstance) -> np.ndarray:
    """A feasible cover as a boolean column mask.

    Lazy updates: a column's new coverage only shrinks, so a popped ratio that is out of date is recomputed and
    pushed back instead of updating every column after each pick (1M columns in seconds).
    """
    indptr, indices, costs = instance.matrix.indptr, instance.matrix.indices, instance.costs
    counts = np.diff(indptr)
    uncovered = np.ones(instance.n_rows, dtype=bool)
    selected = np.zeros(instance.n_columns, dtype=bool)
    heap = list(zip((costs / np.maximum(counts, 1)).tolist(), range(instance.n_columns), counts.tolist(), strict=True))
    heapq.heapify(heap)
    left = instance.n_rows
    while left and heap:
        ratio, j, count = heapq.heappop(heap)
        new = int(uncovered[indices[indptr[j] : indptr[j + 1]]].sum())
        if new == 0:
            continue
        if new < count:  # stale: push back with its current ratio
            heapq.heappush(heap, (costs[j] / new, j, new))
            continue
        selected[j] = True
        uncovered[indices[indptr[j] : indptr[j + 1]]] = False
        left -= new
    return remove_redundant(instance, selected)


def remove_redundant(instance: SetCoverInstance, selected: np.ndarray) -> np.ndarray:
    """Drop selected columns whose rows are all covered by others, most expensive first; returns a new mask."""
    selected = np.asarray(selected, dtype=bool).copy()
    indptr, indices = instance.matrix.indptr, instance.matrix.indices
    coverage = instance.coverage(selected)
    chosen = np.flatnonzero(selected)
    for j in chosen[np.argsort(-instance.costs[chosen], kind="stable")]:
        rows = indices[indptr[j] : indptr[j + 1]]
        if np.all(coverage[rows] >= 2):
            selected[j] = False
            coverage[rows] -= 1
    return selected
