"""Muon on the hidden matrices with AdamW on the rest: the outside baseline of the Scion and
symmetry-curvature recipes."""

from .muon_adamw import MuonWithAdamW

__all__ = ["MuonWithAdamW"]
