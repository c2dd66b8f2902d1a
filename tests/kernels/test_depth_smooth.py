import pytest
import torch

from hf_ext.kernels import depth_smooth
from hf_ext.kernels.testing import assert_close_to_reference, kernel_device

# Both paths accumulate in fp32 and round once to the stack's dtype: about one unit in its last place.
TOLERANCES = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 2e-3, "rtol": 2e-3},
    torch.bfloat16: {"atol": 1.6e-2, "rtol": 1.6e-2},
}


def _inputs(depth, width, seed=0):
    generator = torch.Generator().manual_seed(seed)
    stacked = torch.randn(depth, width, generator=generator)
    offset = torch.randn(depth, width, generator=generator)
    weights = torch.rand(depth, depth, generator=generator)
    return (t.to(kernel_device()) for t in (stacked, weights, offset))


@pytest.mark.parametrize(("depth", "width"), [(3, 5), (8, 300), (17, 64)])
def test_smoothing_is_the_weight_matrix_times_the_stack(kernel_path, depth, width):
    smooth = kernel_path(depth_smooth)
    stacked, weights, offset = _inputs(depth, width)
    assert_close_to_reference(smooth(stacked, weights), weights @ stacked, **TOLERANCES[torch.float32])
    expected = offset + weights @ (stacked - offset)
    assert_close_to_reference(smooth(stacked, weights, offset), expected, **TOLERANCES[torch.float32])


@pytest.mark.parametrize("with_offset", [False, True], ids=["no_offset", "offset"])
def test_out_receives_the_result_and_is_returned(kernel_path, with_offset):
    """An optimizer mixes into a buffer it keeps: ``out=`` writes there, and nothing else is allocated for it."""
    stacked, weights, offset = _inputs(8, 300)
    offset = offset if with_offset else None
    out = torch.full_like(stacked, float("nan"))
    result = kernel_path(depth_smooth)(stacked, weights, offset, out=out)
    assert result is out
    expected = weights @ stacked if offset is None else offset + weights @ (stacked - offset)
    assert_close_to_reference(out, expected, **TOLERANCES[torch.float32])


def test_a_hand_computed_three_block_average():
    stacked = torch.tensor([[1.0, 0.0], [4.0, 3.0], [7.0, 9.0]])
    uniform_renormalised = torch.tensor([[1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3], [0, 1 / 2, 1 / 2]])
    expected = torch.tensor([[2.5, 1.5], [4.0, 4.0], [5.5, 6.0]])
    torch.testing.assert_close(depth_smooth(stacked, uniform_renormalised), expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_half_precision_stacks_are_mixed_in_fp32(kernel_path, dtype):
    kernel_path.skip_unsupported(dtype)
    stacked, weights, offset = _inputs(6, 100)
    stacked, offset = stacked.to(dtype), offset.to(dtype)
    out = kernel_path(depth_smooth)(stacked, weights, offset)
    assert out.dtype == dtype
    expected = offset.float() + weights @ (stacked.float() - offset.float())
    assert_close_to_reference(out.float(), expected, **TOLERANCES[dtype])
    buffer = torch.empty_like(stacked)
    assert torch.equal(kernel_path(depth_smooth)(stacked, weights, offset, out=buffer), out)  # one rounding either way


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((torch.zeros(3), torch.eye(3)), r"`stacked` must be a 2-D floating \(L, N\) tensor"),
        ((torch.zeros(3, 4), torch.eye(2)), r"`weights` must be \(3, 3\) for 3 blocks"),
        ((torch.zeros(3, 4), torch.eye(3), torch.zeros(3, 5)), "`offset` must match `stacked`"),
        ((torch.zeros(3, 4), torch.eye(3), None, torch.zeros(3, 5)), "`out` must match `stacked`"),
        ((torch.zeros(3, 4), torch.eye(3), None, torch.zeros(3, 4, dtype=torch.float64)), "`out` must match"),
        ((torch.zeros(3, 4), torch.eye(3), None, torch.zeros(4, 3).T), "`out` must be contiguous"),
    ],
)
def test_bad_shapes_are_refused(args, message):
    with pytest.raises(ValueError, match=message):
        depth_smooth(*args)
