"""sep-CMA-ES (diagonal covariance, CSA step size) with pluggable recombination weights, in pycma's ask/tell form.

Our own numpy ES rather than pycma's: PEM changes the recombination weights and spends re-evaluations
inside a generation, which pycma's ``tell`` does not expose. Constants: Hansen's CMA tutorial, with the
diagonal learning rates scaled by (n + 2) / 3 (Ros & Hansen 2008).
"""

import copy
import dataclasses

import numpy as np

from hf_ext._validation import check_finite

from .config import ESConfig, default_popsize
from .result import ESResult
from .weights import LogWeights, ProbeAndSwitch, ResidualBootstrapPEM, UnbiasedPEM, WeightScheme, log_weights

# What a run between generations is, besides its config: restored by ``load_state_dict``.
_STATE = (
    "mean",
    "sigma",
    "diag",
    "p_sigma",
    "p_c",
    "generation",
    "evaluations",
    "best_x",
    "best_f",
    "best_evaluation",
)


def make_weight_scheme(config: ESConfig) -> WeightScheme:
    """The scheme ``config.weights`` names, built from its fields."""
    if config.weights == "log":
        return LogWeights()
    if config.weights == "unbiased_pem":
        return UnbiasedPEM(config.max_reevaluations, seed=config.seed + 1)
    pem = ResidualBootstrapPEM(
        config.replicates, config.band, config.max_reevaluations, config.pool_size, seed=config.seed + 1
    )
    return pem if config.weights == "rb_pem" else ProbeAndSwitch(pem, config.switch_threshold, config.probe_interval)


class SepCMAES:
    """Minimise in a box: ``while not es.stop(): X = es.ask(); es.tell(X, [f(x) for x in X])``.

    An ``ask`` returns either a new population (each candidate ``resamples`` times) or, when the weight
    scheme wants them, the candidates to re-evaluate; the generation's update happens at the ``tell`` that
    completes it, so every evaluation, re-evaluations included, passes through ask/tell and is counted. Where
    ``max_evaluations`` ends inside a generation, ``ask`` returns only the rows it leaves and their ``tell`` ends the
    run without an update.
    ``x0`` must be a non-empty 1-D sequence of finite numbers inside the box ``[lower, upper]``.
    """

    def __init__(self, x0, config: ESConfig, weight_scheme: WeightScheme | None = None):
        if not isinstance(config, ESConfig):
            raise TypeError(f"SepCMAES: `config` must be an ESConfig, got {type(config).__name__}")
        config = self.config = dataclasses.replace(config)  # a checked copy: a field set after construction is checked
        try:
            x0 = np.asarray(x0, dtype=float)
        except (TypeError, ValueError) as error:  # numpy's message names no argument
            raise TypeError(f"SepCMAES: `x0` must be a non-empty 1-D sequence of numbers, got {x0!r}") from error
        if x0.ndim != 1 or x0.size == 0:
            raise ValueError(f"SepCMAES: `x0` must be a non-empty 1-D sequence of numbers, got shape {x0.shape}")
        check_finite("SepCMAES", "x0", x0.tolist())
        outside = np.flatnonzero((x0 < config.lower) | (x0 > config.upper))
        if outside.size:  # it was clipped without a word: the run started elsewhere than asked
            raise ValueError(
                f"SepCMAES: `x0` must lie in the box [lower, upper] = [{config.lower}, {config.upper}] of its "
                f"ESConfig; entries {outside.tolist()[:10]} are outside ({x0[outside][:10].tolist()}): start inside "
                "or widen the box"
            )
        self.mean = x0.copy()
        n = self.n = self.mean.size
        self.popsize = config.popsize or default_popsize(n)
        self.base = log_weights(self.popsize)
        self.mu_eff = 1 / (self.base**2).sum()
        mu_eff = self.mu_eff
        self.c_sigma = (mu_eff + 2) / (n + mu_eff + 5)
        self.d_sigma = 1 + 2 * max(0.0, np.sqrt((mu_eff - 1) / (n + 1)) - 1) + self.c_sigma
        self.c_c = (4 + mu_eff / n) / (n + 4 + 2 * mu_eff / n)
        c1 = 2 / ((n + 1.3) ** 2 + mu_eff)
        c_mu = 2 * (mu_eff - 2 + 1 / mu_eff) / ((n + 2) ** 2 + mu_eff)
        scale = (n + 2) / 3  # the diagonal has n, not n^2, entries to learn
        self.c1 = min(1.0, c1 * scale)
        self.c_mu = min(1 - self.c1, c_mu * scale)
        self.chi_n = np.sqrt(n) * (1 - 1 / (4 * n) + 1 / (21 * n**2))
        self.sigma = config.sigma0
        self.diag = np.ones(n)  # diagonal of C
        self.p_sigma, self.p_c = np.zeros(n), np.zeros(n)
        self.rng = np.random.default_rng(config.seed)
        self.scheme = weight_scheme or make_weight_scheme(config)
        self.generation = 0
        self.evaluations = 0
        self.best_x: np.ndarray | None = None
        self.best_f, self.best_evaluation = np.inf, 0
        self._population: np.ndarray | None = None
        self._values: list[list[float]] = []
        self._rows = np.empty(0, dtype=int)  # candidate index of each row of the last ask

    def ask(self) -> np.ndarray:
        """The rows to evaluate next (a new population, or re-evaluations of the current one)."""
        if self._population is None:
            z = self.rng.standard_normal((self.popsize, self.n))
            self._population = np.clip(
                self.mean + self.sigma * np.sqrt(self.diag) * z, self.config.lower, self.config.upper
            )
            self._values = [[] for _ in range(self.popsize)]
            self._rows = np.repeat(np.arange(self.popsize), self.config.resamples)
        return self._population[self._asked()].copy()

    def _asked(self) -> np.ndarray:
        """The candidate index of each row ``ask`` returns: the generation's next rows, as many as the budget leaves
        (the last generation's first ones: the evaluations up to the budget are those of an uncapped run)."""
        if self.config.max_evaluations is None:
            return self._rows
        return self._rows[: max(0, self.config.max_evaluations - self.evaluations)]

    def tell(self, candidates, values) -> None:
        """Record ``values[i]``, the value of ``candidates[i]``: the rows of the last ``ask``, in any order.

        Values are paired with the candidates told, as pycma's ``tell`` pairs them, so a caller that
        evaluates out of order (a process pool, say) passes the rows as it evaluated them. A row that the
        last ``ask`` did not return is refused: the update moves the mean towards the points it sampled.
        NaN counts as the worst value (+inf).
        """
        if self._population is None:
            raise ValueError("SepCMAES.tell: call ask() first; tell records the values of the rows it returned")
        asked = self._asked()
        values = np.asarray(values, dtype=float).reshape(-1)
        if values.size != asked.size:
            raise ValueError(f"SepCMAES.tell: expected {asked.size} values for the last ask, got {values.size}")
        rows = self._asked_rows(candidates, asked)
        values = np.where(np.isnan(values), np.inf, values)
        for row, value in zip(rows, values, strict=True):
            self.evaluations += 1
            self._values[row].append(value)
            if value < self.best_f:
                self.best_f, self.best_x = float(value), self._population[row].copy()
                self.best_evaluation = self.evaluations
        if asked.size < self._rows.size:  # the budget ended inside the generation: counted, but no update from a part
            self._population = None
            return
        evaluations = [np.array(v) for v in self._values]
        # the population's first evaluations (told by their count: a re-evaluation may cover every candidate)
        if all(len(v) == self.config.resamples for v in self._values):
            means = np.array([e.mean() for e in evaluations])
            again = self.scheme.reevaluate(means, self.base)
            if again.size:
                self._rows = np.asarray(again, dtype=int)
                return
        self._update(self.scheme(_finite(evaluations), self.base, self._population))

    def _asked_rows(self, candidates, indices: np.ndarray) -> np.ndarray:
        """The population index of each told candidate, matched to the last ``ask``'s rows (``indices``) as a
        multiset."""
        asked = self._population[indices]
        candidates = np.asarray(candidates, dtype=float)
        if candidates.shape != asked.shape:
            raise ValueError(
                f"SepCMAES.tell: `candidates` must have the shape of the last ask(), {asked.shape}, "
                f"got {candidates.shape}"
            )
        asked_order, told_order = np.lexsort(asked.T[::-1]), np.lexsort(candidates.T[::-1])
        if not np.array_equal(asked[asked_order], candidates[told_order]):
            raise ValueError(
                "SepCMAES.tell: `candidates` must be the rows of the last ask() (in any order); got points it did "
                "not return (repaired, rounded or from another ask). Evaluate the asked rows, or start a new "
                "SepCMAES from the changed point"
            )
        rows = np.empty_like(indices)
        rows[told_order] = indices[asked_order]
        return rows

    def _update(self, weights: np.ndarray) -> None:
        """One sep-CMA-ES step with the scheme's weights (sum 1) on the current population.

        The paths are normalised by these weights' own ``1 / sum w^2`` (``mu_eff`` for hard weights): expected
        weights spread over more candidates, and with ``mu_eff`` the step-size path would read that smaller
        dispersion as short steps and shrink sigma even under random selection.
        """
        y = (self._population - self.mean) / self.sigma
        y_w = weights @ y
        mu_w = 1 / (weights**2).sum()
        self.mean = self.mean + self.sigma * y_w
        self.p_sigma = (1 - self.c_sigma) * self.p_sigma + np.sqrt(
            self.c_sigma * (2 - self.c_sigma) * mu_w
        ) * y_w / np.sqrt(self.diag)
        norm = np.linalg.norm(self.p_sigma)
        h_sigma = (
            norm / np.sqrt(1 - (1 - self.c_sigma) ** (2 * (self.generation + 1)))
            < (1.4 + 2 / (self.n + 1)) * self.chi_n
        )
        self.p_c = (1 - self.c_c) * self.p_c + h_sigma * np.sqrt(self.c_c * (2 - self.c_c) * mu_w) * y_w
        lost = (1 - h_sigma) * self.c1 * self.c_c * (2 - self.c_c)
        self.diag = (1 - self.c1 - self.c_mu + lost) * self.diag + self.c1 * self.p_c**2 + self.c_mu * (weights @ y**2)
        self.sigma *= np.exp(self.c_sigma / self.d_sigma * (norm / self.chi_n - 1))
        self.generation += 1
        self._population = None

    def stop(self) -> dict[str, float]:
        """The stopping criteria met (empty while running), as pycma's ``stop()``."""
        reasons = {}
        if self.config.max_evaluations is not None and self.evaluations >= self.config.max_evaluations:
            reasons["maxfevals"] = self.config.max_evaluations
        if self.sigma * np.sqrt(self.diag.max()) < self.config.tolx:
            reasons["tolx"] = self.config.tolx
        if not np.isfinite(self.sigma) or self.diag.max() > 1e14 * self.diag.min():
            reasons["conditioncov"] = 1e14
        return reasons

    def state_dict(self) -> dict:
        """The run's state between generations (paths, step size, counters, generators, the scheme's pool)."""
        if self._population is not None:
            raise ValueError("SepCMAES.state_dict: call it between generations, after the tell that completes one")
        state = {name: copy.deepcopy(getattr(self, name)) for name in _STATE}
        return state | {"rng": self.rng.bit_generator.state, "scheme": copy.deepcopy(vars(self.scheme))}

    def load_state_dict(self, state: dict) -> None:
        """Continue the run ``state_dict`` saved (this ES must have been built with the same config)."""
        for name in _STATE:
            setattr(self, name, copy.deepcopy(state[name]))
        self.rng.bit_generator.state = state["rng"]
        vars(self.scheme).update(copy.deepcopy(state["scheme"]))
        self._population = None

    @property
    def result(self) -> ESResult:
        """The best evaluated point and the current mean, with the counters (pycma's ``result``)."""
        return ESResult(
            xbest=None if self.best_x is None else self.best_x.copy(),
            fbest=float(self.best_f),
            evals_best=self.best_evaluation,
            evaluations=self.evaluations,
            iterations=self.generation,
            xfavorite=self.mean.copy(),
            stds=self.sigma * np.sqrt(self.diag),
        )


def _finite(evaluations: list[np.ndarray]) -> list[np.ndarray]:
    """+inf (a NaN or infinite evaluation) replaced by the worst finite value seen plus a margin, so ranks and the
    bootstrap's noise model stay finite; a generation with no finite value keeps equal worst values."""
    finite = np.concatenate(evaluations)
    finite = finite[np.isfinite(finite)]
    worst = finite.max() + 1 + abs(finite.max()) if finite.size else 0.0
    return [np.where(np.isfinite(e), e, worst) for e in evaluations]
