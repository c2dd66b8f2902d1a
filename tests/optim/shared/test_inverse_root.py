import pytest
import torch

from hf_ext.optim.shared.inverse_root import inverse_root


def _psd(d, seed):
    x = torch.randn(d, 2 * d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x @ x.T / d


@pytest.mark.parametrize("p", [1, 2, 4])
def test_the_root_raised_to_minus_p_gives_back_the_damped_matrix(p):
    m = _psd(5, 0)
    root = inverse_root(m, p, damping=0.1)
    torch.testing.assert_close(torch.linalg.matrix_power(torch.linalg.inv(root), p), m + 0.1 * torch.eye(5).double())


def test_batches_and_dtype_are_kept():
    batch = torch.stack([_psd(3, s) for s in range(4)]).float()
    roots = inverse_root(batch, 2, damping=1e-3)
    assert roots.dtype == torch.float32
    torch.testing.assert_close(roots[2], inverse_root(batch[2], 2, damping=1e-3))


def test_a_rank_deficient_matrix_is_safe_with_damping():
    v = torch.tensor([[1.0], [2.0], [2.0]], dtype=torch.float64)
    root = inverse_root(v @ v.T, 2, damping=1e-6)
    torch.testing.assert_close(root @ v[:, 0], v[:, 0] / (9 + 1e-6) ** 0.5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"matrix": torch.ones(2, 3), "p": 2}, "must be square"), ({"matrix": torch.eye(2), "p": 0.5}, "`p` must be")],
)
def test_bad_input_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        inverse_root(**kwargs)
