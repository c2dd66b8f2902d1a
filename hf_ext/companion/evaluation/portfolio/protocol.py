"""The online protocol: hold a portfolio through a period, let it drift, rebalance paying proportional costs.

Exact self-financing accounting: rebalancing from the drifted weights ``b~`` (wealth ``W``) to the target ``b``
pays ``c`` on every unit bought or sold, out of the portfolio itself, so the cost fraction ``mu`` of ``W`` solves

    mu = c * sum_i |b_i (1 - mu) - b~_i|,

whose right side is a contraction in ``mu`` with factor ``c < 1``: the fixed-point iteration converges to the
unique root (we stop at 1e-15, a few iterations for costs under 1%). ``mu = c ||b - b~||_1`` is the usual
first-order approximation (universal-portfolios charges it additively on the period's return). The first
portfolio is bought without cost, as in universal-portfolios and the TCO papers.
"""

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from hf_ext.companion.portfolio.tco import check_cost

SIMPLEX_TOLERANCE = 1e-6


class Strategy(Protocol):
    """An online portfolio rule: ``start`` gives the first portfolio, ``rebalance`` each next one.

    A rule that trades a predicted gain off against the transaction cost (TCO, K-sparse TCO) also has a
    ``cost`` attribute, the rate it optimises for; :func:`backtest` then charges that rate.
    """

    def start(self, assets: int) -> np.ndarray: ...

    def rebalance(self, observed: np.ndarray, previous: np.ndarray, drifted: np.ndarray) -> np.ndarray:
        """The next portfolio, knowing the relatives ``observed`` so far (periods x assets), the portfolio held in
        the last period (``previous``) and what it drifted into (``drifted``)."""
        ...


@dataclass
class Backtest:
    """One run: ``weights[t]`` held in period ``t``, ``costs[t]`` the fraction of wealth paid to rebalance into it,
    ``turnover[t] = ||weights[t] - drifted weights of t - 1||_1``, ``returns[t]`` the net gross return of period
    ``t`` and ``wealth[t]`` the wealth after it (starting from 1)."""

    weights: np.ndarray
    costs: np.ndarray
    turnover: np.ndarray
    returns: np.ndarray
    wealth: np.ndarray


def cost_fraction(target: np.ndarray, drifted: np.ndarray, cost: float) -> float:
    """The exact fraction of wealth paid to rebalance from ``drifted`` into ``target`` at proportional rate ``cost``."""
    mu = cost * np.abs(target - drifted).sum()
    for _ in range(100):
        updated = cost * np.abs(target * (1 - mu) - drifted).sum()
        if abs(updated - mu) <= 1e-15:
            return float(updated)
        mu = updated
    return float(mu)


def on_simplex(portfolio: np.ndarray) -> bool:
    """Whether the float array ``portfolio`` is one portfolio: 1-D, not empty, finite weights >= 0 summing to 1
    (within :data:`SIMPLEX_TOLERANCE`)."""
    return (
        portfolio.ndim == 1
        and portfolio.size > 0
        and bool(np.all(np.isfinite(portfolio)))
        and portfolio.min() >= -SIMPLEX_TOLERANCE
        and abs(portfolio.sum() - 1) <= SIMPLEX_TOLERANCE
    )


def check_portfolio(owner: str, portfolio: np.ndarray, assets: int, t: int) -> np.ndarray:
    """``portfolio`` as float64 if it lies on the simplex of ``assets`` weights (within 1e-6), else ``ValueError``."""
    portfolio = np.asarray(portfolio, dtype=np.float64)
    if portfolio.shape != (assets,) or not on_simplex(portfolio):
        raise ValueError(f"{owner} returned a portfolio off the simplex of {assets} assets for period {t}: {portfolio}")
    return np.clip(portfolio, 0.0, None) / np.clip(portfolio, 0.0, None).sum()


def charged_cost(strategy: Strategy, cost: float | None) -> float:
    """The rate a backtest of ``strategy`` charges: the strategy's own ``cost`` if it has one, else ``cost``.

    A strategy that optimises for one rate and is charged another would be judged on a run it did not plan, so
    an explicit ``cost`` that differs from the strategy's is refused, as is no rate at all.
    """
    owner = type(strategy).__name__
    if cost is not None:
        check_cost("backtest", cost)
    own = getattr(strategy, "cost", None)
    if own is None:
        if cost is None:
            raise ValueError(f"backtest: {owner} has no cost rate of its own; pass `cost` (0.0025 = 0.25%)")
        return cost
    if cost is not None and cost != own:
        raise ValueError(
            f"backtest: `cost` is {cost} but {owner} trades for its own cost rate {own}; leave `cost` out "
            "(the strategy's rate is charged) or build the strategy for that rate"
        )
    return own


def backtest(strategy: Strategy, relatives: np.ndarray, cost: float | None = None) -> Backtest:
    """Run ``strategy`` online on ``relatives`` (periods x assets, all > 0) at proportional cost rate ``cost``,
    by default the strategy's own (:func:`charged_cost`)."""
    cost = charged_cost(strategy, cost)
    relatives = np.asarray(relatives, dtype=np.float64)
    if relatives.ndim != 2 or not np.all(np.isfinite(relatives)) or not np.all(relatives > 0):
        raise ValueError("backtest: `relatives` must be a (periods, assets) array of finite values > 0")
    if relatives.shape[0] < 1 or relatives.shape[1] < 1:
        raise ValueError(
            f"backtest: `relatives` must hold at least one period and one asset, got shape {relatives.shape}"
        )
    periods, assets = relatives.shape
    owner = type(strategy).__name__
    weights = np.empty_like(relatives)
    costs, turnover, returns = np.zeros(periods), np.zeros(periods), np.empty(periods)
    target = drifted = check_portfolio(owner, strategy.start(assets), assets, 0)
    for t in range(periods):
        if t > 0:
            target = check_portfolio(owner, strategy.rebalance(relatives[:t], weights[t - 1], drifted), assets, t)
            turnover[t] = np.abs(target - drifted).sum()
            costs[t] = cost_fraction(target, drifted, cost)
        weights[t] = target
        growth = target @ relatives[t]
        returns[t] = (1 - costs[t]) * growth
        drifted = target * relatives[t] / growth
    return Backtest(weights, costs, turnover, returns, np.cumprod(returns))
