"""How CAM's solvers of :mod:`hf_ext.companion.combinatorial.cam` are judged beyond the classical references:
KaMIS's ReduMIS, an outside MIS solver run as a binary built from its repository."""

from .kamis import redumis_mis

__all__ = ["redumis_mis"]
