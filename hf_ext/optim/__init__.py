"""Optimizers and optimizer wrappers, one sub-package per method: ``loss_step`` (SPS, NGN), ``scion`` (Scion and its
batch-size schedule), ``symmetry_curvature``, ``decentralized`` (gossip SGD), ``gradient_smoothing``, ``muon``
(Muon with AdamW, a baseline); ``shared`` holds the numerics they share. Every public name is re-exported here."""

from .decentralized import (
    TOPOLOGIES,
    DecentralizedMetricsCallback,
    DecentralizedSGD,
    DecentralizedSGDFactory,
    DecentralizedTrainer,
    GossipCommunicator,
    Topology,
    check_mixing_matrix,
    find_decentralized,
    spectral_gap,
)
from .gradient_smoothing import (
    GradientSmoothing,
    GradientSmoothingFactory,
    distance_weights,
    find_blocks,
    smoothing_matrix,
)
from .loss_step import (
    NGN,
    SPS,
    LossStepOptimizer,
    LossToOptimizerMixin,
    LossToOptimizerTrainer,
    near_best_width,
    ratio_at_multiple,
    reference_optimum,
)
from .muon import MuonWithAdamW, ShardedMuon
from .scion import (
    BatchSchedule,
    BatchScheduleCallback,
    Constants,
    CriticalBatch,
    Scion,
    Stage,
    critical_batch_size,
    measure_constants,
    scion_param_groups,
)
from .shared import OptimizerWrapper, inverse_root, newton_schulz
from .symmetry_curvature import SymmetryCurvature, SymmetryGroup, symmetry_param_groups

__all__ = [
    "NGN",
    "SPS",
    "TOPOLOGIES",
    "BatchSchedule",
    "BatchScheduleCallback",
    "Constants",
    "CriticalBatch",
    "DecentralizedMetricsCallback",
    "DecentralizedSGD",
    "DecentralizedSGDFactory",
    "DecentralizedTrainer",
    "GossipCommunicator",
    "GradientSmoothing",
    "GradientSmoothingFactory",
    "LossStepOptimizer",
    "LossToOptimizerMixin",
    "LossToOptimizerTrainer",
    "MuonWithAdamW",
    "OptimizerWrapper",
    "Scion",
    "ShardedMuon",
    "Stage",
    "SymmetryCurvature",
    "SymmetryGroup",
    "Topology",
    "check_mixing_matrix",
    "critical_batch_size",
    "distance_weights",
    "find_blocks",
    "find_decentralized",
    "inverse_root",
    "measure_constants",
    "near_best_width",
    "newton_schulz",
    "ratio_at_multiple",
    "reference_optimum",
    "scion_param_groups",
    "smoothing_matrix",
    "spectral_gap",
    "symmetry_param_groups",
]
