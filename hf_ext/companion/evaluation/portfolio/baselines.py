"""The baselines K-sparse TCO is judged against: buy-and-hold, constant rebalancing (the best one in hindsight)
and the naive sparse TCO that keeps the K largest weights of TCO's portfolio."""

import cvxpy as cp
import numpy as np

from hf_ext._validation import check_count, check_finite
from hf_ext.companion.portfolio import TCO
from hf_ext.companion.portfolio.sparse_tco import check_k, sparse_start

from .protocol import on_simplex


class BuyAndHold:
    """Buy the uniform portfolio once and never trade: the portfolio drifts with the prices, at no cost."""

    def start(self, assets: int) -> np.ndarray:
        return np.full(assets, 1.0 / assets)

    def rebalance(self, observed: np.ndarray, previous: np.ndarray, drifted: np.ndarray) -> np.ndarray:
        return drifted


class ConstantRebalanced:
    """Rebalance to the same ``portfolio`` every period (CRP), paying the cost of undoing each period's drift."""

    def __init__(self, portfolio: np.ndarray):
        owner = type(self).__name__
        weights = np.asarray(portfolio)
        if weights.dtype.kind not in "iuf":  # a string fails inside numpy, and booleans would read as 1 and 0
            raise TypeError(f"{owner}: `portfolio` must be an array of numbers, got {portfolio!r}")
        self.portfolio = weights.astype(np.float64)
        check_finite(owner, "portfolio", self.portfolio.tolist())
        if not on_simplex(self.portfolio):
            raise ValueError(
                f"{owner}: `portfolio` must be a 1-D array of weights >= 0 summing to 1, got {portfolio!r}"
            )

    def start(self, assets: int) -> np.ndarray:
        if len(self.portfolio) != assets:
            raise ValueError(
                f"{type(self).__name__}: `portfolio` holds {len(self.portfolio)} weights but the relatives have "
                f"{assets} assets"
            )
        return self.portfolio

    def rebalance(self, observed: np.ndarray, previous: np.ndarray, drifted: np.ndarray) -> np.ndarray:
        return self.portfolio


def best_constant_rebalanced(relatives: np.ndarray) -> np.ndarray:
    """The CRP of largest wealth on ``relatives`` before costs, in hindsight (a reference, not an online rule):
    ``argmax_simplex sum_t log <b, x_t>``, a concave program solved by cvxpy (Clarabel's exponential cones)."""
    relatives = np.asarray(relatives, dtype=np.float64)
    b = cp.Variable(relatives.shape[1], nonneg=True)
    cp.Problem(cp.Maximize(cp.sum(cp.log(relatives @ b))), [cp.sum(b) == 1]).solve(solver=cp.CLARABEL)
    return np.clip(b.value, 0.0, None) / np.clip(b.value, 0.0, None).sum()


class TopKTCO:
    """TCO, with each of its portfolios cut to its ``k`` largest weights and renormalised: the naive sparse TCO."""

    def __init__(self, tco: TCO, k: int):
        owner = type(self).__name__
        if not isinstance(tco, TCO):
            raise TypeError(
                f"{owner}: `tco` must be a TCO strategy (hf_ext.companion.portfolio.TCO), got {type(tco).__name__}"
            )
        check_count(owner, "k", k, 1)  # at most the number of assets, checked by start()
        self.tco, self.k = tco, k

    @property
    def cost(self) -> float:
        """TCO's cost rate, which :func:`~hf_ext.companion.evaluation.portfolio.backtest` charges."""
        return self.tco.cost

    def start(self, assets: int) -> np.ndarray:
        check_k(type(self).__name__, self.k, assets)
        return sparse_start(assets, self.k)

    def rebalance(self, observed: np.ndarray, previous: np.ndarray, drifted: np.ndarray) -> np.ndarray:
        dense = self.tco.rebalance(observed, previous, drifted)
        kept = np.zeros_like(dense)
        largest = np.argpartition(-dense, self.k - 1)[: self.k]
        kept[largest] = dense[largest]
        return kept / kept.sum()
