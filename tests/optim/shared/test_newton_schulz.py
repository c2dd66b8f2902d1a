from unittest import mock

import pytest
import torch

from hf_ext.optim import newton_schulz
from hf_ext.optim.shared.newton_schulz import CUBIC, QUINTIC


def _matrix(rows, cols, seed=0):
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("shape", [(16, 16), (12, 40), (40, 12)])
def test_the_cubic_iteration_converges_to_u_v_transposed(shape):
    matrix = _matrix(*shape)
    u, _, vh = torch.linalg.svd(matrix, full_matrices=False)
    torch.testing.assert_close(newton_schulz(matrix, steps=60, coefficients=CUBIC), u @ vh, atol=1e-8, rtol=0)


def _quintic_map(s: torch.Tensor) -> torch.Tensor:
    """Five quintic steps on each singular value alone: what the iteration does to ``s`` (of ``G / ||G||_F``)."""
    a, b, c = QUINTIC
    for _ in range(5):
        s = a * s + b * s**3 + c * s**5
    return s


@pytest.mark.parametrize("shape", [(24, 12), (12, 24)])
def test_the_quintic_iteration_maps_each_singular_value_as_documented(shape):
    """Into [0.68, 1.21] for singular values of at least 1.5e-3 of the Frobenius norm, about 485 times them below."""
    generator = torch.Generator().manual_seed(0)
    u = torch.linalg.qr(torch.randn(shape[0], 12, generator=generator, dtype=torch.float64))[0]
    v = torch.linalg.qr(torch.randn(shape[1], 12, generator=generator, dtype=torch.float64))[0]
    raw = torch.tensor([1.0, 0.8, 0.5, 0.3, 0.1, 0.03, 1e-2, 3e-3, 1.6e-3, 1e-3, 1e-4, 1e-5], dtype=torch.float64)
    s = raw / raw.norm()
    result = torch.linalg.svdvals(newton_schulz(u @ torch.diag(raw) @ v.T))
    expected = _quintic_map(s)
    torch.testing.assert_close(result, expected.sort(descending=True).values, atol=1e-10, rtol=0)
    assert ((expected >= 0.68) & (expected <= 1.21))[s >= 1.5e-3].all()
    assert (expected[s < 1.5e-3] < 0.68).all()
    torch.testing.assert_close(
        expected[s < 2e-4] / s[s < 2e-4], torch.full((2,), QUINTIC[0] ** 5, dtype=torch.float64), rtol=1e-3, atol=0
    )


@pytest.mark.parametrize("shape", [(32, 32), (24, 64), (64, 24)])
def test_the_quintic_iteration_keeps_the_singular_vectors(shape):
    matrix = _matrix(*shape).float()
    result = newton_schulz(matrix)
    assert result.shape == matrix.shape and result.dtype == torch.float32
    u, _, vh = torch.linalg.svd(matrix, full_matrices=False)
    inner = u.T @ result @ vh.T  # diagonal: the same singular vectors as the input
    assert (inner - torch.diag(torch.diagonal(inner))).abs().max() < 1e-3


@pytest.mark.parametrize("shape", [(48, 20), (20, 48), (16, 16)])
def test_is_torch_optim_muons_map(shape):
    """torch's iteration hard-codes bfloat16 (``grad.bfloat16()``); run in float64 instead, it is our map to within
    float64 rounding: each step rounds about 8 times (2^-53 each, relative), and a later step multiplies an error by
    at most max |p'| <= 4.3 on [0, 1.21]; 8 * 2^-53 * (1 + 4.3 + ... + 4.3^4) < 5e-13, against entries below 1.21.
    (In bfloat16 the two differ by up to 0.03 per entry: the same amplification, of 2^-8 instead of 2^-53.)"""
    from torch.optim._muon import DEFAULT_A, DEFAULT_B, DEFAULT_C, _zeropower_via_newtonschulz

    assert (DEFAULT_A, DEFAULT_B, DEFAULT_C) == QUINTIC
    matrix = _matrix(*shape)
    with mock.patch.object(torch.Tensor, "bfloat16", lambda tensor: tensor.double()):
        theirs = _zeropower_via_newtonschulz(matrix, QUINTIC, 5, 1e-7)
    assert theirs.dtype == torch.float64
    torch.testing.assert_close(newton_schulz(matrix), theirs, atol=5e-13, rtol=0)


@pytest.mark.parametrize("shape", [(4, 12, 8), (4, 8, 12), (2, 3, 16, 16)])
def test_a_batch_is_each_matrix_orthogonalized_alone(shape):
    """A stack of experts' matrices: each result is that matrix's own (the old code normalized the whole stack by one
    Frobenius norm and, for a 3-D tensor, refused it)."""
    stack = torch.randn(*shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    batched = newton_schulz(stack, steps=60, coefficients=CUBIC)
    alone = torch.stack([newton_schulz(m, steps=60, coefficients=CUBIC) for m in stack.reshape(-1, *shape[-2:])])
    torch.testing.assert_close(batched, alone.reshape(shape), atol=1e-12, rtol=0)
    u, _, vh = torch.linalg.svd(stack, full_matrices=False)
    torch.testing.assert_close(batched, u @ vh, atol=1e-8, rtol=0)


@pytest.mark.parametrize("shape", [(4, 12, 8), (4, 8, 12), (3, 64, 16)])
def test_in_bfloat16_each_matrix_of_a_batch_is_torch_optim_muons_bit_for_bit(shape):
    """The same products in the same dtype as torch's iteration (addmm there, baddbmm here): equal on CPU."""
    from torch.optim._muon import _zeropower_via_newtonschulz

    stack = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    theirs = torch.stack([_zeropower_via_newtonschulz(m, QUINTIC, 5, 1e-7) for m in stack])
    assert torch.equal(newton_schulz(stack, dtype=torch.bfloat16), theirs.float())


def test_refuses_what_it_cannot_orthogonalize():
    with pytest.raises(ValueError, match="`matrix` must have 2 or more dimensions"):
        newton_schulz(torch.ones(3))
    with pytest.raises(ValueError, match="`steps` must be a positive integer"):
        newton_schulz(torch.ones(2, 2), steps=0)
