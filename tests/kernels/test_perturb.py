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


@pytest.mark.parametrize("rows", [(19, 18), (13, 13, 11), (37, 0)], ids=["2_shards", "3_shards", "empty_shard"])
def test_shards_get_the_whole_tensors_noise_at_their_own_indices(kernel_path, rows):
    """Issue 36: FSDP2 keeps a block of rows per rank; a 91-column row starts the blocks at flat indices that are not
    multiples of 4 (the Triton kernel's Philox lanes), and the last rank may hold none."""
    perturb = kernel_path(seeded_perturb_)
    whole = perturb(_zeros(), seed=11, scale=1.0)
    shards, first = [], 0
    for count in rows:
        shards.append(perturb(_zeros((count, SHAPE[1])), seed=11, scale=1.0, first=first, whole_numel=whole.numel()))
        first += shards[-1].numel()
    assert torch.equal(torch.cat(shards), whole)


@pytest.mark.parametrize(("first", "whole_numel"), [(-1, 10), (5, 7)])
def test_a_shard_outside_its_whole_tensor_is_refused(first, whole_numel):
    with pytest.raises(ValueError, match="whole_numel"):
        seeded_perturb_(torch.zeros(3), seed=0, scale=1.0, first=first, whole_numel=whole_numel)


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
