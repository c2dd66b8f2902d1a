import pytest
import torch

from hf_ext.kernels import depth_smooth, depth_smooth_reference, depth_smooth_triton
from hf_ext.kernels.testing import assert_close_to_reference, kernel_device, triton_runnable

runnable, reason = triton_runnable()
needs_triton = pytest.mark.skipif(not runnable, reason=reason)
PATHS = [
    pytest.param(depth_smooth_reference, id="reference"),
    pytest.param(depth_smooth_triton, id="triton", marks=needs_triton),
]


def _inputs(depth, width, seed=0):
    generator = torch.Generator().manual_seed(seed)
    stacked = torch.randn(depth, width, generator=generator)
    offset = torch.randn(depth, width, generator=generator)
    weights = torch.rand(depth, depth, generator=generator)
    return (t.to(kernel_device()) for t in (stacked, weights, offset))


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("depth", "width"), [(3, 5), (8, 300), (17, 64)])
def test_smoothing_is_the_weight_matrix_times_the_stack(path, depth, width):
    stacked, weights, offset = _inputs(depth, width)
    assert_close_to_reference(path(stacked, weights), weights @ stacked, atol=1e-5, rtol=1e-5)
    expected = offset + weights @ (stacked - offset)
    assert_close_to_reference(path(stacked, weights, offset), expected, atol=1e-5, rtol=1e-5)


def test_a_hand_computed_three_block_average():
    stacked = torch.tensor([[1.0, 0.0], [4.0, 3.0], [7.0, 9.0]])
    uniform_renormalised = torch.tensor([[1 / 2, 1 / 2, 0], [1 / 3, 1 / 3, 1 / 3], [0, 1 / 2, 1 / 2]])
    expected = torch.tensor([[2.5, 1.5], [4.0, 4.0], [5.5, 6.0]])
    torch.testing.assert_close(depth_smooth(stacked, uniform_renormalised), expected)


@pytest.mark.parametrize("path", PATHS)
def test_triton_agrees_with_the_reference_in_half_precision_inputs(path):
    stacked, weights, offset = _inputs(6, 100)
    stacked, offset = stacked.half(), offset.half()
    out = path(stacked, weights, offset)
    assert out.dtype == torch.float16
    assert_close_to_reference(out, depth_smooth_reference(stacked, weights, offset), atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((torch.zeros(3), torch.eye(3)), r"`stacked` must be a 2-D floating \(L, N\) tensor"),
        ((torch.zeros(3, 4), torch.eye(2)), r"`weights` must be \(3, 3\) for 3 blocks"),
        ((torch.zeros(3, 4), torch.eye(3), torch.zeros(3, 5)), "`offset` must match `stacked`"),
    ],
)
def test_bad_shapes_are_refused(args, message):
    with pytest.raises(ValueError, match=message):
        depth_smooth(*args)
