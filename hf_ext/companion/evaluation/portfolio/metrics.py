"""What a backtest is judged by: wealth, annualised return and volatility, Sharpe, drawdown, turnover, sparsity."""

import numpy as np

from .protocol import Backtest

PERIODS_PER_YEAR = 252  # the six data sets are daily closing prices
NONZERO = 1e-9  # a weight above this counts as held


def max_drawdown(wealth: np.ndarray) -> float:
    """The largest fall from a running peak of ``wealth`` (starting from 1), as a fraction of that peak."""
    peaks = np.maximum.accumulate(np.concatenate([[1.0], wealth]))
    return float(np.max(1 - np.concatenate([[1.0], wealth]) / peaks))


def holdings(weights: np.ndarray) -> np.ndarray:
    """The number of assets held in each period."""
    return (weights > NONZERO).sum(axis=1)


def summarize(run: Backtest, periods_per_year: int = PERIODS_PER_YEAR) -> dict[str, float]:
    """The metrics of one backtest; returns are net of costs, Sharpe uses a zero risk-free rate."""
    periods = len(run.returns)
    simple = run.returns - 1
    volatility = float(simple.std(ddof=1) * np.sqrt(periods_per_year)) if periods > 1 else 0.0
    annual_return = float(run.wealth[-1] ** (periods_per_year / periods) - 1)
    counts = holdings(run.weights)
    return {
        "final_wealth": float(run.wealth[-1]),
        "annual_return": annual_return,
        "annual_volatility": volatility,
        "sharpe": float(simple.mean() * periods_per_year / volatility) if volatility > 0 else 0.0,
        "max_drawdown": max_drawdown(run.wealth),
        "mean_turnover": float(run.turnover[1:].mean()) if periods > 1 else 0.0,
        "total_costs": float(run.costs.sum()),
        "mean_holdings": float(counts.mean()),
        "max_holdings": int(counts.max()),
    }
