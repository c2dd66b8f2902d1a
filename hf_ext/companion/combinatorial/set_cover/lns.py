"""Large-neighbourhood search: free a bounded set of columns, fix the rest, repair with HiGHS, keep improvements."""

import time
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from hf_ext._validation import check_finite_fields

from .greedy import greedy
from .instance import SetCoverInstance
from .mip import solve_mip
from .neighbourhood import local_neighbourhood, random_neighbourhood

POLICIES = {"random": random_neighbourhood, "local": local_neighbourhood}


@dataclass
class LNSConfig:
    policy: str = field(default="local", metadata={"help": f"Neighbourhood policy, one of {list(POLICIES)}."})
    neighbourhood_size: int = field(default=2000, metadata={"help": "Columns freed per iteration (>= 1)."})
    time_limit: float = field(default=10.0, metadata={"help": "Wall-clock seconds of the whole search (> 0)."})
    sub_time_limit: float = field(default=1.0, metadata={"help": "HiGHS seconds per subproblem (> 0)."})
    max_iterations: int = field(default=10**9, metadata={"help": "Stop after this many subproblems (>= 1)."})
    adapt_size: bool = field(
        default=False,
        metadata={
            "help": "Grow the neighbourhood 1.25x after a subproblem solved to optimality without improvement, "
            "shrink it 0.8x after one that hit `sub_time_limit` (between 1/4 and 4x `neighbourhood_size`)."
        },
    )
    seed: int = field(default=0, metadata={"help": "Seeds the neighbourhood choices."})

    def __post_init__(self):
        check_finite_fields(self)
        owner = type(self).__name__  # also the recipe's arguments, which subclass this config
        if not isinstance(self.policy, str) or self.policy not in POLICIES:
            raise ValueError(f"{owner}: `policy` must be one of {list(POLICIES)}, got {self.policy!r}")
        for name in ("neighbourhood_size", "max_iterations"):
            if getattr(self, name) < 1:
                raise ValueError(f"{owner}: `{name}` must be an integer >= 1, got {getattr(self, name)}")
        for name in ("time_limit", "sub_time_limit"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{owner}: `{name}` must be > 0 seconds, got {getattr(self, name)}")
        if self.seed < 0:  # numpy's generators take no negative seed: run_lns would fail at its start
            raise ValueError(f"{owner}: `seed` must be an integer >= 0, got {self.seed}")


@dataclass
class LNSResult:
    selected: np.ndarray
    objective: float
    times: list[float]  # seconds since the start at which each incumbent appeared
    values: list[float]  # their objectives (non-increasing)
    iterations: int


class Repair(NamedTuple):
    selected: np.ndarray  # the new column mask (the incumbent's where HiGHS found nothing better)
    optimal: bool  # HiGHS proved it optimal for the subproblem
    gap: float  # HiGHS's relative gap between the subproblem's objective and its dual bound (0 when proved, inf
    # while HiGHS has no bound)


def repair(
    instance: SetCoverInstance,
    incumbent: np.ndarray,
    free: np.ndarray,
    time_limit: float,
    node_limit: int | None = None,
) -> Repair:
    """Re-optimise the columns ``free`` with every other column fixed at its incumbent value (within ``time_limit``
    seconds and, when given, ``node_limit`` branch-and-bound nodes).

    The subproblem keeps only the rows the fixed selection leaves uncovered, so its size is bounded by the
    neighbourhood and not by the instance; HiGHS starts from the incumbent's restriction (feasible by construction).
    """
    free = np.unique(free)
    fixed = incumbent.copy()
    fixed[free] = False
    open_rows = np.flatnonzero(instance.coverage(fixed) == 0)
    if len(open_rows) == 0:
        return Repair(fixed, True, 0.0)
    sub = instance.rows_to_columns[open_rows][:, free].tocsc()
    result = solve_mip(instance.costs[free], sub, time_limit, warm_start=incumbent[free], node_limit=node_limit)
    fixed[free[result.selected]] = True
    gap = 0.0 if result.optimal else (result.objective - result.bound) / max(abs(result.objective), 1e-12)
    return Repair(fixed, result.optimal, gap)


def run_lns(
    instance: SetCoverInstance, config: LNSConfig, initial: np.ndarray | None = None, neighbourhood=None
) -> LNSResult:
    """LNS from ``initial`` (greedy by default) until ``config.time_limit``; the incumbent's objective never increases,
    and every cover after ``initial`` was found within the limit (a repair that ends past it is dropped).

    ``neighbourhood`` (``(instance, incumbent, size, rng) -> columns``, e.g. ``GenerativeNeighbourhood``) replaces
    ``config.policy``; one with an ``observe(gain, seconds)`` method hears after each repair what its neighbourhood
    gained and took (``AdaptiveNeighbourhood`` learns from it)."""
    choose = neighbourhood or POLICIES[config.policy]
    observe = getattr(choose, "observe", None)
    start = time.perf_counter()
    rng = np.random.default_rng(config.seed)
    if initial is None:
        incumbent = greedy(instance)
    else:
        incumbent = np.asarray(initial, dtype=bool).copy()
        if incumbent.shape != (instance.n_columns,):
            raise ValueError(
                f"run_lns: `initial` must be a mask of one entry per column ({instance.n_columns}), got shape "
                f"{incumbent.shape}"
            )
        if not instance.is_feasible(incumbent):
            raise ValueError("run_lns: `initial` does not cover every row")
    best = instance.objective(incumbent)
    times, values = [time.perf_counter() - start], [best]
    iteration, size = 0, float(config.neighbourhood_size)

    def left() -> float:
        return config.time_limit - (time.perf_counter() - start)

    while iteration < config.max_iterations and left() > 0.01:
        chosen_at = time.perf_counter()
        free = choose(instance, incumbent, int(size), rng)
        limit = min(config.sub_time_limit, left())  # what choosing the neighbourhood left
        if limit <= 0.01:
            break
        candidate, optimal, _ = repair(instance, incumbent, free, limit)
        if left() < 0:  # HiGHS ran past the limit: a cover found after it is not this search's
            break
        iteration += 1
        value = instance.objective(candidate)
        improved = value < best - 1e-9 and instance.is_feasible(candidate)
        if observe is not None:
            observe(best - value if improved else 0.0, time.perf_counter() - chosen_at)
        if improved:
            incumbent, best = candidate, value
            times.append(time.perf_counter() - start)
            values.append(best)
        if config.adapt_size and not improved and (optimal or limit == config.sub_time_limit):
            size *= 1.25 if optimal else 0.8  # a solved subproblem without gain: look wider; a timed-out one: narrower
            size = min(max(size, config.neighbourhood_size / 4, 1), 4 * config.neighbourhood_size)
    return LNSResult(incumbent, best, times, values, iteration)
