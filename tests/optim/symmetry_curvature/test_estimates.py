"""The measurements behind the accuracy table of docs/results/symmetry_curvature.md, on cases solved by hand."""

import pytest
import torch
from torch import nn

from hf_ext.optim.symmetry_curvature import (
    CurvatureTask,
    agreement,
    exact_hessian,
    gradients_and_kfac,
    second_moment_estimates,
)


def test_agreement_is_one_for_a_multiple_and_scale_free():
    exact = torch.diag(torch.tensor([3.0, 1.0, -1.0], dtype=torch.float64))
    directions = torch.randn(3, 5, generator=torch.Generator().manual_seed(0)).double()
    same = agreement(2.0 * exact, exact, directions, directions[:, :2])
    assert same["cosine"] == pytest.approx(1.0) and same["action_cosine"] == pytest.approx(1.0)
    assert same["secant_cosine"] == pytest.approx(1.0)
    assert same["relative_error"] == pytest.approx(0.0, abs=1e-12)
    secant = torch.tensor([[1.0], [0.0], [1.0]], dtype=torch.float64)  # H s = (3, 0, -1): cos with s is 2 / (2 10)^0.5
    identity = agreement(torch.eye(3, dtype=torch.float64), exact, directions, secant)
    assert identity["secant_cosine"] == pytest.approx(2 / 20**0.5)
    assert identity["cosine"] == pytest.approx(3 / (3**0.5 * 11**0.5))  # <I, H> / (|I| |H|)
    assert identity["relative_error"] == pytest.approx((1 - identity["cosine"] ** 2) ** 0.5)


def test_estimates_have_the_stated_storage_and_kronecker_baselines():
    gradients = [torch.randn(3, 4, generator=torch.Generator().manual_seed(s)).double() for s in range(5)]
    kfac = (torch.eye(3, dtype=torch.float64), 2 * torch.eye(4, dtype=torch.float64))
    out = second_moment_estimates(gradients, kfac, ["permutation:identity", "scaling:scaling"])
    full = sum(torch.outer(g.flatten(), g.flatten()) for g in gradients) / 5
    torch.testing.assert_close(out["full"][0], full)
    torch.testing.assert_close(out["kfac_style"][0], 2 * torch.eye(12, dtype=torch.float64))
    torch.testing.assert_close(out["scaling:scaling"][0], torch.diag(full.diagonal()))
    assert {k: v[1] for k, v in out.items()} == {
        "full": 78,
        "kfac_style": 16,
        "shampoo_style": 16,
        "permutation:identity": 20,
        "scaling:scaling": 12,
    }


def _least_squares(model, inputs):
    x, y = inputs
    return 0.5 * (model(x) - y).square().sum(1).mean()


def _linear_task(seed=0):
    """Least squares through one linear layer, always on the same batch of 6."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    x, y = torch.randn(6, 3, generator=generator), torch.randn(6, 2, generator=generator)
    return CurvatureTask(nn.Sequential(nn.Linear(3, 2, bias=False)), lambda: (x, y), _least_squares), x


def test_exact_hessian_of_least_squares_is_identity_kron_the_inputs_second_moment():
    task, x = _linear_task()
    expected = torch.kron(torch.eye(2), x.T @ x / 6).double()  # row-major vec(W): rows are output units
    torch.testing.assert_close(exact_hessian(task, "0.weight", task.batch()), expected)


def test_gradients_and_kfac_factors_of_a_linear_layer():
    task, x = _linear_task()
    gradients, dd, aa = gradients_and_kfac(task, "0.weight", batches=2)
    residual = (task.model(x) - task.batch()[1]).detach().double() / 6  # the output gradients of the mean loss
    torch.testing.assert_close(gradients[0], residual.T @ x.double())
    torch.testing.assert_close(gradients[1], gradients[0])  # the same batch twice
    torch.testing.assert_close(aa, torch.cat([x, x]).double().T @ torch.cat([x, x]).double() / 12)
    torch.testing.assert_close(dd, residual.T @ residual / 6)
