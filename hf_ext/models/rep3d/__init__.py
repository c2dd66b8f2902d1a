"""Rep3D: large-kernel 3D segmentation whose kernel updates are re-weighted by a learned receptive-biased mask."""

from .conv import MASK_MODES, ModulationNet, Rep3DConv, distance_prior

__all__ = ["MASK_MODES", "ModulationNet", "Rep3DConv", "distance_prior"]
