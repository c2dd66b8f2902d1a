"""Weighted set cover at scale: instances (OR-Library readers, generators), greedy, HiGHS MIP, LNS (random, local and
GLNS's generative policy).

Needs the ``[combinatorial]`` extra: ``scipy`` (sparse instances) to load, ``highspy`` for the MIPs (imported on
first use). How the solvers are judged (the benchmark harness, OR-Tools' baselines, the anytime metrics) is in
:mod:`hf_ext.companion.evaluation.combinatorial.set_cover`.
"""

from .adaptive import AdaptiveNeighbourhood
from .checkpoint import default_denoiser, load_denoiser, save_denoiser
from .diffusion import ColumnDenoiser, GenerativeNeighbourhood, trajectory
from .greedy import greedy, remove_redundant
from .instability import instability
from .instance import COST_REGIMES, SetCoverInstance, beasley, cost_regime_instance, rail_like, read_orlib, read_rail
from .lns import POLICIES, LNSConfig, LNSResult, Repair, repair, run_lns
from .mip import MipResult, solve_mip
from .neighbourhood import (
    grow_in_region,
    grow_neighbourhood,
    local_neighbourhood,
    near_incumbent,
    random_neighbourhood,
)
from .training import DenoiserTrainingConfig, train_denoiser

__all__ = [
    "COST_REGIMES",
    "AdaptiveNeighbourhood",
    "POLICIES",
    "ColumnDenoiser",
    "DenoiserTrainingConfig",
    "GenerativeNeighbourhood",
    "LNSConfig",
    "LNSResult",
    "MipResult",
    "Repair",
    "SetCoverInstance",
    "beasley",
    "cost_regime_instance",
    "default_denoiser",
    "greedy",
    "grow_in_region",
    "grow_neighbourhood",
    "instability",
    "load_denoiser",
    "local_neighbourhood",
    "near_incumbent",
    "random_neighbourhood",
    "rail_like",
    "read_orlib",
    "read_rail",
    "remove_redundant",
    "repair",
    "run_lns",
    "save_denoiser",
    "solve_mip",
    "train_denoiser",
    "trajectory",
]
