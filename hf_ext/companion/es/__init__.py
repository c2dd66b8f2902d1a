"""Evolution strategies for noisy objectives: sep-CMA-ES with PEM recombination weights, on COCO's bbob-noisy.

The ES itself needs only numpy; the COCO runner needs the ``[es]`` extra (``coco-experiment``, and ``cma`` for
the pycma baselines).
"""

from .coco import CocoConfig, read_index, run_coco
from .config import ESConfig
from .restarts import minimize
from .sep_cma import SepCMAES, make_weight_scheme
from .solvers import METHODS, solve
from .weights import (
    LogWeights,
    ProbeAndSwitch,
    ResidualBootstrapPEM,
    WeightScheme,
    elite_flip_rate,
    expected_weights,
    log_weights,
)

__all__ = [
    "METHODS",
    "CocoConfig",
    "ESConfig",
    "LogWeights",
    "ProbeAndSwitch",
    "ResidualBootstrapPEM",
    "SepCMAES",
    "WeightScheme",
    "elite_flip_rate",
    "expected_weights",
    "log_weights",
    "make_weight_scheme",
    "minimize",
    "read_index",
    "run_coco",
    "solve",
]
