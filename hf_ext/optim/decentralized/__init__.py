"""Decentralized SGD: gossip averaging over a topology of torch.distributed processes, its Trainer, metrics and a
plain training loop with its all-reduce baseline."""

from .gossip import GossipCommunicator
from .loop import WorkerProblem, ring_allreduce_bytes, train_decentralized
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
    "WorkerProblem",
    "check_mixing_matrix",
    "find_decentralized",
    "ring_allreduce_bytes",
    "spectral_gap",
    "train_decentralized",
]
