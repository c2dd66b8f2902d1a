"""Rep3D: large-kernel 3D segmentation whose kernel updates are re-weighted by a learned receptive-biased mask."""

from .configuration import Rep3DConfig
from .conv import MASK_MODES, ModulationNet, Rep3DConv, distance_prior
from .loss import dice_ce_loss, dice_per_class
from .metrics import DiceMetrics, argmax_logits
from .modeling import Rep3DForSegmentation, Rep3DPreTrainedModel

__all__ = [
    "MASK_MODES",
    "DiceMetrics",
    "ModulationNet",
    "Rep3DConfig",
    "Rep3DConv",
    "Rep3DForSegmentation",
    "Rep3DPreTrainedModel",
    "argmax_logits",
    "dice_ce_loss",
    "dice_per_class",
    "distance_prior",
]
