import pytest
import torch

from hf_ext.kernels import seeded_perturb_, seeded_perturb_reference_, seeded_perturb_triton_
from hf_ext.kernels.testing import assert_same_distribution, kernel_device, triton_runnable

runnable, reason = triton_runnable()
needs_triton = pytest.mark.skipif(not runnable, reason=reason)
PATHS = [
    pytest.param(seeded_perturb_reference_, id="reference"),
    pytest.param(seeded_perturb_triton_, id="triton", marks=needs_triton),
]
# Not a multiple of the kernel's block size, to exercise the tail mask.
SHAPE = (37, 91)


def _zeros(shape=SHAPE, dtype=torch.float32):
    return torch.zeros(shape, dtype=dtype, device=kernel_device())


@pytest.mark.parametrize("perturb", PATHS)
def test_same_seed_same_noise_every_call(perturb):
    first, second = perturb(_zeros(), seed=11, scale=1.0), perturb(_zeros(), seed=11, scale=1.0)
    assert torch.equal(first, second)
    assert not torch.equal(first, perturb(_zeros(), seed=12, scale=1.0))


@pytest.mark.parametrize("perturb", PATHS)
def test_negative_scale_undoes_the_perturbation(perturb):
    param = torch.randn(SHAPE, device=kernel_device())
    original = param.clone()
    perturb(param, seed=5, scale=1e-3)
    assert not torch.equal(param, original)
    perturb(param, seed=5, scale=-1e-3)
    torch.testing.assert_close(param, original, atol=1e-6, rtol=0)


@pytest.mark.parametrize("perturb", PATHS)
def test_update_is_linear_in_scale(perturb):
    base = torch.randn(SHAPE, device=kernel_device())
    unit = perturb(base.clone(), seed=3, scale=1.0) - base
    half = perturb(base.clone(), seed=3, scale=0.5) - base
    torch.testing.assert_close(half, 0.5 * unit, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("perturb", PATHS)
def test_low_precision_params_are_perturbed_in_their_dtype(perturb):
    dtype = torch.float16  # the interpreter has no bf16; fp16 exercises the same cast path
    param = perturb(_zeros(dtype=dtype), seed=1, scale=1.0)
    assert param.dtype == dtype
    assert param.float().std().item() == pytest.approx(1.0, abs=0.05)


@needs_triton
def test_triton_noise_matches_reference_distribution():
    kernel = seeded_perturb_triton_(_zeros((64, 128)), seed=7, scale=1.0)
    reference = seeded_perturb_reference_(_zeros((64, 128)), seed=7, scale=1.0)
    assert_same_distribution(kernel, reference, mean_tol=0.03, std_tol=0.03)
    assert kernel.mean().abs().item() < 0.03 and abs(kernel.std().item() - 1) < 0.03


@needs_triton
def test_triton_rejects_non_contiguous_input():
    with pytest.raises(ValueError, match="contiguous"):
        seeded_perturb_triton_(_zeros((8, 8)).t(), seed=0, scale=1.0)


def test_dispatch_uses_reference_on_cpu():
    param = torch.zeros(SHAPE)
    expected = seeded_perturb_reference_(torch.zeros(SHAPE), seed=9, scale=2.0)
    torch.testing.assert_close(seeded_perturb_(param, seed=9, scale=2.0), expected)


@pytest.mark.parametrize(
    ("param", "seed", "error"),
    [
        (torch.zeros(3, dtype=torch.int64), 0, TypeError),
        (torch.zeros(3), -1, ValueError),
        (torch.zeros(3), 2**63, ValueError),
    ],
)
def test_bad_input_is_rejected(param, seed, error):
    with pytest.raises(error):
        seeded_perturb_(param, seed=seed, scale=1.0)
