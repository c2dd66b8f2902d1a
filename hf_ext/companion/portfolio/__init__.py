"""K-sparse online portfolio selection with transaction costs: the DC reformulation solved by PSGA + ADMM, TCO1/TCO2,
and the six market data sets of universal-portfolios.

Needs the ``[portfolio]`` extra (``pip install hf-ext[portfolio]``). How the strategies are judged (the exact
self-financing backtest, its metrics and the baselines) is in :mod:`hf_ext.companion.evaluation.portfolio`.
"""

from .data import DATASETS, dataset_path, load_relatives, price_relatives, synthetic_relatives
from .simplex import dc_penalty, project_k_sparse, project_simplex, top_k_sum
from .sparse_tco import SparseTCO, SparseTCOConfig, prox_cost_simplex
from .tco import TCO, TCOConfig

__all__ = [
    "DATASETS",
    "SparseTCO",
    "SparseTCOConfig",
    "TCO",
    "TCOConfig",
    "dataset_path",
    "dc_penalty",
    "load_relatives",
    "price_relatives",
    "project_k_sparse",
    "project_simplex",
    "prox_cost_simplex",
    "synthetic_relatives",
    "top_k_sum",
]
