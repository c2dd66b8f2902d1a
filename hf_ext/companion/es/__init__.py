"""Evolution strategies for noisy objectives: sep-CMA-ES with PEM recombination weights, on COCO's bbob-noisy.

The ES itself needs only numpy; the COCO runner needs the ``[es]`` extra (``coco-experiment``, ``cma`` for the
pycma baselines, and ``cocopp`` to post-process the result folders).
"""

from .coco import CocoConfig, algorithm_folders, read_index, run_coco, run_key
from .config import ESConfig
from .harness import METHODS, solve
from .minimizer import minimize
from .misranking import misranking_by_generation, pair_misranking
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
    "METHODS",
    "CocoConfig",
    "ESConfig",
    "ESResult",
    "LogWeights",
    "MinimizeResult",
    "ProbeAndSwitch",
    "ResidualBootstrapPEM",
    "SepCMAES",
    "UnbiasedPEM",
    "WeightScheme",
    "algorithm_folders",
    "elite_flip_rate",
    "expected_weights",
    "log_weights",
    "make_weight_scheme",
    "minimize",
    "misranking_by_generation",
    "pair_misranking",
    "read_index",
    "run_key",
    "run_coco",
    "solve",
]
