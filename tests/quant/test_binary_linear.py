import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils import parametrize
from transformers.pytorch_utils import Conv1D

from hf_ext.quant import (
    MixedBinaryWeight,
    ProgressiveBinaryLinear,
    ProgressiveBinaryWeight,
    mean_abs_scales,
    rank_one_scales,
    relative_binary_error,
)


def _pair(seed=0, in_features=12, out_features=7, init="svid", ste_clip=1.0):
    torch.manual_seed(seed)
    dense = nn.Linear(in_features, out_features)
    reference = nn.Linear(in_features, out_features)
    reference.load_state_dict(dense.state_dict())
    return reference, ProgressiveBinaryLinear.from_linear(dense, init=init, ste_clip=ste_clip)


def _grads(module, x):
    module.zero_grad()
    module(x).pow(2).sum().backward()
    return {name: p.grad.clone() for name, p in module.named_parameters() if p.grad is not None}


def test_at_mix_zero_the_layer_is_exactly_the_dense_one_forward_and_backward():
    reference, layer = _pair()
    x = torch.randn(5, 12)
    assert torch.equal(layer(x), reference(x))
    dense_grads, binary_grads = _grads(reference, x), _grads(layer, x)
    assert torch.equal(binary_grads["weight"], dense_grads["weight"])
    assert torch.equal(binary_grads["bias"], dense_grads["bias"])
    assert not binary_grads["row_scale"].any() and not binary_grads["col_scale"].any()


def test_at_mix_one_the_layer_is_exactly_the_binary_one():
    _, layer = _pair()
    layer.mix.fill_(1.0)
    x = torch.randn(5, 12)
    signs = torch.where(layer.weight >= 0, 1.0, -1.0)
    binary = layer.row_scale[:, None] * signs * layer.col_scale[None, :]
    assert torch.equal(layer.effective_weight(), binary)
    assert set(binary.unique(sorted=False).abs().tolist()) <= set(
        (layer.row_scale[:, None] * layer.col_scale).abs().flatten().tolist()
    )
    torch.testing.assert_close(layer(x), F.linear(x, binary, layer.bias), rtol=0, atol=1e-6)


def test_zero_weights_count_as_plus_one():
    _, layer = _pair()
    with torch.no_grad():
        layer.weight[0, 0] = 0.0
    layer.mix.fill_(1.0)
    assert layer.effective_weight()[0, 0] == layer.row_scale[0] * layer.col_scale[0]


@pytest.mark.parametrize("ste_clip", [1.0, 0.5, None])
@pytest.mark.parametrize("mix", [0.0, 0.3, 1.0])
def test_gradients_match_autograd_on_the_explicit_mix(mix, ste_clip):
    """The custom backward equals autograd through (1-l) W + l [a b^T sign(W)] with a masked STE on W."""
    _, layer = _pair(ste_clip=ste_clip)
    layer.mix.fill_(mix)
    x = torch.randn(6, 12)
    upstream = torch.randn(6, 7)
    (layer(x) * upstream).sum().backward()

    weight = layer.weight.detach().clone().requires_grad_()
    row, col = (t.detach().clone().requires_grad_() for t in (layer.row_scale, layer.col_scale))
    scale = row[:, None] * col[None, :]
    signs = torch.where(weight.detach() >= 0, 1.0, -1.0)
    passes = (
        torch.ones_like(weight) if ste_clip is None else (weight.detach().abs() <= ste_clip * scale.detach()).float()
    )
    straight_through = passes * (weight - weight.detach())  # zero forward, masked identity backward
    explicit = (1 - mix) * weight + mix * (scale * signs + straight_through)
    (F.linear(x, explicit, layer.bias.detach()) * upstream).sum().backward()

    torch.testing.assert_close(layer.weight.grad, weight.grad)
    torch.testing.assert_close(layer.row_scale.grad, row.grad)
    torch.testing.assert_close(layer.col_scale.grad, col.grad)


def test_clipping_stops_the_gradient_of_weights_beyond_their_binary_magnitude():
    _, layer = _pair()
    layer.mix.fill_(1.0)
    layer(torch.randn(4, 12)).sum().backward()
    beyond = layer.weight.detach().abs() > layer.row_scale.detach()[:, None] * layer.col_scale.detach()[None, :]
    assert beyond.any() and (~beyond).any()
    assert not layer.weight.grad[beyond].any() and layer.weight.grad[~beyond].any()


def test_negative_zero_counts_as_plus_one_and_a_weight_exactly_at_the_clip_passes_its_gradient():
    """The float-only sign and clip mask agree with ``W >= 0`` and ``|W| <= clip a b`` at their edges."""
    layer = ProgressiveBinaryLinear.from_linear(nn.Linear(3, 2, bias=False), init="mean_abs", ste_clip=0.5)
    with torch.no_grad():
        layer.row_scale.copy_(torch.tensor([2.0, 4.0]))
        layer.col_scale.fill_(1.0)
        layer.weight.copy_(torch.tensor([[-0.0, 0.0, -1.0], [2.0, -2.0, 3.0]]))  # clips 0.5 * 2 = 1 and 0.5 * 4 = 2
    layer.mix.fill_(1.0)
    assert torch.equal(layer.effective_weight(), torch.tensor([[2.0, 2.0, -2.0], [4.0, -4.0, 4.0]]))
    layer(torch.ones(1, 3)).sum().backward()
    assert torch.equal(layer.weight.grad, torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]]))


def test_rank_one_init_recovers_an_exactly_rank_one_magnitude():
    """|W| = p q^T with random signs: a b^T must equal p q^T and the binary error be zero."""
    generator = torch.Generator().manual_seed(0)
    p, q = torch.rand(9, generator=generator) + 0.1, torch.rand(5, generator=generator) + 0.1
    signs = torch.where(torch.rand(9, 5, generator=generator) < 0.5, -1.0, 1.0)
    weight = signs * torch.outer(p, q)
    row_scale, col_scale = rank_one_scales(weight)
    assert (row_scale > 0).all() and (col_scale > 0).all()
    torch.testing.assert_close(torch.outer(row_scale, col_scale), torch.outer(p, q))
    assert relative_binary_error(weight, row_scale, col_scale) < 1e-6


def test_rank_one_init_beats_the_mean_abs_init_on_a_real_like_matrix():
    _, svid = _pair(in_features=64, out_features=32)
    _, mean_abs = _pair(in_features=64, out_features=32, init="mean_abs")
    assert 0 < svid.init_error <= mean_abs.init_error < 1


def test_the_layer_shares_the_dense_weight_and_saves_mix_and_scales():
    torch.manual_seed(0)
    dense = nn.Linear(4, 3)
    layer = ProgressiveBinaryLinear.from_linear(dense)
    assert layer.weight is dense.weight and isinstance(layer, nn.Linear)
    layer.mix.fill_(0.25)
    assert set(layer.state_dict()) == {"weight", "bias", "row_scale", "col_scale", "mix"}
    restored = ProgressiveBinaryLinear.from_linear(nn.Linear(4, 3))
    restored.load_state_dict(layer.state_dict())
    assert restored.mix.item() == 0.25 and torch.equal(restored.row_scale, layer.row_scale)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"init": "median"}, r"`init` must be one of \['svid', 'mean_abs'\]"),
        ({"ste_clip": 0}, "`ste_clip` must be > 0 or None"),
    ],
)
def test_bad_arguments_name_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ProgressiveBinaryLinear.from_linear(nn.Linear(4, 3), **kwargs)


@pytest.mark.parametrize("ste_clip", [0.5, None])
def test_a_stack_of_matrices_is_binarized_batched_as_each_matrix_alone(ste_clip):
    """Expert stacks (experts, out, in): scales per expert and output unit, and the mixed weight's gradients, as
    each expert alone would get them."""
    generator = torch.Generator().manual_seed(0)
    stack = torch.randn(3, 7, 12, generator=generator)
    for scales in (rank_one_scales, mean_abs_scales):
        stacked, alone = scales(stack), [scales(matrix) for matrix in stack]
        for got, expected in zip(stacked, zip(*alone, strict=True), strict=True):
            torch.testing.assert_close(got, torch.stack(expected), rtol=1e-6, atol=0)
    row, col = (scale.requires_grad_() for scale in rank_one_scales(stack))
    weight, mix, upstream = stack.clone().requires_grad_(), torch.tensor(0.3), torch.randn(3, 7, 12)
    mixed = MixedBinaryWeight.apply(weight, row, col, mix, ste_clip)
    (mixed * upstream).sum().backward()
    for expert in range(3):
        parts = [t.detach()[expert].clone().requires_grad_() for t in (stack, row, col)]
        alone = MixedBinaryWeight.apply(*parts, mix, ste_clip)
        (alone * upstream[expert]).sum().backward()
        torch.testing.assert_close(mixed[expert], alone, rtol=0, atol=0)
        for got, part in zip((weight, row, col), parts, strict=True):
            torch.testing.assert_close(got.grad[expert], part.grad, rtol=1e-6, atol=1e-7)


def test_a_conv1d_weight_binarizes_as_the_linear_map_it_stores_transposed():
    """A ``Conv1D`` stores ``(in, out)``: parametrized with ``transposed``, it gets the scales, outputs and
    gradients of the ``nn.Linear`` holding ``W.T``."""
    torch.manual_seed(0)
    conv = Conv1D(7, 12)  # 12 in, 7 out
    linear = nn.Linear(12, 7)
    with torch.no_grad():
        linear.weight.copy_(conv.weight.T)
        linear.bias.copy_(conv.bias)
    binarizer = ProgressiveBinaryWeight(conv.weight, transposed=True)
    parametrize.register_parametrization(conv, "weight", binarizer)
    layer = ProgressiveBinaryLinear.from_linear(linear)
    assert torch.equal(binarizer.row_scale, layer.row_scale) and torch.equal(binarizer.col_scale, layer.col_scale)
    x = torch.randn(2, 5, 12)
    for mix in (0.3, 1.0):
        binarizer.mix.fill_(mix)
        layer.mix.fill_(mix)
        conv.zero_grad()
        layer.zero_grad()
        conv(x).pow(2).sum().backward()
        layer(x).pow(2).sum().backward()
        torch.testing.assert_close(conv(x), layer(x), rtol=1e-6, atol=1e-6)
        latent = conv.parametrizations.weight.original
        torch.testing.assert_close(latent.grad, layer.weight.grad.T, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(binarizer.row_scale.grad, layer.row_scale.grad, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(binarizer.col_scale.grad, layer.col_scale.grad, rtol=1e-5, atol=1e-6)


def test_the_scales_of_a_frozen_weight_stay_frozen():
    linear, conv = nn.Linear(4, 3).requires_grad_(False), Conv1D(3, 4).requires_grad_(False)
    layer, binarizer = ProgressiveBinaryLinear.from_linear(linear), ProgressiveBinaryWeight(conv.weight, True)
    assert not any(scale.requires_grad for scale in (layer.row_scale, layer.col_scale, binarizer.row_scale))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"weight": torch.ones(4)}, r"ProgressiveBinaryWeight: `weight` must be a matrix or a stack .* shape \(4,\)"),
        ({"init": "median"}, r"ProgressiveBinaryWeight: `init` must be one of \['svid', 'mean_abs'\]"),
        ({"ste_clip": -1.0}, "ProgressiveBinaryWeight: `ste_clip` must be > 0 or None"),
    ],
)
def test_bad_weights_and_arguments_of_the_parametrization_name_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ProgressiveBinaryWeight(**{"weight": torch.ones(3, 4)} | kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ste_clip": "1"}, r"`ste_clip` must be a number or None, got '1'"),  # failed comparing str and int
        ({"in_features": 2.5}, "`in_features` must be an integer >= 0, got 2.5"),  # torch named only `size`
    ],
)
def test_arguments_of_another_type_name_the_layer_and_field(kwargs, message):
    with pytest.raises(TypeError, match="ProgressiveBinaryLinear: " + message):
        ProgressiveBinaryLinear(**{"in_features": 4, "out_features": 3} | kwargs)
