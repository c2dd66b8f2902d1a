import pytest
import torch

from hf_ext.kernels import (
    lowrank_perturb_,
    lowrank_perturb_reference_,
    lowrank_perturb_triton_,
    seeded_normal,
    seeded_normal_reference,
    seeded_normal_triton,
    seeded_perturb_,
)
from hf_ext.kernels.testing import assert_close_to_reference, assert_same_distribution, kernel_device

# Both paths add the fp32 update to the weight in fp32 and round once to its dtype.
TOLERANCES = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-5},
    torch.float16: {"atol": 2e-3, "rtol": 2e-3},
    torch.bfloat16: {"atol": 1.6e-2, "rtol": 1.6e-2},
}


def _basis(in_features, rank, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.linalg.qr(torch.randn(in_features, rank, generator=generator))[0].to(kernel_device())


@pytest.mark.parametrize(("rows", "cols", "rank"), [(37, 45, 5), (70, 130, 20), (8, 8, 1)])
def test_lowrank_update_is_noise_times_basis_transpose(kernel_path, rows, cols, rank):
    """W += c N U^T, with N exactly the tensor seeded_normal returns on the same path."""
    weight = torch.randn(rows, cols, device=kernel_device())
    basis = _basis(cols, rank)  # column-major, as torch.linalg.qr returns it
    expected = weight + 0.5 * kernel_path(seeded_normal)((rows, rank), 7, kernel_device()) @ basis.T
    updated = kernel_path(lowrank_perturb_)(weight.clone(), basis, 7, 0.5)
    assert_close_to_reference(updated, expected, **TOLERANCES[torch.float32])


def test_row_blocks_get_the_whole_weights_noise_rows(kernel_path):
    """Issue 36: an FSDP2 shard (a block of rows) is updated as those rows of the whole weight are: bit for bit on
    the reference path; on the Triton path within 1e-6 (a few float32 ulps of the update), because the interpreter
    runs ``tl.dot`` on numpy's BLAS, whose rounding of a row depends on its place in the block on some CPUs (seen on
    AMD EPYC: 3e-8). A shard given other rows of the noise would be off by the noise itself (about 0.5)."""
    lowrank = kernel_path(lowrank_perturb_)
    weight, basis = torch.randn(37, 45, device=kernel_device()), _basis(45, 5)
    whole = lowrank(weight.clone(), basis, 7, 0.5)
    shards = [lowrank(weight[start:stop].clone(), basis, 7, 0.5, start, 37) for start, stop in ((0, 19), (19, 37))]
    if kernel_path.name == "reference":
        assert torch.equal(torch.cat(shards), whole)
    else:
        torch.testing.assert_close(torch.cat(shards), whole, rtol=0, atol=1e-6)


def test_seeded_normal_is_the_noise_seeded_perturb_adds(kernel_path):
    z = kernel_path(seeded_normal)((33, 17), 4, kernel_device())
    assert torch.equal(z, kernel_path(seeded_normal)((33, 17), 4, kernel_device()))
    assert torch.equal(kernel_path(seeded_perturb_)(torch.zeros(33, 17, device=kernel_device()), 4, 1.0), z)


def test_lowrank_negative_scale_undoes_it(kernel_path):
    lowrank = kernel_path(lowrank_perturb_)
    weight = torch.randn(40, 24, device=kernel_device())
    original, basis = weight.clone(), _basis(24, 4)
    lowrank(weight, basis, 3, 1e-2)
    assert not torch.equal(weight, original)
    lowrank(weight, basis, 3, -1e-2)
    torch.testing.assert_close(weight, original, atol=1e-6, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_lowrank_half_precision_weight(kernel_path, dtype):
    kernel_path.skip_unsupported(dtype)
    weight = torch.zeros(32, 48, device=kernel_device(), dtype=dtype)
    basis = _basis(48, 3)
    expected = kernel_path(seeded_normal)((32, 3), 2, kernel_device()) @ basis.T
    updated = kernel_path(lowrank_perturb_)(weight, basis, 2, 1.0)
    assert updated.dtype == dtype
    assert_close_to_reference(updated.float(), expected, **TOLERANCES[dtype])


@pytest.mark.triton
def test_triton_normal_matches_reference_distribution():
    assert_same_distribution(
        seeded_normal_triton((128, 64), 5, kernel_device()),
        seeded_normal_reference((128, 64), 5, kernel_device()),
        mean_tol=0.03,
        std_tol=0.03,
    )


def test_dispatch_on_cpu_uses_the_reference():
    weight, basis = torch.randn(9, 6), _basis(6, 2).cpu()
    expected = lowrank_perturb_reference_(weight.clone(), basis, 1, 0.3)
    assert torch.equal(lowrank_perturb_(weight, basis, 1, 0.3), expected)
    assert torch.equal(seeded_normal((4, 4), 1, "cpu"), seeded_normal_reference((4, 4), 1, "cpu"))


@pytest.mark.parametrize(
    ("weight", "basis", "seed", "error", "match"),
    [
        (torch.zeros(4, 6), torch.zeros(5, 2), 0, ValueError, r"need `weight` \(out, in\) and `basis` \(in, r\)"),
        (torch.zeros(4, 6, dtype=torch.int32), torch.zeros(6, 2), 0, TypeError, "floating"),
        (torch.zeros(4, 6), torch.zeros(6, 2), -3, ValueError, "`seed`"),
    ],
)
def test_lowrank_bad_input(weight, basis, seed, error, match):
    with pytest.raises(error, match=match):
        lowrank_perturb_(weight, basis, seed, 1.0)


@pytest.mark.triton
def test_triton_lowrank_rejects_column_major_weight():
    with pytest.raises(ValueError, match="row-major"):
        lowrank_perturb_triton_(torch.zeros(6, 4, device=kernel_device()).t(), _basis(6, 2), 0, 1.0)


def test_compiled_seeded_kernels_draw_the_noise_eager_ones_do():
    """Traced by inductor, the seeded torch.Generator draws were replaced (0.46 apart): the kernels run eagerly."""
    weight, basis = torch.randn(8, 6, device=kernel_device()), _basis(6, 2)
    calls = {
        "seeded_normal": lambda w: seeded_normal((8, 2), 1234, w.device),
        "seeded_perturb_": lambda w: seeded_perturb_(w, 1234, 0.5),
        "lowrank_perturb_": lambda w: lowrank_perturb_(w, basis, 1234, 0.5),
    }
    for name, call in calls.items():
        torch._dynamo.reset()
        assert torch.equal(torch.compile(call, backend="inductor")(weight.clone()), call(weight.clone())), name
