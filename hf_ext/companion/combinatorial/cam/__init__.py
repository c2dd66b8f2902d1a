"""CAM: unsupervised training of discrete diffusion solvers by combinatorial adjoint matching (MIS, max-cut).

Needs torch only; the exact references need the ``[combinatorial]`` extra (``highspy``, ``scipy``).
"""

from .adjoint import adjoint_targets, flip_benefit
from .baselines import (
    cut_value,
    exact_maxcut,
    exact_mis,
    greedy_maxcut,
    greedy_mis,
    iterated_local_search_mis,
    local_search_maxcut,
    local_search_mis,
    multistart_local_search,
)
from .config import METHODS, CAMConfig
from .diagnostics import chain_diagnostics, conflicting_edges
from .graphs import Graph, GraphBatch, barabasi_albert, batch_graphs, erdos_renyi, rb_graph
from .model import FlipGNN
from .problems import PROBLEMS, decode, energy, flip_delta, is_independent, objective
from .sampler import Trajectory, rollout, solve
from .train import initial_model, train, training_signal_variance

__all__ = [
    "METHODS",
    "PROBLEMS",
    "CAMConfig",
    "FlipGNN",
    "Graph",
    "GraphBatch",
    "Trajectory",
    "adjoint_targets",
    "barabasi_albert",
    "batch_graphs",
    "chain_diagnostics",
    "conflicting_edges",
    "cut_value",
    "decode",
    "energy",
    "erdos_renyi",
    "exact_maxcut",
    "exact_mis",
    "flip_benefit",
    "flip_delta",
    "greedy_maxcut",
    "greedy_mis",
    "initial_model",
    "is_independent",
    "iterated_local_search_mis",
    "local_search_maxcut",
    "local_search_mis",
    "multistart_local_search",
    "objective",
    "rb_graph",
    "rollout",
    "solve",
    "train",
    "training_signal_variance",
]
