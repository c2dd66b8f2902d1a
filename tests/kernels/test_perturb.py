import pytest
import torch

from hf_ext.kernels import seeded_perturb_, seeded_perturb_reference_, seeded_perturb_triton_
from hf_ext.kernels.testing import assert_same_distribution, kernel_device

# Not a multiple of the kernel's block size, to exercise the tail mask.
SHAPE = (37, 91)
# The noise is drawn in fp32 and added in fp32; the parameter's dtype only rounds the result.
TOLERANCES = {
    torch.float32: {"atol": 1e-6, "rtol": 1e-5},
    torch.float16: {"atol": 1e-3, "rtol": 1e-3},
    torch.bfloat16: {"atol": 8e-3, "rtol": 8e-3},
}


def _zeros(shape=SHAPE, dtype=torch.float32):
    return torch.zeros(shape, dtype=dtype, device=kernel_device())


def test_same_seed_same_noise_every_call(kernel_path):
    perturb = kernel_path(seeded_perturb_)
    first, second = perturb(_zeros(), seed=11, scale=1.0), perturb(_zeros(), seed=11, scale=1.0)
    assert torch.equal(first, second)
    assert not torch.equal(first, perturb(_zeros(), seed=12, scale=1.0))


def test_negative_scale_undoes_the_perturbation(kernel_path):
    perturb = kernel_path(seeded_perturb_)
    param = torch.randn(SHAPE, device=kernel_device())
    original = param.clone()
    perturb(param, seed=5, scale=1e-3)
    assert not torch.equal(param, original)
    perturb(param, seed=5, scale=-1e-3)
    torch.testing.assert_close(param, original, atol=1e-6, rtol=0)


def test_update_is_linear_in_scale(kernel_path):
    perturb = kernel_path(seeded_perturb_)
    base = torch.randn(SHAPE, device=kernel_device())
    unit = perturb(base.clone(), seed=3, scale=1.0) - base
    half = perturb(base.clone(), seed=3, scale=0.5) - base
    torch.testing.assert_close(half, 0.5 * unit, **TOLERANCES[torch.float32])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_low_precision_params_are_perturbed_in_their_dtype(kernel_path, dtype):
    kernel_path.skip_unsupported(dtype)
    perturb = kernel_path(seeded_perturb_)
    param = perturb(_zeros(dtype=dtype), seed=1, scale=1.0)
    assert param.dtype == dtype
    assert param.float().std().item() == pytest.approx(1.0, abs=0.05)
    noise = perturb(_zeros(), seed=1, scale=1.0)  # the same draw in fp32, rounded once to the dtype
    torch.testing.assert_close(param.float(), noise, **TOLERANCES[dtype])


@pytest.mark.triton
def test_triton_noise_matches_reference_distribution():
    kernel = seeded_perturb_triton_(_zeros((64, 128)), seed=7, scale=1.0)
    reference = seeded_perturb_reference_(_zeros((64, 128)), seed=7, scale=1.0)
    assert_same_distribution(kernel, reference, mean_tol=0.03, std_tol=0.03)
    assert kernel.mean().abs().item() < 0.03 and abs(kernel.std().item() - 1) < 0.03


@pytest.mark.triton
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
