"""Chvatal's greedy (cost per newly covered row) and a redundancy-removal pass, both in numpy rounds.

The sequential rules pick one column at a time; each round here takes the longest run of the sequential order that
no pick inside the run can change (its columns share no open row), so the result is the sequential rule's, column
for column, in a few hundred numpy rounds instead of a Python step per column (1M columns in seconds).
"""

import numpy as np

from .instance import SetCoverInstance, gather

POOL = 16384  # columns whose exact ratio a greedy round recomputes (the ones with the lowest lower bounds)
RUN = 1024  # at most this many picks per round: conflicts are checked among them


def _first_conflict(rows: np.ndarray, owner: np.ndarray, n: int) -> int:
    """The first of ``n`` ordered columns sharing a row (``rows``, entries of column ``owner``) with an earlier one."""
    order = np.lexsort((owner, rows))
    repeated = rows[order][1:] == rows[order][:-1]
    return int(owner[order][1:][repeated].min()) if repeated.any() else n


def _lowest(bound: np.ndarray, size: int) -> tuple[np.ndarray, tuple[float, int]]:
    """The ``size`` columns least by (bound, index), and the least (bound, index) of all the others."""
    if len(bound) <= size:
        return np.arange(len(bound)), (np.inf, len(bound))
    value = np.partition(bound, size)[size]
    below, tied = np.flatnonzero(bound < value), np.flatnonzero(bound == value)
    take = size - len(below)
    return np.concatenate([below, tied[:take]]), (value, int(tied[take]))


def greedy(instance: SetCoverInstance) -> np.ndarray:
    """A feasible cover as a boolean column mask: repeatedly the column of least (cost / newly covered rows, index).

    Ratios only grow as rows get covered, so a column's last computed ratio is a lower bound. A round recomputes
    the exact ratio of the ``POOL`` columns with the lowest bounds; those below every outside bound are in the
    sequential order, and its prefix whose columns share no open row are the next sequential picks.
    """
    indptr, indices, costs = instance.matrix.indptr, instance.matrix.indices, instance.costs
    uncovered = np.ones(instance.n_rows, dtype=bool)
    selected = np.zeros(instance.n_columns, dtype=bool)
    bound = costs / np.maximum(np.diff(indptr), 1)
    while uncovered.any():
        pool, (limit, limit_index) = _lowest(bound, POOL)
        pool_rows, pool_owner = gather(indptr, indices, pool)
        while True:
            new = np.bincount(pool_owner, weights=uncovered[pool_rows], minlength=len(pool))
            with np.errstate(divide="ignore"):
                ratio = np.where(new > 0, costs[pool] / np.maximum(new, 1), np.inf)
            bound[pool] = ratio
            ready = np.flatnonzero((new > 0) & ((ratio < limit) | ((ratio == limit) & (pool < limit_index))))
            if len(ready) == 0:
                break
            ready = ready[np.lexsort((pool[ready], ratio[ready]))][:RUN]
            position = np.full(len(pool), -1)
            position[ready] = np.arange(len(ready))
            keep = (position[pool_owner] >= 0) & uncovered[pool_rows]
            run = _first_conflict(pool_rows[keep], position[pool_owner[keep]], len(ready))
            selected[pool[ready[:run]]] = True
            uncovered[pool_rows[keep & (position[pool_owner] < run)]] = False
    return remove_redundant(instance, selected)


def remove_redundant(instance: SetCoverInstance, selected: np.ndarray) -> np.ndarray:
    """Drop selected columns whose rows are all covered by others, most expensive first; returns a new mask.

    A column that cannot be dropped now never can (coverage only falls); among those that can, the run that
    shares no row is dropped at once, as the one-at-a-time pass would.
    """
    selected = np.asarray(selected, dtype=bool).copy()
    indptr, indices = instance.matrix.indptr, instance.matrix.indices
    coverage = instance.coverage(selected)
    chosen = np.flatnonzero(selected)
    candidates = chosen[np.argsort(-instance.costs[chosen], kind="stable")]
    while len(candidates):
        rows, owner = gather(indptr, indices, candidates)
        blocked = np.zeros(len(candidates), dtype=bool)
        blocked[owner[coverage[rows] < 2]] = True
        candidates = candidates[~blocked]
        rows, owner = gather(indptr, indices, candidates)
        run = _first_conflict(rows, owner, len(candidates))
        dropped = candidates[:run]
        selected[dropped] = False
        np.subtract.at(coverage, rows[owner < run], 1)
        candidates = candidates[run:]
    return selected
