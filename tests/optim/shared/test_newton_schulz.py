import pytest
import torch

from hf_ext.optim import newton_schulz
from hf_ext.optim.shared.newton_schulz import CUBIC


def _matrix(rows, cols, seed=0):
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("shape", [(16, 16), (12, 40), (40, 12)])
def test_the_cubic_iteration_converges_to_u_v_transposed(shape):
    matrix = _matrix(*shape)
    u, _, vh = torch.linalg.svd(matrix, full_matrices=False)
    torch.testing.assert_close(newton_schulz(matrix, steps=60, coefficients=CUBIC), u @ vh, atol=1e-8, rtol=0)


@pytest.mark.parametrize("shape", [(32, 32), (24, 64), (64, 24)])
def test_the_quintic_iteration_orthogonalizes_up_to_its_documented_band(shape):
    matrix = _matrix(*shape).float()
    result = newton_schulz(matrix)
    singular_values = torch.linalg.svdvals(result)
    assert result.shape == matrix.shape and result.dtype == torch.float32
    assert singular_values.min() > 0.6 and singular_values.max() < 1.25
    # Same singular vectors as the input: U^T result V is diagonal.
    u, _, vh = torch.linalg.svd(matrix, full_matrices=False)
    inner = u.T @ result @ vh.T
    assert (inner - torch.diag(torch.diagonal(inner))).abs().max() < 1e-3


def test_matches_torch_optim_muon_on_the_same_matrix():
    from torch.optim._muon import DEFAULT_A, DEFAULT_B, DEFAULT_C, _zeropower_via_newtonschulz

    matrix = _matrix(48, 20).float()
    theirs = _zeropower_via_newtonschulz(matrix, (DEFAULT_A, DEFAULT_B, DEFAULT_C), 5, 1e-7)
    ours = newton_schulz(matrix, dtype=torch.bfloat16).to(theirs.dtype)
    torch.testing.assert_close(ours, theirs, atol=2e-2, rtol=0)
    # In float32 (our default) it is the same map, without bfloat16's rounding.
    assert (newton_schulz(matrix) - theirs.float()).abs().max() < 5e-2


def test_refuses_what_it_cannot_orthogonalize():
    with pytest.raises(ValueError, match="`matrix` must be 2-D"):
        newton_schulz(torch.ones(3))
    with pytest.raises(ValueError, match="`steps` must be a positive integer"):
        newton_schulz(torch.ones(2, 2), steps=0)
