"""Optimizers and optimizer wrappers: gradient smoothing across depth."""

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
from .topology import TOPOLOGIES, Topology, check_mixing_matrix, spectral_gap

__all__ = [
    "DecentralizedMetricsCallback",
    "DecentralizedSGD",
    "DecentralizedSGDFactory",
    "DecentralizedTrainer",
    "GossipCommunicator",
    "GradientSmoothing",
    "GradientSmoothingFactory",
    "TOPOLOGIES",
    "Topology",
    "check_mixing_matrix",
    "distance_weights",
    "find_blocks",
    "find_decentralized",
    "smoothing_matrix",
    "spectral_gap",
]
