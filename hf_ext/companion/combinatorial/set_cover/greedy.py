"""Chvatal's greedy (cost per newly covered row) and a redundancy-removal pass, both in numpy rounds.

The sequential rules pick one column at a time; each round here takes runs of the sequential order that no pick
inside the run can change (their columns share no open row), so the result is the sequential rule's, column for
column, in under a hundred numpy rounds instead of a Python step per column (1M columns in a third of a second).
"""

import numpy as np

from .instance import SetCoverInstance, gather

POOL = 16384  # columns whose exact ratio a greedy round recomputes (the ones with the lowest lower bounds)
RUN = 1024  # at most this many columns per round are checked for picking, in order
SHORTLIST_POOLS = 8  # pools' worth of lowest-bound columns the pools are drawn from, so a round partitions only these


def _first_conflict(rows: np.ndarray, owner: np.ndarray, n: int) -> int:
    """The first of ``n`` ordered columns sharing a row (``rows``, entries of column ``owner``) with an earlier one."""
    order = np.lexsort((owner, rows))
    repeated = rows[order][1:] == rows[order][:-1]
    return int(owner[order][1:][repeated].min()) if repeated.any() else n


def _picks_in_order(
    rows: np.ndarray,
    owner: np.ndarray,
    ratio: np.ndarray,
    index: np.ndarray,
    cost: np.ndarray,
    uncovered: np.ndarray,
    stop: tuple[float, int],
) -> np.ndarray:
    """The next sequential picks among columns in (ratio, index) order (their open ``rows``, entries of column
    ``owner``), every column not among them being least ``stop`` or more; marks the picks' rows covered.

    A run of columns sharing no open row is picked at once. A later column whose open rows the run covered has a
    higher ratio now: it is left for the next round, and the least of those new ratios is where picking must stop,
    so the columns the run did not touch keep being picked up to it instead of ending the round at the first
    conflict.
    """
    n = len(ratio)
    alive, picked = np.ones(n, dtype=bool), []
    while True:
        stop_ratio, stop_index = stop
        below = (ratio < stop_ratio) | ((ratio == stop_ratio) & (index < stop_index))
        candidates = np.flatnonzero(alive & below)
        if len(candidates) == 0:
            break
        rank = np.full(n, -1)
        rank[candidates] = np.arange(len(candidates))
        entry_rank = rank[owner]
        considered = entry_rank >= 0
        run = _first_conflict(rows[considered], entry_rank[considered], len(candidates))
        chosen = candidates[:run]
        picked.append(chosen)
        alive[chosen] = False
        uncovered[rows[considered & (entry_rank < run)]] = False
        if run == len(candidates):
            break
        waiting = alive[owner]
        changed = np.flatnonzero(np.bincount(owner[waiting & ~uncovered[rows]], minlength=n))
        left = np.bincount(owner[waiting & uncovered[rows]], minlength=n)[changed]
        alive[changed] = False
        with np.errstate(divide="ignore"):
            risen = np.where(left > 0, cost[changed] / np.maximum(left, 1), np.inf)
        first = np.lexsort((index[changed], risen))[0]
        stop = min(stop, (risen[first], index[changed][first]))
    return np.concatenate(picked) if picked else np.zeros(0, dtype=np.int64)


def _lowest(bound: np.ndarray, size: int) -> tuple[np.ndarray, tuple[float, int]]:
    """The ``size`` columns least by (bound, index), and the least (bound, index) of all the others."""
    if len(bound) <= size:
        return np.arange(len(bound)), (np.inf, len(bound))
    value = np.partition(bound, size)[size]
    below, tied = np.flatnonzero(bound < value), np.flatnonzero(bound == value)
    take = size - len(below)
    return np.concatenate([below, tied[:take]]), (value, int(tied[take]))


def _shortlist(bound: np.ndarray) -> tuple[np.ndarray, tuple[float, int]]:
    """The ``SHORTLIST_POOLS * POOL`` columns least by (bound, index), in index order so that ties keep breaking by
    index inside it, and the least (bound, index) of all the others (bounds only grow, so it stays a bound)."""
    shortlist, outside = _lowest(bound, SHORTLIST_POOLS * POOL)
    return np.sort(shortlist), outside


def greedy(instance: SetCoverInstance) -> np.ndarray:
    """A feasible cover as a boolean column mask: repeatedly the column of least (cost / newly covered rows, index).

    Ratios only grow as rows get covered, so a column's last computed ratio is a lower bound. A round recomputes
    the exact ratio of the ``POOL`` columns with the lowest bounds (found in a shortlist, re-drawn from every
    column when its pool would reach past the columns outside it); those below every outside bound are in the
    sequential order, and ``_picks_in_order`` takes the next sequential picks among them.
    """
    indptr, indices, costs = instance.matrix.indptr, instance.matrix.indices, instance.costs
    uncovered = np.ones(instance.n_rows, dtype=bool)
    selected = np.zeros(instance.n_columns, dtype=bool)
    bound = costs / np.maximum(np.diff(indptr), 1)
    shortlist, outside = _shortlist(bound)
    while uncovered.any():
        local, (value, at) = _lowest(bound[shortlist], POOL)
        limit, limit_index = min(outside, (value, shortlist[at] if at < len(shortlist) else len(bound)))
        if (limit, limit_index) == outside and len(shortlist) < len(bound):
            shortlist, outside = _shortlist(bound)  # too few shortlisted columns are still below all the others
            continue
        pool = shortlist[local]
        pool_rows, pool_owner = gather(indptr, indices, pool)
        while True:
            open_entry = uncovered[pool_rows]
            new = np.bincount(pool_owner, weights=open_entry, minlength=len(pool))
            with np.errstate(divide="ignore"):
                ratio = np.where(new > 0, costs[pool] / np.maximum(new, 1), np.inf)
            bound[pool] = ratio
            ready = np.flatnonzero((new > 0) & ((ratio < limit) | ((ratio == limit) & (pool < limit_index))))
            if len(ready) == 0:
                break
            ready = ready[np.lexsort((pool[ready], ratio[ready]))]
            stop = (ratio[ready[RUN]], pool[ready[RUN]]) if len(ready) > RUN else (limit, limit_index)
            ready = ready[:RUN]
            slot = np.full(len(pool), -1)
            slot[ready] = np.arange(len(ready))
            entry_slot = slot[pool_owner]
            keep = (entry_slot >= 0) & open_entry
            picks = _picks_in_order(
                pool_rows[keep], entry_slot[keep], ratio[ready], pool[ready], costs[pool[ready]], uncovered, stop
            )
            selected[pool[ready[picks]]] = True
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
