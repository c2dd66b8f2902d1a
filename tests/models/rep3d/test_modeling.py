import math

import pytest
import torch
from torch.nn import functional as F

from hf_ext.models.rep3d import Rep3DConfig, Rep3DConv, Rep3DForSegmentation, dice_ce_loss, dice_per_class

TINY = {"hidden_sizes": [4, 8], "depths": [1, 1], "kernel_sizes": [5, 3], "decoder_hidden_size": 8, "num_labels": 3}


def _model(seed=0, **overrides) -> Rep3DForSegmentation:
    torch.manual_seed(seed)
    return Rep3DForSegmentation(Rep3DConfig(**TINY | overrides)).eval()


def _batch(size=(8, 8, 8), batch=2, num_labels=3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    pixel_values = torch.randn(batch, 1, *size, generator=generator)
    return pixel_values, torch.randint(num_labels, (batch, *size), generator=generator)


def test_default_config_is_a_four_stage_encoder_with_kernel_21():
    config = Rep3DConfig()
    assert len(config.hidden_sizes) == 4 and config.kernel_sizes == [21] * 4 and config.stride_product == 16
    assert config.mask_mode == "learned"


def test_logits_have_the_input_resolution_and_the_loss_is_ce_plus_dice():
    model = _model()
    pixel_values, labels = _batch(size=(8, 12, 9))  # sides need not be multiples of the stride product (4)
    out = model(pixel_values=pixel_values, labels=labels)
    assert out.logits.shape == (2, 3, 8, 12, 9)
    torch.testing.assert_close(out.loss, dice_ce_loss(out.logits, labels))
    assert Rep3DForSegmentation(Rep3DConfig(**TINY | {"dice_weight": 0.0}))(pixel_values, labels).loss > 0


def test_every_large_kernel_is_a_rep3d_conv_with_the_configured_mask():
    model = _model(mask_mode="prior")
    convs = [m for m in model.modules() if isinstance(m, Rep3DConv)]
    assert [c.conv.kernel_size[0] for c in convs] == [5, 3]
    assert all(c.mask_mode == "prior" for c in convs)


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


def test_deployed_model_gives_the_same_logits_and_saves_as_plain_convolutions(tmp_path):
    model = _model()
    with torch.no_grad():  # a trained-looking modulation net, so that the mask is not the prior
        for conv in (m for m in model.modules() if isinstance(m, Rep3DConv)):
            conv.modulation.out.weight.normal_(0, 0.05)
    pixel_values, _ = _batch()
    before = model(pixel_values).logits
    model.deploy()
    assert model.config.mask_mode == "none" and not any("modulation" in n for n, _ in model.named_parameters())
    torch.testing.assert_close(model(pixel_values).logits, before, rtol=1e-4, atol=1e-5)
    model.save_pretrained(tmp_path)
    reloaded = Rep3DForSegmentation.from_pretrained(tmp_path).eval()
    torch.testing.assert_close(reloaded(pixel_values).logits, before, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mask_mode", ["learned", "prior", "none"])
def test_save_and_load_round_trip(tmp_path, mask_mode):
    model = _model(mask_mode=mask_mode)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.01)  # every tensor differs from a fresh initialisation
    pixel_values, labels = _batch()
    model.save_pretrained(tmp_path)
    reloaded = Rep3DForSegmentation.from_pretrained(tmp_path).eval()
    assert reloaded.config.to_diff_dict() | {"_name_or_path": ""} == model.config.to_diff_dict() | {"_name_or_path": ""}
    for (name, a), (_, b) in zip(model.state_dict().items(), reloaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    torch.testing.assert_close(reloaded(pixel_values, labels).loss, model(pixel_values, labels).loss)


def test_fresh_model_starts_from_the_prior_mask():
    model = _model(mask_mode="learned")
    conv = next(m for m in model.modules() if isinstance(m, Rep3DConv))
    torch.testing.assert_close(conv.mask(), conv.prior.expand_as(conv.mask()))


def test_one_training_step_moves_the_modulation_net():
    model = _model().train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    pixel_values, labels = _batch()
    for _ in range(2):  # the first step moves the zero-initialised layer, the second the one before it
        optimizer.zero_grad()
        model(pixel_values, labels).loss.backward()
        optimizer.step()
    conv = next(m for m in model.modules() if isinstance(m, Rep3DConv))
    assert not torch.allclose(conv.mask(), conv.prior.expand_as(conv.mask()))
    assert conv.modulation.hidden.weight.grad.abs().sum() > 0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"kernel_sizes": [5, 4]}, r"`kernel_sizes` must be odd \(padding k // 2 keeps the shape\), got \[5, 4\]"),
        ({"mask_mode": "soft"}, r"`mask_mode` must be one of \['learned', 'prior', 'none'\], got 'soft'"),
        ({"depths": [1]}, "hidden_sizes, depths, kernel_sizes must have one entry per stage"),
        ({"hidden_sizes": [4, 0]}, "`hidden_sizes` must be a non-empty list of integers >= 1"),
        ({"stem_stride": 0}, "`stem_stride` must be an integer >= 1, got 0"),
        ({"dice_weight": -1.0}, "`dice_weight` must be >= 0, got -1.0"),
        ({"dice_weight": float("nan")}, "`dice_weight` must be a finite number, got nan"),
        ({"num_labels": 1}, "`num_labels` must be >= 2"),
    ],
)
def test_bad_config_names_the_field(overrides, message):
    with pytest.raises(ValueError, match="Rep3DConfig: " + message):
        Rep3DConfig(**TINY | overrides)


def test_a_volume_smaller_than_the_stride_product_is_refused():
    model = _model()  # stem stride 2, two stages: stride product 4
    with pytest.raises(ValueError, match=r"sides must be at least the encoder's stride product 4 .*got \(8, 3, 8\)"):
        model(torch.randn(1, 1, 8, 3, 8))


@pytest.mark.parametrize("bad", [3, -1])
def test_labels_outside_the_class_range_are_refused(bad):
    pixel_values, labels = _batch()
    labels[0, 0, 0, 0] = bad
    with pytest.raises(ValueError, match=r"`labels` must be class indices in 0..2, got values from"):
        _model()(pixel_values, labels)


def test_wrong_input_shapes_are_refused():
    pixel_values, labels = _batch()
    with pytest.raises(ValueError, match=r"`pixel_values` must have shape \(batch, 1, D, H, W\), got \(2, 2, 8, 8"):
        _model()(pixel_values.repeat(1, 2, 1, 1, 1))
    with pytest.raises(ValueError, match=r"`labels` must have shape \(batch, D, H, W\)"):
        _model()(pixel_values, labels[:, :4])


def test_cross_entropy_part_matches_torch():
    logits, labels = torch.randn(2, 3, 4, 4, 4), torch.randint(3, (2, 4, 4, 4))
    torch.testing.assert_close(dice_ce_loss(logits, labels, dice_weight=0.0), F.cross_entropy(logits, labels))
