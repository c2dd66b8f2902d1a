"""Every compared method under one wall-clock budget, each returning its anytime curve (times, objectives)."""

import time
from dataclasses import replace

from .checkpoint import default_denoiser
from .diffusion import STEPS, ColumnDenoiser, GenerativeNeighbourhood
from .greedy import greedy
from .instance import SetCoverInstance
from .lns import LNSConfig, run_lns
from .mip import solve_mip
from .ortools_baseline import ORTOOLS_METHODS, run_ortools

METHODS = ("glns", "local_lns", "random_lns", "highs", "greedy", *ORTOOLS_METHODS)


def _greedy(instance: SetCoverInstance, time_limit: float, config: LNSConfig) -> dict:
    start = time.perf_counter()
    selected = greedy(instance)
    return {"times": [time.perf_counter() - start], "values": [instance.objective(selected)], "selected": selected}


def _highs(instance: SetCoverInstance, time_limit: float, config: LNSConfig) -> dict:
    """HiGHS alone on the whole MIP (its own heuristics, no warm start), improving solutions timed by callback."""
    start, times, values = time.perf_counter(), [], []

    def record(objective: float) -> None:
        times.append(time.perf_counter() - start)
        values.append(objective)

    result = solve_mip(instance.costs, instance.matrix, time_limit, on_improvement=record)
    return {"times": times, "values": values, "selected": result.selected, "bound": result.bound}


def _lns(policy: str):
    def run(instance: SetCoverInstance, time_limit: float, config: LNSConfig) -> dict:
        result = run_lns(instance, replace(config, policy=policy, time_limit=time_limit))
        return {"times": result.times, "values": result.values, "selected": result.selected}

    return run


def _glns(
    instance: SetCoverInstance, time_limit: float, config: LNSConfig, denoiser: ColumnDenoiser | None, steps: int
) -> dict:
    """LNS with the generative policy; the default denoiser is trained (once, cached) before the clock starts."""
    policy = GenerativeNeighbourhood(denoiser or default_denoiser(), steps=steps, seed=config.seed)
    result = run_lns(instance, replace(config, time_limit=time_limit), neighbourhood=policy)
    return {"times": result.times, "values": result.values, "selected": result.selected}


RUNNERS = {"local_lns": _lns("local"), "random_lns": _lns("random"), "highs": _highs, "greedy": _greedy}


def run_method(
    method: str,
    instance: SetCoverInstance,
    time_limit: float,
    config: LNSConfig,
    denoiser: ColumnDenoiser | None = None,
    steps: int = STEPS,
) -> dict:
    """``{"times", "values", "selected"}``: when each incumbent appeared (seconds from the call) and its objective.
    GLNS uses ``denoiser`` (a trained ``ColumnDenoiser``; the cached default when None) for ``steps`` model calls."""
    if method == "glns":
        return _glns(instance, time_limit, config, denoiser, steps)
    if method in ORTOOLS_METHODS:
        return run_ortools(method, instance, time_limit)
    if method not in RUNNERS:
        raise ValueError(f"run_method: `method` must be one of {list(METHODS)}, got {method!r}")
    return RUNNERS[method](instance, time_limit, config)
