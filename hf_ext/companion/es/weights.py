"""Recombination weights for noisy rankings: hard log-rank weights, RB-PEM expected weights, probe-and-switch.

A scheme sees each candidate's evaluations (one or more) and returns one weight per candidate; it may first
ask for re-evaluations of a few candidates (``reevaluate``), which the ES spends before calling it.
"""

from typing import Protocol

import numpy as np


class WeightScheme(Protocol):
    def reevaluate(self, means: np.ndarray, base: np.ndarray) -> np.ndarray:
        """Indices of the candidates to evaluate once more before weighting (empty for none)."""

    def __call__(self, evaluations: list[np.ndarray], base: np.ndarray) -> np.ndarray:
        """One weight per candidate from its evaluations; ``base`` holds the hard weights by rank (best first)."""


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

    def __call__(self, evaluations: list[np.ndarray], base: np.ndarray) -> np.ndarray:
        return base[ranks(np.array([e.mean() for e in evaluations]))]


class ResidualBootstrapPEM:
    """RB-PEM: expected weights over bootstrap rankings, the noise estimated from capped re-evaluations.

    A replicate resamples a candidate's own evaluations where it has several, else draws
    ``f + z (s0 + s1 |f|)`` with ``z`` from the pool of standardised residuals; the noise model
    ``s0 + s1 |f|`` is refitted to the pool each generation. Re-evaluations go to the candidates ranked
    within ``band`` of the elite boundary, at most ``max_reevaluations`` per generation.
    """

    def __init__(self, replicates: int, band: int, max_reevaluations: int, pool_size: int, seed: int = 0):
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

    def bootstrap(self, evaluations: list[np.ndarray]) -> np.ndarray:
        """``replicates`` x ``lambda`` bootstrap values of the candidates' means."""
        means = np.array([e.mean() for e in evaluations])
        pool = self.standardized_pool()
        if pool.size == 0:
            return means[None, :].repeat(self.replicates, axis=0)
        z = self.rng.choice(pool, size=(self.replicates, len(means)))
        out = means + z * (self.scale[0] + self.scale[1] * np.abs(means))
        for i, values in enumerate(evaluations):
            if len(values) > 1:
                draws = self.rng.integers(len(values), size=(self.replicates, len(values)))
                out[:, i] = values[draws].mean(axis=1)
        return out

    def __call__(self, evaluations: list[np.ndarray], base: np.ndarray) -> np.ndarray:
        self._add_residuals(evaluations)
        if self.residuals.size >= 2:
            self._fit_noise()
        replicates = self.bootstrap(evaluations)
        means = np.array([e.mean() for e in evaluations])
        self.last_flip_rate = elite_flip_rate(replicates, means, int((base > 0).sum()))
        return expected_weights(replicates, base)


class ProbeAndSwitch:
    """RB-PEM while the measured elite-flip rate exceeds ``threshold``, else the plain ES's hard weights.

    On hard weights it re-evaluates (probes) only every ``probe_interval`` generations, so a low-noise run
    spends almost nothing on re-evaluation.
    """

    def __init__(self, pem: ResidualBootstrapPEM, threshold: float, probe_interval: int):
        self.pem, self.threshold, self.probe_interval = pem, threshold, probe_interval
        self.active = True
        self.generation = 0

    def reevaluate(self, means: np.ndarray, base: np.ndarray) -> np.ndarray:
        if self.active or self.generation % self.probe_interval == 0:
            return self.pem.reevaluate(means, base)
        return np.empty(0, dtype=int)

    def __call__(self, evaluations: list[np.ndarray], base: np.ndarray) -> np.ndarray:
        self.generation += 1
        probed = any(len(e) > 1 for e in evaluations)
        weights = self.pem(evaluations, base)
        if probed:
            self.active = self.pem.last_flip_rate > self.threshold
        return weights if self.active else LogWeights()(evaluations, base)
