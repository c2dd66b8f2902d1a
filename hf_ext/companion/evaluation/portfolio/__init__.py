"""How the strategies of :mod:`hf_ext.companion.portfolio` are judged: an exact self-financing backtest, its
metrics, and the baselines (buy-and-hold, constant rebalancing, the best CRP in hindsight, top-K TCO).

The best CRP needs cvxpy (the ``[portfolio]`` extra).
"""

from .baselines import BuyAndHold, ConstantRebalanced, TopKTCO, best_constant_rebalanced
from .metrics import max_drawdown, summarize
from .protocol import Backtest, Strategy, backtest, cost_fraction

__all__ = [
    "Backtest",
    "BuyAndHold",
    "ConstantRebalanced",
    "Strategy",
    "TopKTCO",
    "backtest",
    "best_constant_rebalanced",
    "cost_fraction",
    "max_drawdown",
    "summarize",
]
