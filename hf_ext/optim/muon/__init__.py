"""Muon on the hidden matrices with AdamW on the rest: the outside baseline of the Scion and
symmetry-curvature recipes."""

from .muon_adamw import MuonWithAdamW
from .sharded import ShardedMuon

__all__ = ["MuonWithAdamW", "ShardedMuon"]
