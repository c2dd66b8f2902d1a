"""Decentralized SGD: gossip averaging over a topology of torch.distributed processes, its Trainer and metrics."""

from .gossip import GossipCommunicator
from .metrics import DecentralizedMetricsCallback
from .optimizer import DecentralizedSGD, DecentralizedSGDFactory, find_decentralized
from .topology import TOPOLOGIES, Topology, check_mixing_matrix, spectral_gap
from .trainer import DecentralizedTrainer

__all__ = [
    "TOPOLOGIES",
    "DecentralizedMetricsCallback",
    "DecentralizedSGD",
    "DecentralizedSGDFactory",
    "DecentralizedTrainer",
    "GossipCommunicator",
    "Topology",
    "check_mixing_matrix",
    "find_decentralized",
    "spectral_gap",
]
