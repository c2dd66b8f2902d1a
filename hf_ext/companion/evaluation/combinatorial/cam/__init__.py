"""How CAM's solvers of :mod:`hf_ext.companion.combinatorial.cam` are judged: the classical references (greedy,
the best of several local searches, iterated local search, exact ILPs by HiGHS) and KaMIS's ReduMIS, an outside MIS
solver run as a binary built from its repository."""

from .baselines import (
    cut_value,
    exact_maxcut,
    exact_mis,
    greedy_maxcut,
    greedy_mis,
    iterated_local_search_mis,
    multistart_local_search,
)
from .kamis import redumis_mis

__all__ = [
    "cut_value",
    "exact_maxcut",
    "exact_mis",
    "greedy_maxcut",
    "greedy_mis",
    "iterated_local_search_mis",
    "multistart_local_search",
    "redumis_mis",
]
