"""``minimize``: sep-CMA-ES runs with IPOP or no restarts on a (noisy) function, under an evaluation budget.

Each population is evaluated through an ``executor`` (:mod:`hf_ext.executors`; default: this process,
one candidate after another), all of its candidates at once, and told in the order asked, so the run is the
same on every executor for a deterministic function.
"""

import dataclasses
import logging
import math
from collections.abc import Callable
from concurrent.futures import Executor

import numpy as np

from hf_ext.executors import Dispatcher, Lost, Raised

from .config import ESConfig
from .result import MinimizeResult
from .sep_cma import SepCMAES

logger = logging.getLogger(__name__)


def minimize(
    function: Callable[[np.ndarray], float], x0, config: ESConfig, executor: Executor | None = None, retries: int = 1
) -> MinimizeResult:
    """Run :class:`SepCMAES` until ``config.max_evaluations`` (re-evaluations count) or the restarts run out.

    ``function`` runs on ``executor`` (picklable for one of other processes); an evaluation whose worker died
    is submitted again ``retries`` times, then counted as NaN. The function raising stops the run with its error,
    and an evaluation the executor refuses (shut down, broken for good) with ``RuntimeError``.

    A restart (IPOP: doubled popsize) starts from a uniform point of the box when it is bounded. The last
    population may be evaluated only in part, so the budget is never exceeded. The result's ``xbest`` is the
    best point evaluated in any run (the partly evaluated population included) and ``xfavorite`` the last
    run's mean. A NaN value is counted as the worst (by ``tell``) and logged here.
    """
    budget = config.max_evaluations if config.max_evaluations is not None else math.inf
    rng = np.random.default_rng(config.seed)
    x0 = np.asarray(x0, dtype=float)
    spent, restarts, nans, generations = 0, 0, 0, 0
    xbest, fbest, evals_best = None, math.inf, 0
    popsize = config.popsize
    dispatcher = Dispatcher(executor, function, retries, owner="minimize")
    while True:
        left = None if config.max_evaluations is None else config.max_evaluations - spent
        es = SepCMAES(
            x0, dataclasses.replace(config, popsize=popsize, seed=config.seed + 1000 * restarts, max_evaluations=left)
        )
        while not es.stop():
            X = es.ask()  # the last population only in part when the budget ends inside it
            values = _evaluate(dispatcher, X)
            finite = np.where(np.isnan(values), np.inf, values)
            if finite.size and finite.min() < fbest:
                best = int(finite.argmin())
                xbest, fbest, evals_best = X[best].copy(), float(finite[best]), spent + best + 1
            spent += len(X)
            if np.isnan(values).any():
                nans += int(np.isnan(values).sum())
                logger.warning("minimize: %d NaN value(s) at evaluation %d, counted as the worst", nans, spent)
            es.tell(X, values)
        generations += es.generation
        if spent >= budget or config.restarts == "none" or restarts >= config.max_restarts:
            break
        restarts += 1
        popsize = 2 * es.popsize
        if np.isfinite([config.lower, config.upper]).all():
            x0 = rng.uniform(config.lower, config.upper, size=x0.size)
    last = es.result
    return MinimizeResult(
        xbest=xbest,
        fbest=fbest,
        evals_best=evals_best,
        evaluations=spent,
        iterations=generations,
        xfavorite=last.xfavorite,
        stds=last.stds,
        restarts=restarts,
        nan_values=nans,
    )


def _evaluate(dispatcher: Dispatcher, X: np.ndarray) -> np.ndarray:
    """The values of the rows of ``X`` (all in flight at once), in row order; a lost evaluation is NaN, a refused
    one raises ``RuntimeError``: NaN would make it the worst point and the run would return as if it had ended."""
    for row, x in enumerate(X):
        dispatcher.submit(row, x)
    values = np.empty(len(X))
    for _ in range(len(X)):
        row, outcome = dispatcher.next_done()
        if isinstance(outcome, Raised):
            dispatcher.cancel()
            raise outcome.error
        if isinstance(outcome, Lost) and outcome.refused:
            dispatcher.cancel()
            raise RuntimeError(
                f"minimize: the executor refused the evaluation of row {row} of the population ({outcome.reason}); "
                "stopped, as a refused evaluation has no value: run again on a working executor"
            )
        if isinstance(outcome, Lost):
            logger.warning("minimize: the evaluation of row %d was lost (%s), counted as NaN", row, outcome.reason)
            outcome = math.nan
        values[row] = outcome
    return values
