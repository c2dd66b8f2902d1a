"""Dice + cross-entropy loss and the per-class Dice score of 3D segmentations."""

import torch
from torch.nn import functional as F

SMOOTH = 1e-5


def check_labels(labels: torch.Tensor, num_labels: int) -> None:
    """Raise ``ValueError`` naming the values of ``labels`` outside ``0..num_labels-1``."""
    low, high = int(labels.min()), int(labels.max())
    if low < 0 or high >= num_labels:
        raise ValueError(f"`labels` must be class indices in 0..{num_labels - 1}, got values from {low} to {high}")


def dice_ce_loss(logits: torch.Tensor, labels: torch.Tensor, dice_weight: float = 1.0) -> torch.Tensor:
    """Cross-entropy plus ``dice_weight * (1 - soft Dice)``, the soft Dice averaged over classes (background too).

    ``logits``: (batch, classes, D, H, W); ``labels``: (batch, D, H, W) class indices. The Dice term
    pools the whole batch per class, so a class absent from one volume does not score 0 there.
    Our own: MONAI's ``DiceCELoss(to_onehot_y=True, softmax=True, batch=True, lambda_dice=dice_weight)``
    gives the same loss (tested), but would make MONAI a dependency of ``hf_ext.models`` for ten lines.
    """
    cross_entropy = F.cross_entropy(logits, labels)
    if dice_weight == 0:
        return cross_entropy
    probabilities = logits.float().softmax(1)
    one_hot = F.one_hot(labels, logits.shape[1]).movedim(-1, 1).to(probabilities.dtype)
    dims = (0, *range(2, logits.dim()))
    intersection = (probabilities * one_hot).sum(dims)
    total = probabilities.sum(dims) + one_hot.sum(dims)
    dice = (2 * intersection + SMOOTH) / (total + SMOOTH)
    return cross_entropy + dice_weight * (1 - dice.mean())


def dice_per_class(predictions: torch.Tensor, labels: torch.Tensor, num_labels: int) -> torch.Tensor:
    """Hard Dice ``2|P∩T| / (|P| + |T|)`` of each class over all voxels given; NaN for a class in neither.

    Our own: torchmetrics' ``dice_score(..., average="none", input_format="index", aggregation_level="global")``
    gives the same scores (tested), but would make torchmetrics a dependency of ``hf_ext.models`` for six lines.
    """
    check_labels(labels, num_labels)
    predictions, labels = predictions.reshape(-1), labels.reshape(-1)
    intersection = torch.bincount(labels[predictions == labels], minlength=num_labels).double()
    total = (torch.bincount(predictions, minlength=num_labels) + torch.bincount(labels, minlength=num_labels)).double()
    return torch.where(total > 0, 2 * intersection / total.clamp_min(1), torch.nan)
