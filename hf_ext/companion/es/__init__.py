"""Evolution strategies for noisy objectives: sep-CMA-ES with PEM recombination weights.

Needs only numpy. How they are judged (the benchmark harness, the COCO bbob-noisy runner, misranking and the
statistics) is in :mod:`hf_ext.companion.evaluation.es`.
"""

from .config import ESConfig
from .minimizer import minimize
from .result import ESResult, MinimizeResult
from .sep_cma import SepCMAES, make_weight_scheme
from .weights import (
    LogWeights,
    ProbeAndSwitch,
    ResidualBootstrapPEM,
    UnbiasedPEM,
    WeightScheme,
    elite_flip_rate,
    expected_weights,
    log_weights,
)

__all__ = [
    "ESConfig",
    "ESResult",
    "LogWeights",
    "MinimizeResult",
    "ProbeAndSwitch",
    "ResidualBootstrapPEM",
    "SepCMAES",
    "UnbiasedPEM",
    "WeightScheme",
    "elite_flip_rate",
    "expected_weights",
    "log_weights",
    "make_weight_scheme",
    "minimize",
]
