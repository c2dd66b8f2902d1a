"""The benchmark harness: every compared method as ``solve(method, function, x0, budget, lower, upper, seed)``.

Ours (sep-CMA-ES with log weights, RB-PEM, unbiased PEM, probe-and-switch, resampling k), pycma's CMA-ES with
and without its ``NoiseHandler`` (UH-CMA-ES), and Nevergrad's optimizers for noisy functions (the outside tool a
user would pick: its noisy (1+1)-ES, TBPSA and its automatic choice NGOpt) spend the same budget, counted in
evaluations, re-evaluations included: ``function`` raises :class:`BudgetExhausted` at the first evaluation past it.
"""

import math
from collections.abc import Callable

import numpy as np

from hf_ext._random import seeded_global_rng
from hf_ext.companion.es import ESConfig, ESResult, minimize

OURS = {
    "sep_cma": {"weights": "log"},
    "rb_pem": {"weights": "rb_pem"},
    "unbiased_pem": {"weights": "unbiased_pem"},
    "probe_switch": {"weights": "probe_switch"},
    "resample_2": {"weights": "log", "resamples": 2},
    "resample_5": {"weights": "log", "resamples": 5},
    "resample_10": {"weights": "log", "resamples": 10},
}
PYCMA = ("pycma", "pycma_noise")
# Nevergrad's registry names. NGOpt is its automatic choice: told the function is noisy, it chains a portfolio of
# DiagonalCMA, PSO and DE to an optimistic noisy (1+1)-ES (about 1 ms per evaluation with nevergrad 1.0.12).
NEVERGRAD = {"ng_noisy_one_plus_one": "NoisyOnePlusOne", "ng_tbpsa": "TBPSA", "ng_ngopt": "NGOpt"}
METHODS = (*OURS, *PYCMA, *NEVERGRAD)


class BudgetExhausted(Exception):
    """Raised by :class:`Budgeted` at the first evaluation past the budget."""


class Budgeted:
    """``function`` that counts its evaluations, refuses any past ``budget`` and keeps the best one it saw."""

    def __init__(self, function: Callable[[np.ndarray], float], budget: int):
        self.function, self.budget, self.evaluations = function, budget, 0
        self.xbest, self.fbest, self.evals_best = None, math.inf, 0

    def __call__(self, x) -> float:
        if self.evaluations >= self.budget:
            raise BudgetExhausted(self.budget)
        x = np.array(x, dtype=float)
        value = float(self.function(x))
        self.evaluations += 1
        if value < self.fbest:  # NaN never is
            self.xbest, self.fbest, self.evals_best = x, value, self.evaluations
        return value

    def result(self, iterations: int, xfavorite, stds) -> ESResult:
        """An outside optimizer's :class:`ESResult`: the best point and the evaluations counted here, with the
        iterations, recommendation and sampling spread that only the optimizer knows."""
        return ESResult(
            xbest=self.xbest,
            fbest=self.fbest,
            evals_best=self.evals_best,
            evaluations=self.evaluations,
            iterations=iterations,
            xfavorite=np.asarray(xfavorite, dtype=float),
            stds=np.asarray(stds, dtype=float),
        )


def solve(
    method: str,
    function,
    x0,
    budget: int,
    lower: float,
    upper: float,
    seed: int,
    popsize: int | None = None,
    **es_fields,
) -> ESResult:
    """Minimise ``function`` with ``method`` (one of :data:`METHODS`) for ``budget`` evaluations.

    Returns both recommendations, ``xbest`` (the best point evaluated) and ``xfavorite`` (the last run's
    mean), with the evaluations spent. ``popsize`` (None: CMA-ES's default ``4 + floor(3 ln D)``) is the first
    run's population size for our methods and pycma's; Nevergrad's optimizers size their own. ``es_fields``
    override :class:`ESConfig` fields of our methods (RB-PEM's band and cap, say).
    """
    if method not in METHODS:
        raise ValueError(f"solve: `method` must be one of {list(METHODS)}, got {method!r}")
    budgeted = Budgeted(function, budget)
    sigma0 = 0.2 * (upper - lower) if math.isfinite(upper - lower) else 2.0
    if method in OURS:
        config = ESConfig(
            **OURS[method] | es_fields,
            sigma0=sigma0,
            lower=lower,
            upper=upper,
            max_evaluations=budget,
            seed=seed,
            popsize=popsize,
        )
        return minimize(budgeted, x0, config)  # never evaluates past the budget
    if method in NEVERGRAD:
        return _nevergrad(budgeted, x0, NEVERGRAD[method], sigma0, lower, upper, seed)
    return _pycma(budgeted, x0, sigma0, lower, upper, seed, method == "pycma_noise", popsize)


def _pycma(function: Budgeted, x0, sigma0, lower, upper, seed: int, noise_handler: bool, popsize) -> ESResult:
    """pycma's CMA-ES (restarted while budget remains); with ``noise_handler``, UH-CMA-ES as pycma's docs show."""
    x0 = np.asarray(x0, dtype=float)
    rng = np.random.default_rng(seed)
    # pycma seeds and draws from numpy's global generator: other threads' draws must wait (see hf_ext._random).
    with seeded_global_rng(seed):
        return _restarted_pycma(function, x0, sigma0, lower, upper, rng, noise_handler, popsize)


def _restarted_pycma(function: Budgeted, x0, sigma0, lower, upper, rng, noise_handler: bool, popsize) -> ESResult:
    import cma

    xfavorite, stds, iterations = x0, np.full(x0.size, sigma0), 0
    try:
        while True:
            options = {"bounds": [lower, upper], "seed": int(rng.integers(1, 2**31)), "verbose": -9}
            if popsize is not None:  # at every restart: this loop restarts pycma at one size, as at its default
                options["popsize"] = popsize
            es = cma.CMAEvolutionStrategy(x0, sigma0, options)
            handler = cma.NoiseHandler(es.N, maxevals=[1, 1, 30]) if noise_handler else None
            while not es.stop():
                if handler is None:
                    X = es.ask()
                    values = [function(x) for x in X]
                else:
                    X, values = es.ask_and_eval(function, evaluations=handler.evaluations)
                es.tell(X, _worst_for_nan(values))
                xfavorite, stds, iterations = es.result.xfavorite, es.result.stds, iterations + 1
                if handler is not None:
                    es.sigma *= handler(X, values, function, es.ask)
            x0 = rng.uniform(lower, upper, size=x0.size) if math.isfinite(upper - lower) else x0
    except BudgetExhausted:
        pass
    return function.result(iterations, xfavorite, stds)


def _nevergrad(function: Budgeted, x0, name: str, sigma0, lower, upper, seed: int) -> ESResult:
    """Nevergrad's optimizer ``name`` on an array parameter from ``x0`` with step ``sigma0`` in the box, told that
    the function is noisy, asked and told one point at a time until the budget. ``xfavorite`` is its
    recommendation (for its noisy optimizers, the point with the best averaged value); it keeps no sampling
    spread, so ``stds`` is NaN."""
    import nevergrad as ng

    x0 = np.asarray(x0, dtype=float)
    bounds = {"lower": lower, "upper": upper} if math.isfinite(upper - lower) else {}
    parametrization = ng.p.Array(init=np.clip(x0, lower, upper), **bounds).set_mutation(sigma=sigma0)
    parametrization.random_state = np.random.RandomState(seed)
    parametrization.function.deterministic = False
    optimizer = ng.optimizers.registry[name](parametrization=parametrization, budget=function.budget, num_workers=1)
    try:
        while True:
            candidate = optimizer.ask()
            optimizer.tell(candidate, function(candidate.value))
    except BudgetExhausted:
        pass
    return function.result(optimizer.num_tell, optimizer.provide_recommendation().value, np.full(x0.size, np.nan))


def _worst_for_nan(values) -> list[float]:
    values = np.asarray(values, dtype=float)
    bad = ~np.isfinite(values)
    if bad.any():
        worst = values[~bad].max() + 1 + abs(values[~bad].max()) if (~bad).any() else 0.0
        values = np.where(bad, worst, values)
    return values.tolist()
