"""Minimise a (noisy) function under an evaluation budget: sep-CMA-ES runs with IPOP or no restarts."""

import dataclasses
import logging
import math
from collections.abc import Callable

import numpy as np

from .config import ESConfig
from .sep_cma import SepCMAES

logger = logging.getLogger(__name__)


def minimize(function: Callable[[np.ndarray], float], x0, config: ESConfig) -> dict:
    """Run :class:`SepCMAES` until ``config.max_evaluations`` (re-evaluations count) or the restarts run out.

    A restart (IPOP: doubled popsize) starts from a uniform point of the box when it is bounded. The last
    population may be evaluated only in part, so the budget is never exceeded. A NaN value is counted as the
    worst (by ``tell``) and logged here.
    """
    budget = config.max_evaluations if config.max_evaluations is not None else math.inf
    rng = np.random.default_rng(config.seed)
    x0 = np.asarray(x0, dtype=float)
    spent, restarts, nans = 0, 0, 0
    best = {"xbest": x0, "fbest": math.inf}
    popsize = config.popsize
    while True:
        run_config = dataclasses.replace(
            config, popsize=popsize, seed=config.seed + 1000 * restarts, max_evaluations=None
        )
        es = SepCMAES(x0, run_config)
        while not es.stop() and spent < budget:
            X = es.ask()
            room = int(min(len(X), budget - spent))
            values = np.array([function(x) for x in X[:room]], dtype=float)
            spent += room
            if np.isnan(values).any():
                nans += int(np.isnan(values).sum())
                logger.warning("minimize: %d NaN value(s) at evaluation %d, counted as the worst", nans, spent)
            if room < len(X):
                finite = np.where(np.isnan(values), np.inf, values)
                if finite.size and finite.min() < best["fbest"]:
                    best = {"xbest": X[int(finite.argmin())], "fbest": float(finite.min())}
                break
            es.tell(X, values)
        if es.result["fbest"] < best["fbest"]:
            best = {"xbest": es.result["xbest"], "fbest": es.result["fbest"]}
        if spent >= budget or config.restarts == "none" or restarts >= config.max_restarts:
            break
        restarts += 1
        popsize = 2 * es.popsize
        if np.isfinite([config.lower, config.upper]).all():
            x0 = rng.uniform(config.lower, config.upper, size=x0.size)
    return best | {"xfavorite": es.mean, "evaluations": spent, "restarts": restarts, "nan_values": nans}
