import math

import pytest
import torch
from torch.nn import functional as F

from hf_ext.models.rep3d import Rep3DConv, distance_prior


def _trained_like(conv: Rep3DConv, seed: int = 0) -> Rep3DConv:
    """Random modulation weights, as after training (its last layer starts at zero)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in conv.parameters():
            parameter.copy_(0.1 * torch.randn(parameter.shape, generator=generator))
    return conv


def test_prior_is_one_over_one_plus_the_distance_to_the_centre():
    prior = distance_prior(5)
    assert prior.shape == (5, 5, 5)
    assert prior[2, 2, 2] == 1.0
    assert prior[2, 2, 4] == pytest.approx(1 / 3)
    assert prior[0, 0, 0] == pytest.approx(1 / (1 + math.sqrt(12)))
    assert torch.equal(prior, prior.flip(0)) and torch.equal(prior, prior.transpose(0, 2))


def test_mask_starts_at_the_prior_and_has_the_kernel_shape():
    conv = Rep3DConv(3, kernel_size=5)
    assert conv.mask().shape == conv.conv.weight.shape == (3, 1, 5, 5, 5)
    assert torch.equal(conv.mask(), distance_prior(5).expand(3, 1, 5, 5, 5))


def test_forward_is_a_depthwise_convolution_with_w_times_m():
    conv = _trained_like(Rep3DConv(2, kernel_size=3))
    x = torch.randn(1, 2, 4, 5, 6)
    weight = conv.conv.weight * (distance_prior(3) + conv.modulation(distance_prior(3)))
    expected = F.conv3d(x, weight, conv.conv.bias, padding=1, groups=2)
    torch.testing.assert_close(conv(x), expected)


def test_gradient_wrt_w_is_the_mask_times_the_gradient_wrt_the_effective_weight():
    conv = _trained_like(Rep3DConv(2, kernel_size=5))
    x = torch.randn(2, 2, 6, 6, 6)
    effective = conv.effective_weight()
    effective.retain_grad()
    out = F.conv3d(x, effective, conv.conv.bias, padding=2, groups=2)
    (out * torch.randn_like(out)).sum().backward()
    mask = conv.mask().detach()
    assert not torch.allclose(mask, distance_prior(5).expand_as(mask))  # a trained mask, not the prior
    torch.testing.assert_close(conv.conv.weight.grad, mask * effective.grad)
    # ... and the modulation net is trained by the same backward pass
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in conv.modulation.parameters())


def test_the_modulation_net_is_among_the_parameters_an_optimizer_sees():
    conv = Rep3DConv(2, kernel_size=3)
    names = {name for name, _ in conv.named_parameters()}
    assert {"conv.weight", "modulation.hidden.weight", "modulation.out.weight"} <= names
    optimizer = torch.optim.SGD(conv.parameters(), lr=1.0)
    before = conv.modulation.out.weight.detach().clone()
    conv(torch.randn(1, 2, 4, 4, 4)).square().sum().backward()
    optimizer.step()
    assert not torch.equal(before, conv.modulation.out.weight)


@pytest.mark.parametrize("mask", ["learned", "prior", "none"])
def test_deploy_folds_the_mask_with_identical_outputs(mask):
    conv = _trained_like(Rep3DConv(3, kernel_size=5, mask=mask))
    x = torch.randn(2, 3, 7, 6, 5)
    before = conv(x)
    conv.deploy()
    assert conv.mask_mode == "none" and not hasattr(conv, "modulation") and not hasattr(conv, "prior")
    assert [name for name, _ in conv.named_parameters()] == ["conv.weight", "conv.bias"]
    torch.testing.assert_close(conv(x), before, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kernel_size", [1, 3, 7, 13, 21])
def test_odd_kernels_keep_the_shape(kernel_size):
    x = torch.randn(1, 2, 5, 4, 3)
    assert Rep3DConv(2, kernel_size=kernel_size)(x).shape == x.shape


def test_prior_mask_scales_the_gradient_by_the_prior():
    conv = Rep3DConv(1, kernel_size=3, mask="prior")
    plain = Rep3DConv(1, kernel_size=3, mask="none")
    with torch.no_grad():
        plain.conv.weight.copy_(conv.effective_weight())
        plain.conv.bias.copy_(conv.conv.bias)
    torch.manual_seed(0)
    x = torch.randn(1, 1, 4, 4, 4)
    conv(x).sum().backward()
    plain(x).sum().backward()
    torch.testing.assert_close(conv.conv.weight.grad, distance_prior(3) * plain.conv.weight.grad)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"kernel_size": 4}, r"`kernel_size` must be an odd integer >= 1 \(padding k // 2 keeps the shape\), got 4"),
        ({"kernel_size": 0}, "`kernel_size` must be an odd integer >= 1"),
        ({"kernel_size": float("nan")}, "`kernel_size` must be a finite number, got nan"),
        ({"mask": "soft"}, r"`mask` must be one of \['learned', 'prior', 'none'\], got 'soft'"),
        ({"channels": 0}, "`channels` must be an integer >= 1, got 0"),
        ({"modulation_hidden_size": 0}, "`modulation_hidden_size` must be an integer >= 1"),
    ],
)
def test_bad_arguments_name_the_field(kwargs, message):
    with pytest.raises(ValueError, match="Rep3DConv: " + message):
        Rep3DConv(**{"channels": 2} | kwargs)
