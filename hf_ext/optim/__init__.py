"""Optimizers and optimizer wrappers: gradient smoothing across depth, SPS and NGN (step size from the loss),
decentralized SGD (gossip over torch.distributed)."""

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
from .loss_step import LossStepOptimizer
from .loss_trainer import LossToOptimizerMixin, LossToOptimizerTrainer
from .ngn import NGN
from .sensitivity import near_best_width, ratio_at_multiple
from .sps import SPS
from .topology import TOPOLOGIES, Topology, check_mixing_matrix, spectral_gap

__all__ = [
    "NGN",
    "SPS",
    "TOPOLOGIES",
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
    "Topology",
    "check_mixing_matrix",
    "distance_weights",
    "find_blocks",
    "find_decentralized",
    "near_best_width",
    "ratio_at_multiple",
    "smoothing_matrix",
    "spectral_gap",
]
