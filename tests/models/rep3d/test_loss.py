import math

import pytest
import torch
from torch.nn import functional as F

from hf_ext.models.rep3d import dice_ce_loss, dice_per_class


def _segmentation(num_labels=3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, num_labels, 4, 5, 6, generator=generator)
    return logits, torch.randint(num_labels, (2, 4, 5, 6), generator=generator)


def test_dice_ce_loss_by_hand():
    logits = torch.tensor([[2.0, 0.0], [0.0, 1.0], [1.0, 1.0]]).T.reshape(1, 2, 3, 1, 1)
    labels = torch.tensor([0, 1, 1]).reshape(1, 3, 1, 1)
    p = logits.softmax(1).reshape(2, 3)
    cross_entropy = -(p[0, 0].log() + p[1, 1].log() + p[1, 2].log()) / 3
    dice_background = 2 * p[0, 0] / (p[0].sum() + 1)
    dice_class = 2 * (p[1, 1] + p[1, 2]) / (p[1].sum() + 2)
    expected = cross_entropy + 0.5 * (1 - (dice_background + dice_class) / 2)
    torch.testing.assert_close(dice_ce_loss(logits, labels, dice_weight=0.5), expected, rtol=1e-5, atol=1e-6)


def test_dice_per_class_by_hand():
    predictions = torch.tensor([0, 0, 1, 1, 2, 0])
    labels = torch.tensor([0, 1, 1, 1, 0, 0])
    dice = dice_per_class(predictions, labels, 4)
    # class 0: |P∩T| = 2 (positions 0, 5), |P| = 3, |T| = 3; class 1: 2, 2, 3; class 2: 0, 1, 0; class 3: absent
    torch.testing.assert_close(dice[:3], torch.tensor([4 / 6, 4 / 5, 0.0], dtype=torch.float64))
    assert math.isnan(dice[3])


def test_cross_entropy_part_matches_torch():
    logits, labels = torch.randn(2, 3, 4, 4, 4), torch.randint(3, (2, 4, 4, 4))
    torch.testing.assert_close(dice_ce_loss(logits, labels, dice_weight=0.0), F.cross_entropy(logits, labels))


def test_dice_ce_loss_is_monais_dice_ce_loss_pooled_over_the_batch():
    losses = pytest.importorskip("monai.losses")
    logits, labels = _segmentation()
    reference = losses.DiceCELoss(to_onehot_y=True, softmax=True, batch=True, lambda_dice=0.7)
    torch.testing.assert_close(dice_ce_loss(logits, labels, dice_weight=0.7), reference(logits, labels[:, None]))


def test_dice_per_class_is_torchmetrics_global_dice_score():
    segmentation = pytest.importorskip("torchmetrics.functional.segmentation")
    _, labels = _segmentation()
    predictions = torch.randint(4, labels.shape, generator=torch.Generator().manual_seed(1))  # class 4 in neither
    reference = segmentation.dice_score(
        predictions, labels, num_classes=5, average="none", input_format="index", aggregation_level="global"
    )
    torch.testing.assert_close(dice_per_class(predictions, labels, 5), reference[0].double(), equal_nan=True)
