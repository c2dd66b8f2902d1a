import pytest
import torch
import torch.nn.functional as F

from hf_ext.kernels import (
    pack_signs,
    pack_signs_reference,
    pack_signs_triton,
    packed_binary_matmul,
    packed_binary_matmul_reference,
    packed_binary_matmul_triton,
    unpack_signs,
    unpack_signs_reference,
)
from hf_ext.kernels.binary_pack import matmul_config
from hf_ext.kernels.testing import assert_close_to_reference, kernel_device

# Signs are exact in every dtype; only ``x * col_scale`` is rounded to x's dtype before the fp32 accumulation.
TOLERANCES = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 1e-2, "rtol": 1e-2},
    torch.bfloat16: {"atol": 5e-2, "rtol": 5e-2},
}


def _weight(rows, cols, seed=0):
    """Gaussian weight with exact zeros (both signs of zero), which must pack as +1."""
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(rows, cols, generator=generator)
    weight[torch.rand(rows, cols, generator=generator) < 0.2] = 0.0
    weight[0, 0] = -0.0
    return weight.to(kernel_device())


def _linear_inputs(x_shape, out_features, seed=0):
    generator = torch.Generator().manual_seed(seed)
    in_features = x_shape[-1]
    x = torch.randn(x_shape, generator=generator)
    row_scale = torch.rand(out_features, generator=generator) + 0.5
    col_scale = torch.rand(in_features, generator=generator) + 0.5
    bias = torch.randn(out_features, generator=generator)
    return [t.to(kernel_device()) for t in (x, _weight(out_features, in_features, seed), row_scale, col_scale, bias)]


def _dense_linear(x, weight, row_scale, col_scale, bias):
    signs = torch.where(weight >= 0, 1.0, -1.0)
    return F.linear(x.float(), row_scale[:, None] * signs * col_scale[None, :], bias)


@pytest.mark.parametrize("in_features", [8, 13, 70])
def test_round_trip_recovers_the_signs_exactly(kernel_path, in_features):
    pack, unpack = kernel_path(pack_signs), kernel_path(unpack_signs)
    weight = _weight(11, in_features)
    packed = pack(weight)
    assert packed.dtype == torch.uint8 and packed.shape == (11, (in_features + 7) // 8)
    for dtype in (torch.float32, torch.float16):
        signs = unpack(packed, in_features, dtype)
        assert signs.dtype == dtype
        assert torch.equal(signs, torch.where(weight >= 0, 1.0, -1.0).to(dtype))


def test_packed_layout_is_least_significant_bit_first_with_zero_padding(kernel_path):
    pack, unpack = kernel_path(pack_signs), kernel_path(unpack_signs)
    weight = torch.tensor([[1.0, -1.0, 0.0, -2.0, 3.0, -0.5, -1.0, 2.0, -1.0, 5.0]], device=kernel_device())
    # byte 0: bits 0, 2 (zero), 4 and 7 set = 1 + 4 + 16 + 128; byte 1: bit 1 set, bits 2..7 padding
    expected = torch.tensor([[149, 2]], dtype=torch.uint8, device=kernel_device())
    assert torch.equal(pack(weight), expected)
    assert unpack(expected, 10).tolist() == [[1.0, -1.0, 1.0, -1.0, 1.0, -1.0, -1.0, 1.0, -1.0, 1.0]]


@pytest.mark.triton
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize(("rows", "cols"), [(37, 13), (5, 300), (70, 8)])
def test_triton_pack_is_bit_exact_with_the_reference(dtype, rows, cols):
    weight = _weight(rows, cols).to(dtype)
    assert torch.equal(pack_signs_triton(weight), pack_signs_reference(weight))
    transposed = _weight(cols, rows).to(dtype).T  # column-major
    assert torch.equal(pack_signs_triton(transposed), pack_signs_reference(transposed))


@pytest.mark.parametrize("with_bias", [False, True], ids=["no_bias", "bias"])
@pytest.mark.parametrize(("x_shape", "out_features"), [((2, 3, 13), 37), ((70, 64), 65), ((1, 4, 130), 20)])
def test_matmul_matches_linear_with_the_dense_weight(kernel_path, x_shape, out_features, with_bias):
    pack, matmul = kernel_path(pack_signs), kernel_path(packed_binary_matmul)
    x, weight, row_scale, col_scale, bias = _linear_inputs(x_shape, out_features)
    bias = bias if with_bias else None
    out = matmul(x, pack(weight), row_scale, col_scale, bias)
    assert out.shape == (*x_shape[:-1], out_features) and out.dtype == x.dtype
    expected = _dense_linear(x, weight, row_scale, col_scale, bias)
    assert_close_to_reference(out, expected, **TOLERANCES[torch.float32])


@pytest.mark.parametrize(("rows", "in_features", "splits"), [(3, 600, 3), (16, 521, 3), (17, 600, 1)])
def test_decode_rows_split_k_and_prefill_rows_do_not(kernel_path, rows, in_features, splits):
    """At most 16 rows of x take the GEMV-like tiling, split over k; the splits' partial sums add up."""
    assert matmul_config(rows, 20, in_features, torch.device("cpu"))[-1] == splits  # one SM counted on CPU
    pack, matmul = kernel_path(pack_signs), kernel_path(packed_binary_matmul)
    for dtype in (torch.float32, torch.float16):
        x, weight, row_scale, col_scale, bias = _linear_inputs((rows, in_features), 20)
        out = matmul(x.to(dtype), pack(weight), row_scale, col_scale, bias)
        assert out.dtype == dtype
        expected = _dense_linear(x.to(dtype), weight, row_scale, col_scale, bias)
        # sums of ~600 unit-sized terms (results of size ~25): fp32 rounding reaches a few 1e-5
        tolerance = TOLERANCES[dtype] | {"atol": max(1e-4, TOLERANCES[dtype]["atol"])}
        assert_close_to_reference(out.float(), expected, **tolerance)


def test_decode_config_gives_every_sm_programs_and_prefill_one_tile_each():
    # The CPU counts as one SM (4 programs wanted). SmolLM2-135M's up-projection at decode: 24 column tiles, no split.
    assert matmul_config(1, 1536, 576, torch.device("cpu")) == (16, 64, 256, 768, 1)
    # One column tile and 16 k tiles: 4 splits of 4 tiles each.
    assert matmul_config(16, 64, 4096, torch.device("cpu"))[-2:] == (1024, 4)
    assert matmul_config(2048, 11008, 4096, torch.device("cpu"))[-1] == 1


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_matmul_half_precision_x(kernel_path, dtype):
    kernel_path.skip_unsupported(dtype)
    pack, matmul = kernel_path(pack_signs), kernel_path(packed_binary_matmul)
    x, weight, row_scale, col_scale, bias = _linear_inputs((3, 5, 70), 24)
    out = matmul(x.to(dtype), pack(weight), row_scale, col_scale, bias)
    assert out.dtype == dtype
    expected = _dense_linear(x.to(dtype), weight, row_scale, col_scale, bias)
    assert_close_to_reference(out.float(), expected, **TOLERANCES[dtype])


def test_matmul_strided_and_empty_inputs(kernel_path):
    pack, matmul = kernel_path(pack_signs), kernel_path(packed_binary_matmul)
    _, weight, row_scale, col_scale, bias = _linear_inputs((1, 13), 30)
    x = torch.randn(13, 6, device=kernel_device()).T  # column-major (6, 13)
    packed = torch.zeros(30, 5, dtype=torch.uint8, device=kernel_device())
    packed[:, 1:3] = pack(weight)  # rows with a stride of 5 bytes
    out = matmul(x, packed[:, 1:3], row_scale, col_scale, bias)
    expected = _dense_linear(x, weight, row_scale, col_scale, bias)
    assert_close_to_reference(out, expected, **TOLERANCES[torch.float32])
    empty = matmul(torch.zeros(2, 0, 13, device=kernel_device()), pack(weight), row_scale, col_scale, bias)
    assert empty.shape == (2, 0, 30)


def test_dispatch_on_cpu_uses_the_reference():
    x, weight, row_scale, col_scale, bias = (t.cpu() for t in _linear_inputs((2, 3, 13), 9))
    packed = pack_signs(weight)
    assert torch.equal(packed, pack_signs_reference(weight))
    assert torch.equal(unpack_signs(packed, 13, torch.float16), unpack_signs_reference(packed, 13, torch.float16))
    expected = packed_binary_matmul_reference(x, packed, row_scale, col_scale, bias)
    assert torch.equal(packed_binary_matmul(x, packed, row_scale, col_scale, bias), expected)


@pytest.mark.parametrize(
    ("weight", "error", "match"),
    [
        (torch.zeros(3), ValueError, r"`weight` must be 2-D \(out, in\)"),
        (torch.zeros(3, 4, dtype=torch.int32), TypeError, "`weight` must be a floating tensor"),
    ],
)
def test_pack_bad_input(weight, error, match):
    with pytest.raises(error, match=match):
        pack_signs(weight)


@pytest.mark.parametrize(
    ("packed", "in_features", "dtype", "error", "match"),
    [
        (torch.zeros(2, 2), 13, torch.float32, TypeError, "`packed` must be uint8"),
        (
            torch.zeros(2, 3, dtype=torch.uint8),
            13,
            torch.float32,
            ValueError,
            r"ceil\(in_features / 8\)\) = \(out, 2\)",
        ),
        (torch.zeros(2, dtype=torch.uint8), 0, torch.float32, ValueError, "`packed` must be 2-D"),
        (torch.zeros(2, 2, dtype=torch.uint8), 13, torch.int32, TypeError, "`dtype` must be a floating dtype"),
        (torch.zeros(2, 0, dtype=torch.uint8), -1, torch.float32, ValueError, "`in_features` must be >= 0"),
    ],
)
def test_unpack_bad_input(packed, in_features, dtype, error, match):
    with pytest.raises(error, match=match):
        unpack_signs(packed, in_features, dtype)


def _matmul_args(**changes):
    args = {
        "x": torch.zeros(2, 13),
        "packed": torch.zeros(5, 2, dtype=torch.uint8),
        "row_scale": torch.ones(5),
        "col_scale": torch.ones(13),
        "bias": None,
    }
    return args | changes


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (_matmul_args(x=torch.zeros(2, 13, dtype=torch.long)), TypeError, "`x` must be a floating tensor"),
        (_matmul_args(x=torch.zeros(2, 12)), ValueError, r"`x` must be \(\.\.\., in\) with in = col_scale"),
        (_matmul_args(col_scale=torch.ones(13, 1)), ValueError, "`col_scale` must be 1-D"),
        (_matmul_args(row_scale=torch.ones(5, dtype=torch.int32)), TypeError, "`row_scale` must be a floating"),
        (_matmul_args(packed=torch.zeros(5, 3, dtype=torch.uint8)), ValueError, r"ceil\(in_features / 8\)"),
        (_matmul_args(packed=torch.zeros(5, 2)), TypeError, "`packed` must be uint8"),
        (_matmul_args(row_scale=torch.ones(4)), ValueError, r"must have the same length \(out\)"),
        (_matmul_args(bias=torch.zeros(6)), ValueError, r"must have the same length \(out\)"),
    ],
)
def test_matmul_bad_input(args, error, match):
    with pytest.raises(error, match=match):
        packed_binary_matmul(**args)


@pytest.mark.triton
def test_triton_matmul_rejects_double_x():
    args = _matmul_args(x=torch.zeros(2, 13, dtype=torch.float64), bias=torch.zeros(5))
    args = {name: tensor.to(kernel_device()) for name, tensor in args.items()}
    with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
        packed_binary_matmul_triton(**args)
