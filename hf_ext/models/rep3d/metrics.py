"""Per-class Dice as the stock ``Trainer``'s ``compute_metrics``, on argmax predictions (not the full logits)."""

from collections.abc import Sequence

import numpy as np
import torch
from transformers import EvalPrediction

from .loss import dice_per_class


def argmax_logits(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``preprocess_logits_for_metrics``: keep the predicted class per voxel, 1/num_labels of the logits' memory."""
    return logits.argmax(1)


class DiceMetrics:
    """``compute_metrics`` giving ``dice_<class>`` for every class and ``mean_dice`` over the foreground classes.

    Dice pools all validation voxels per class; a class absent from both predictions and labels is NaN
    and left out of the mean.
    """

    def __init__(self, class_names: Sequence[str]):
        if len(class_names) < 2:
            raise ValueError(f"DiceMetrics: `class_names` must name >= 2 classes (background first), got {class_names}")
        self.class_names = list(class_names)

    def __call__(self, prediction: EvalPrediction) -> dict[str, float]:
        predictions = torch.as_tensor(np.asarray(prediction.predictions)).long()
        labels = torch.as_tensor(np.asarray(prediction.label_ids)).long()
        dice = dice_per_class(predictions, labels, len(self.class_names))
        metrics = {f"dice_{name}": float(value) for name, value in zip(self.class_names, dice, strict=True)}
        foreground = dice[1:][~dice[1:].isnan()]
        metrics["mean_dice"] = float(foreground.mean()) if len(foreground) else float("nan")
        return metrics
