"""CAM: unsupervised training of discrete diffusion solvers by combinatorial adjoint matching (MIS, max-cut).

Needs torch only. The classical references it is judged against (greedy, multistart and iterated local search,
exact ILPs by HiGHS, which need the ``[combinatorial]`` extra) are in
:mod:`hf_ext.companion.evaluation.combinatorial.cam`.
"""

from .adjoint import adjoint_targets, flip_benefit
from .config import METHODS, CAMConfig
from .diagnostics import chain_diagnostics, conflicting_edges
from .graphs import Graph, GraphBatch, barabasi_albert, batch_graphs, erdos_renyi, rb_graph
from .local_search import local_search_maxcut, local_search_mis
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
    "decode",
    "energy",
    "erdos_renyi",
    "flip_benefit",
    "flip_delta",
    "initial_model",
    "is_independent",
    "local_search_maxcut",
    "local_search_mis",
    "objective",
    "rb_graph",
    "rollout",
    "solve",
    "train",
    "training_signal_variance",
]
