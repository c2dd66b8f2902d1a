"""K-sparse online portfolio selection with transaction costs: the DC reformulation solved by PSGA + ADMM,
TCO1/TCO2 and the baselines, an exact self-financing backtest, and the six market data sets of
universal-portfolios.

Needs the ``[portfolio]`` extra (``pip install hf-ext[portfolio]``).
"""

from .baselines import BuyAndHold, ConstantRebalanced, TopKTCO, best_constant_rebalanced
from .data import DATASETS, dataset_path, load_relatives, price_relatives, synthetic_relatives
from .metrics import max_drawdown, summarize
from .protocol import Backtest, Strategy, backtest, cost_fraction
from .simplex import dc_penalty, project_k_sparse, project_simplex, top_k_sum
from .sparse_tco import SparseTCO, SparseTCOConfig, prox_cost_simplex
from .tco import TCO, TCOConfig

__all__ = [
    "DATASETS",
    "Backtest",
    "BuyAndHold",
    "ConstantRebalanced",
    "SparseTCO",
    "SparseTCOConfig",
    "Strategy",
    "TCO",
    "TCOConfig",
    "TopKTCO",
    "backtest",
    "best_constant_rebalanced",
    "cost_fraction",
    "dataset_path",
    "dc_penalty",
    "load_relatives",
    "max_drawdown",
    "price_relatives",
    "project_k_sparse",
    "project_simplex",
    "prox_cost_simplex",
    "summarize",
    "synthetic_relatives",
    "top_k_sum",
]
