"""The benchmark harness: every compared method by name under one wall-clock budget, each returning its anytime
curve (times, objectives), for ``hf-ext run set_cover`` and the benchmarks."""

import time

from hf_ext.companion.combinatorial.set_cover import (
    AdaptiveNeighbourhood,
    ColumnDenoiser,
    GenerativeNeighbourhood,
    LNSConfig,
    SetCoverInstance,
    default_denoiser,
    greedy,
    random_neighbourhood,
    run_lns,
    solve_mip,
)
from hf_ext.companion.combinatorial.set_cover.diffusion import STEPS

from .ortools_baseline import ORTOOLS_METHODS, run_ortools

LNS_METHODS = {"local_lns": "local", "random_lns": "random"}  # method -> the LNSConfig.policy it runs
METHODS = ("glns", "glns_adaptive", *LNS_METHODS, "highs", "greedy", *ORTOOLS_METHODS)


def _greedy(instance: SetCoverInstance, config: LNSConfig) -> dict:
    start = time.perf_counter()
    selected = greedy(instance)
    return {"times": [time.perf_counter() - start], "values": [instance.objective(selected)], "selected": selected}


def _highs(instance: SetCoverInstance, config: LNSConfig) -> dict:
    """HiGHS alone on the whole MIP (its own heuristics, no warm start), improving solutions timed by callback."""
    start, times, values = time.perf_counter(), [], []

    def record(objective: float) -> None:
        times.append(time.perf_counter() - start)
        values.append(objective)

    result = solve_mip(instance.costs, instance.matrix, config.time_limit, on_improvement=record)
    return {"times": times, "values": values, "selected": result.selected, "bound": result.bound}


def _lns(instance: SetCoverInstance, config: LNSConfig) -> dict:
    result = run_lns(instance, config)
    return {"times": result.times, "values": result.values, "selected": result.selected}


def _glns(
    instance: SetCoverInstance, config: LNSConfig, denoiser: ColumnDenoiser | None, steps: int, adaptive: bool
) -> dict:
    """LNS with the generative policy, alone or (``adaptive``) drawn against random neighbourhoods by the gain per
    second each earns; the default denoiser is trained (once, cached) before the clock starts."""
    policy = GenerativeNeighbourhood(denoiser or default_denoiser(), steps=steps, seed=config.seed)
    if adaptive:
        policy = AdaptiveNeighbourhood({"glns": policy, "random": random_neighbourhood})
    result = run_lns(instance, config, neighbourhood=policy)
    return {"times": result.times, "values": result.values, "selected": result.selected}


RUNNERS = {"local_lns": _lns, "random_lns": _lns, "highs": _highs, "greedy": _greedy}


def run_method(
    method: str,
    instance: SetCoverInstance,
    config: LNSConfig,
    denoiser: ColumnDenoiser | None = None,
    steps: int = STEPS,
) -> dict:
    """``{"times", "values", "selected"}``: when each incumbent appeared (seconds from the call) and its objective.

    ``config.time_limit`` is every method's budget, and the LNS methods run ``config`` as given: ``local_lns`` and
    ``random_lns`` refuse a ``config.policy`` other than their own (``LNS_METHODS``); GLNS's neighbourhood (alone,
    or for ``glns_adaptive`` drawn against random ones) takes the place of the policy (``run_lns``) and uses
    ``denoiser`` (a trained ``ColumnDenoiser``; the cached default when None) for ``steps`` model calls."""
    if method not in METHODS:
        raise ValueError(f"run_method: `method` must be one of {list(METHODS)}, got {method!r}")
    if method in LNS_METHODS and config.policy != LNS_METHODS[method]:
        raise ValueError(
            f"run_method: {method!r} runs LNSConfig(policy={LNS_METHODS[method]!r}), got policy={config.policy!r}"
        )
    if method in ("glns", "glns_adaptive"):
        return _glns(instance, config, denoiser, steps, adaptive=method == "glns_adaptive")
    if method in ORTOOLS_METHODS:
        return run_ortools(method, instance, config.time_limit)
    return RUNNERS[method](instance, config)
