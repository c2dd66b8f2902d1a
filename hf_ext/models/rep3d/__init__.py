"""Rep3D: large-kernel 3D segmentation whose kernel updates are re-weighted by a learned receptive-biased mask.

Importing it registers ``model_type="rep3d"`` with ``AutoConfig``, ``Rep3DModel`` with ``AutoModel`` and
``Rep3DForSegmentation`` with ``AutoModelForSemanticSegmentation``, as transformers' own models are.
"""

from transformers import AutoConfig, AutoModel, AutoModelForSemanticSegmentation

from .configuration import Rep3DConfig
from .conv import MASK_MODES, ModulationNet, Rep3DConv, distance_prior
from .loss import dice_ce_loss, dice_per_class
from .metrics import DiceMetrics, argmax_logits
from .modeling import Rep3DForSegmentation, Rep3DModel, Rep3DPreTrainedModel

AutoConfig.register(Rep3DConfig.model_type, Rep3DConfig)
AutoModel.register(Rep3DConfig, Rep3DModel)
AutoModelForSemanticSegmentation.register(Rep3DConfig, Rep3DForSegmentation)

__all__ = [
    "MASK_MODES",
    "DiceMetrics",
    "ModulationNet",
    "Rep3DConfig",
    "Rep3DConv",
    "Rep3DForSegmentation",
    "Rep3DModel",
    "Rep3DPreTrainedModel",
    "argmax_logits",
    "dice_ce_loss",
    "dice_per_class",
    "distance_prior",
]
