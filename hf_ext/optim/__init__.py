"""Optimizers and optimizer wrappers: gradient smoothing across depth, SPS and NGN (step size from the loss),
Scion with its batch-size schedule, decentralized SGD (gossip over torch.distributed)."""

from .batch_schedule import BatchSchedule, Stage
from .batch_schedule_callback import BatchScheduleCallback, PackedStream, PackedStreamCollator
from .constants import Constants, CriticalBatch, critical_batch_size, measure_constants
from .decentralized import DecentralizedSGD, DecentralizedSGDFactory, find_decentralized
from .decentralized_metrics import DecentralizedMetricsCallback
from .decentralized_trainer import DecentralizedTrainer
from .gossip import GossipCommunicator
from .gradient_smoothing import (
    GradientSmoothing,
    GradientSmoothingFactory,
    distance_weights,
    find_blocks,
    smoothing_matrix,
)
from .inverse_root import inverse_root
from .loss_step import LossStepOptimizer
from .loss_trainer import LossToOptimizerMixin, LossToOptimizerTrainer
from .muon_adamw import MuonWithAdamW
from .newton_schulz import newton_schulz
from .ngn import NGN
from .scion import Scion, scion_param_groups
from .sensitivity import near_best_width, ratio_at_multiple
from .sps import SPS
from .symmetry_curvature import SymmetryCurvature, symmetry_param_groups
from .symmetry_groups import SymmetryGroup
from .topology import TOPOLOGIES, Topology, check_mixing_matrix, spectral_gap

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
    "PackedStream",
    "PackedStreamCollator",
    "Scion",
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
    "scion_param_groups",
    "smoothing_matrix",
    "spectral_gap",
    "symmetry_param_groups",
]
