"""OR-Tools' set-cover module as the outside baseline: greedy + steepest descent, then guided local search."""

import time

import numpy as np

from hf_ext.companion.combinatorial.set_cover import SetCoverInstance

ORTOOLS_METHODS = ("ortools_greedy", "ortools_gls")


def ortools_model(instance: SetCoverInstance):
    """``ortools.set_cover``'s ``SetCoverModel`` of the instance (built column by column; not timed by the runs)."""
    from ortools.set_cover.python import set_cover

    model = set_cover.SetCoverModel()
    indices, indptr = instance.matrix.indices.tolist(), instance.matrix.indptr.tolist()
    for j, cost in enumerate(instance.costs.tolist()):
        model.add_empty_subset(cost)
        for i in indices[indptr[j] : indptr[j + 1]]:
            model.add_element_to_last_subset(i)
    return model


def run_ortools(method: str, instance: SetCoverInstance, time_limit: float, chunk: int = 1000) -> dict:
    """Anytime curve of OR-Tools' greedy then steepest search (``ortools_greedy``), continued by guided local
    search in chunks of ``chunk`` iterations until ``time_limit`` (``ortools_gls``). Only covers that our own
    feasibility check accepts are recorded: GLS's current state may leave rows uncovered."""
    from ortools.set_cover.python import set_cover

    if method not in ORTOOLS_METHODS:
        raise ValueError(f"run_ortools: `method` must be one of {list(ORTOOLS_METHODS)}, got {method!r}")
    model = ortools_model(instance)  # kept referenced: the invariant points into it without owning it
    invariant = set_cover.SetCoverInvariant(model)
    start, times, values, best = time.perf_counter(), [], [], None

    def record() -> None:
        nonlocal best
        selected = np.asarray(invariant.is_selected(), dtype=bool)
        value = instance.objective(selected)
        if (not values or value < values[-1]) and instance.is_feasible(selected):
            times.append(time.perf_counter() - start)
            values.append(value)
            best = selected

    set_cover.GreedySolutionGenerator(invariant).next_solution()
    record()
    set_cover.SteepestSearch(invariant).next_solution()
    record()
    if method == "ortools_gls":
        search = set_cover.GuidedLocalSearch(invariant)
        search.initialize()
        while time.perf_counter() - start < time_limit:
            search.set_max_iterations(chunk)
            search.next_solution()
            record()
    return {"times": times, "values": values, "selected": best}
