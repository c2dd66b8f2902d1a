"""Progressive 1-bit binarization of a pretrained LLM: layers, schedule, distillation, packed export."""

from .binary_linear import (
    MixedBinaryWeight,
    ProgressiveBinaryLinear,
    ProgressiveBinaryWeight,
    binary_weight,
    mean_abs_scales,
    rank_one_scales,
    relative_binary_error,
)
from .convert import binarize_model, binary_layers, set_binarization_mix
from .distill import LogitDistillationConfig, LogitDistillationTrainer, distillation_loss
from .packed import PackedBinaryLinear, PackedBinaryWeight, load_packed, save_packed
from .schedule import ProgressiveBinarizationCallback, binarization_mix, ramp_length

__all__ = [
    "LogitDistillationConfig",
    "LogitDistillationTrainer",
    "MixedBinaryWeight",
    "PackedBinaryLinear",
    "PackedBinaryWeight",
    "ProgressiveBinarizationCallback",
    "ProgressiveBinaryLinear",
    "ProgressiveBinaryWeight",
    "binarization_mix",
    "binarize_model",
    "binary_layers",
    "binary_weight",
    "distillation_loss",
    "load_packed",
    "mean_abs_scales",
    "ramp_length",
    "rank_one_scales",
    "relative_binary_error",
    "save_packed",
    "set_binarization_mix",
]
