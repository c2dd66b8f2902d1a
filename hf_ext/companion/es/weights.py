"""Recombination weights for noisy rankings: hard log-rank weights, PEM expected weights (RB-PEM's residual
bootstrap, or the unbiased average over re-evaluations), probe-and-switch.

A scheme sees each candidate's evaluations (one or more) and returns one weight per candidate; it may first
ask for re-evaluations of a few candidates (``reevaluate``), which the ES spends before calling it.
"""

import itertools
from typing import Protocol

import numpy as np

from hf_ext._validation import check_count, check_number


class WeightScheme(Protocol):
    def reevaluate(self, means: np.ndarray, base: np.ndarray) -> np.ndarray:
        """Indices of the candidates to evaluate once more before weighting (empty for none)."""

    def __call__(self, evaluations: list[np.ndarray], base: np.ndarray, population: np.ndarray) -> np.ndarray:
        """One weight per candidate from its evaluations; ``base`` holds the hard weights by rank (best first) and
        ``population`` the candidates (one row each)."""


def log_weights(popsize: int) -> np.ndarray:
    """CMA-ES's positive weights ``ln((lambda + 1) / 2) - ln i`` on the best mu = lambda // 2 ranks, summing to 1."""
    mu = popsize // 2
    raw = np.log((popsize + 1) / 2) - np.log(np.arange(1, mu + 1))
    return np.concatenate([raw / raw.sum(), np.zeros(popsize - mu)])


def ranks(values: np.ndarray) -> np.ndarray:
    """0-based rank of each entry along the last axis (0 = smallest, ties by position)."""
    return np.argsort(np.argsort(values, axis=-1, kind="stable"), axis=-1, kind="stable")


def expected_weights(replicates: np.ndarray, base: np.ndarray) -> np.ndarray:
    """PEM's ``w_bar_i = mean_b base[rank_i^(b)]`` over the rows (bootstrap replicates) of ``replicates``."""
    return base[ranks(replicates)].mean(axis=0)


def elite_flip_rate(replicates: np.ndarray, observed: np.ndarray, mu: int) -> float:
    """The rank-disagreement statistic: how often a candidate's elite membership differs between a replicate
    ranking and the observed one, as a fraction of the 2 mu memberships that can change (0 = no misranking)."""
    flips = (ranks(replicates) < mu) != (ranks(observed) < mu)
    return float(flips.sum(axis=-1).mean() / (2 * mu))


class LogWeights:
    """The plain ES: hard log-rank weights on the candidates' mean values, no re-evaluation."""

    def reevaluate(self, means: np.ndarray, base: np.ndarray) -> np.ndarray:
        return np.empty(0, dtype=int)

    def __call__(
        self, evaluations: list[np.ndarray], base: np.ndarray, population: np.ndarray | None = None
    ) -> np.ndarray:
        return base[ranks(np.array([e.mean() for e in evaluations]))]


class ResidualBootstrapPEM:
    """RB-PEM: expected weights over replicate rankings drawn given the population's linear fit.

    Why not replicates centred on the observed values (``f + noise``): those add the noise a second time, so
    their rankings are noisier than the observed one and the expected weights flatter than the hard weights'
    expectation (the mean update shrank by up to half its norm). Here the candidates' mean values are split,
    in noise-whitened units, into their least-squares fit on ``[1, x]`` and the residual; a replicate keeps
    the fit and the estimated lack of fit (a positive-part James-Stein shrinkage of the residual) and draws the
    rest of the residual afresh from the residual pool, projected onto the residual space, so that its noise
    has the covariance of the observed values' noise (:func:`conditional_replicates`). The noise level comes
    from capped re-evaluations at the elite boundary: their standardised deviations form the pool, and the
    model ``s0 + s1 |f|`` is refitted to it each generation.
    """

    def __init__(self, replicates: int, band: int, max_reevaluations: int, pool_size: int, seed: int = 0):
        for name, value, least in (
            ("replicates", replicates, 1),
            ("band", band, 0),
            ("max_reevaluations", max_reevaluations, 0),
            ("pool_size", pool_size, 2),
            ("seed", seed, 0),
        ):  # ESConfig's bounds: the scheme can also be built by hand
            check_count("ResidualBootstrapPEM", name, value, least)
        self.replicates, self.band, self.cap = replicates, band, max_reevaluations
        self.pool_size = pool_size
        self.rng = np.random.default_rng(seed)
        self.levels = np.empty(0)  # |mean f| of the candidate each residual came from
        self.residuals = np.empty(0)  # deviation from that mean, scaled to unit-variance estimates
        self.scale = (0.0, 0.0)  # (s0, s1)
        self.last_flip_rate = 0.0

    def reevaluate(self, means: np.ndarray, base: np.ndarray) -> np.ndarray:
        mu = int((base > 0).sum())
        rank = ranks(means)
        distance = np.where(rank < mu, mu - 1 - rank, rank - mu)  # 0 for the two candidates at the boundary
        near = np.flatnonzero(distance < self.band)
        return near[np.argsort(distance[near], kind="stable")][: self.cap]

    def _add_residuals(self, evaluations: list[np.ndarray]) -> None:
        for values in evaluations:
            if len(values) > 1:
                correction = np.sqrt(len(values) / (len(values) - 1))
                self.residuals = np.append(self.residuals, (values - values.mean()) * correction)[-self.pool_size :]
                self.levels = np.append(self.levels, np.full(len(values), abs(values.mean())))[-self.pool_size :]

    def _fit_noise(self) -> None:
        """Least squares of E|r| = sqrt(2/pi) (s0 + s1 |f|) with s0, s1 >= 0 (one of them dropped if negative)."""
        target = np.abs(self.residuals) * np.sqrt(np.pi / 2)
        design = np.stack([np.ones_like(self.levels), self.levels], axis=1)
        s0, s1 = np.linalg.lstsq(design, target, rcond=None)[0]
        if s0 < 0 or s1 < 0:
            only_s1 = (self.levels @ target) / max(self.levels @ self.levels, 1e-300)
            s0, s1 = (0.0, only_s1) if s0 < 0 else (target.mean(), 0.0)
        self.scale = (float(s0), float(s1))

    def standardized_pool(self) -> np.ndarray:
        spread = self.scale[0] + self.scale[1] * self.levels
        return np.divide(self.residuals, spread, out=np.zeros_like(self.residuals), where=spread > 0)

    def bootstrap(self, evaluations: list[np.ndarray], population: np.ndarray) -> np.ndarray:
        """``replicates`` x ``lambda`` replicate values of the candidates' means (the means themselves, repeated,
        before any noise is measured or when ``[1, x]`` leaves no residual degree of freedom)."""
        means = np.array([e.mean() for e in evaluations])
        counts = np.array([len(e) for e in evaluations])
        pool = self.standardized_pool()
        design = np.column_stack([np.ones(len(means)), population - population.mean(axis=0)])
        if not np.any(pool) or len(means) <= design.shape[1]:
            return means[None, :].repeat(self.replicates, axis=0)
        s0, s1 = self.scale
        fitted = design @ np.linalg.lstsq(design * np.sqrt(counts)[:, None], means * np.sqrt(counts), rcond=None)[0]
        scales = (s0 + s1 * np.abs(fitted)) / np.sqrt(counts)  # the noise of each mean, from its fitted level
        scales = np.maximum(scales, 1e-12 * scales.max())
        return conditional_replicates(means, scales, design, pool, self.replicates, self.rng)

    def __call__(self, evaluations: list[np.ndarray], base: np.ndarray, population: np.ndarray) -> np.ndarray:
        self._add_residuals(evaluations)
        if self.residuals.size >= 2:
            self._fit_noise()
        replicates = self.bootstrap(evaluations, population)
        means = np.array([e.mean() for e in evaluations])
        self.last_flip_rate = elite_flip_rate(replicates, means, int((base > 0).sum()))
        return expected_weights(replicates, base)


class UnbiasedPEM:
    """PEM that keeps the plain ES's expected mean update on any noise law: the hard weights averaged over every
    choice of one evaluation per candidate, with ``max_reevaluations`` candidates drawn at random evaluated twice.

    Why: RB-PEM's replicates come from a model of f and of the noise (a plane, ``s0 + s1 |f|``), and where
    bbob-noisy's noise does not fit it the mean update turns (docs/results/pem.md, *Where the claim stands*). Here a
    candidate's evaluations are exchangeable draws of its noisy value, so each choice of one evaluation per candidate
    is distributed as the plain ES's single evaluations, and the average has the plain ES's expected weights. With
    nothing assumed about the noise, the unordered evaluations are a complete sufficient statistic, so this average is
    also the least dispersed unbiased estimate they allow. The candidates are drawn at random, not at the elite
    boundary: one picked for its first value is not exchangeable with its second, and the average is then biased.
    """

    def __init__(self, max_reevaluations: int, seed: int = 0):
        check_count("UnbiasedPEM", "max_reevaluations", max_reevaluations, 0)
        check_count("UnbiasedPEM", "seed", seed, 0)
        self.cap = max_reevaluations
        self.rng = np.random.default_rng(seed)

    def reevaluate(self, means: np.ndarray, base: np.ndarray) -> np.ndarray:
        return np.sort(self.rng.choice(len(means), size=min(self.cap, len(means)), replace=False))

    def __call__(
        self, evaluations: list[np.ndarray], base: np.ndarray, population: np.ndarray | None = None
    ) -> np.ndarray:
        choices = np.array(list(itertools.product(*evaluations)))  # one row per choice: 2^(re-evaluated) rows
        return base[ranks(choices)].mean(axis=0)


def conditional_replicates(
    means: np.ndarray, scales: np.ndarray, design: np.ndarray, pool: np.ndarray, count: int, rng: np.random.Generator
) -> np.ndarray:
    """``count`` replicates of ``means`` (noise standard deviations ``scales``, shaped like ``pool``) that keep
    their whitened least-squares fit on ``design`` and redraw the noise in the residual.

    In whitened units ``t = means / scales``, with ``H`` the projection onto the whitened design and
    ``r = (I - H) t``, a replicate is ``H t + a r + sqrt(1 - a^2) (I - H) z``, ``z`` drawn from ``pool`` scaled
    to unit variance: its noise has the covariance ``H + a^2 (I - H) + (1 - a^2) (I - H) = I`` of the observed
    values'. ``a^2 = max(0, 1 - (n - p) / |r|^2)`` is the share of the residual's energy estimated to be lack of
    fit rather than noise, so ``a r`` keeps the spread of the lack of fit (Louis's constrained Bayes; the
    James-Stein factor ``a^2`` itself would shrink it, and ranks depend on the spread). With ``a = 0`` (a linear
    f and Gaussian noise) the expected weights are ``E[w(rank) | H t]``, the Rao-Blackwell estimate, which keeps
    the mean of the hard weights exactly; the lack of fit that ``a < 1`` loses is orthogonal to the design, which
    a mean update that is linear in the values (high misranking) does not see; at low noise ``a -> 1`` keeps the
    observed ranking.
    """
    unit = pool / np.sqrt(np.mean(pool**2))
    u, singular, _ = np.linalg.svd(design / scales[:, None], full_matrices=False)
    basis = u[:, singular > singular[0] * 1e-10]
    target = means / scales
    fitted = basis @ (basis.T @ target)
    residual = target - fitted
    freedom = len(means) - basis.shape[1]
    keep = np.sqrt(max(0.0, 1 - freedom / max(residual @ residual, 1e-300)))
    draws = rng.choice(unit, size=(count, len(means)))
    fresh = draws - (draws @ basis) @ basis.T
    return scales * (fitted + keep * residual + np.sqrt(1 - keep**2) * fresh)


class ProbeAndSwitch:
    """RB-PEM while the measured elite-flip rate exceeds ``threshold``, else the plain ES's hard weights.

    On hard weights it re-evaluates (probes) only every ``probe_interval`` generations, so a low-noise run
    spends almost nothing on re-evaluation.
    """

    def __init__(self, pem: ResidualBootstrapPEM, threshold: float, probe_interval: int):
        if not isinstance(pem, ResidualBootstrapPEM):
            raise TypeError(f"ProbeAndSwitch: `pem` must be a ResidualBootstrapPEM, got {type(pem).__name__}")
        check_number("ProbeAndSwitch", "threshold", threshold)
        if not 0 <= threshold <= 1:
            raise ValueError(f"ProbeAndSwitch: `threshold` must be an elite-flip rate in [0, 1], got {threshold}")
        check_count("ProbeAndSwitch", "probe_interval", probe_interval, 1)
        self.pem, self.threshold, self.probe_interval = pem, threshold, probe_interval
        self.active = True
        self.generation = 0

    def reevaluate(self, means: np.ndarray, base: np.ndarray) -> np.ndarray:
        if self.active or self.generation % self.probe_interval == 0:
            return self.pem.reevaluate(means, base)
        return np.empty(0, dtype=int)

    def __call__(self, evaluations: list[np.ndarray], base: np.ndarray, population: np.ndarray) -> np.ndarray:
        self.generation += 1
        probed = any(len(e) > 1 for e in evaluations)
        weights = self.pem(evaluations, base, population)
        if probed:
            self.active = self.pem.last_flip_rate > self.threshold
        return weights if self.active else LogWeights()(evaluations, base)
