"""How the set-cover solvers of :mod:`hf_ext.companion.combinatorial.set_cover` are judged: every compared method
by name under one wall-clock budget (ours, HiGHS alone, greedy, OR-Tools' set-cover module), and the anytime
metrics of their curves. OR-Tools is needed only for its baselines (the ``[combinatorial]`` extra)."""

from .harness import LNS_METHODS, METHODS, run_method
from .metrics import primal_gap, primal_integral, time_to_target
from .ortools_baseline import ORTOOLS_METHODS, ortools_model, run_ortools

__all__ = [
    "LNS_METHODS",
    "METHODS",
    "ORTOOLS_METHODS",
    "ortools_model",
    "primal_gap",
    "primal_integral",
    "run_method",
    "run_ortools",
    "time_to_target",
]
