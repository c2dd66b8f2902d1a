"""The step-size sensitivity measures, against hand computation on small curves."""

import math

import pytest
import torch
from torch import nn

from hf_ext.optim import near_best_width, ratio_at_multiple, reference_optimum

GRID = [1e-3, 1e-2, 1e-1, 1.0, 10.0]


def test_width_interpolates_to_the_threshold_in_log_log():
    # best 1.0 at 0.1; threshold 1.1. Left neighbour 1.21 = 1.1^2 -> crossing halfway (0.5 decade);
    # right neighbour diverged -> the range stops at 0.1.
    width, censored = near_best_width(GRID, [5.0, 1.21, 1.0, math.inf, math.inf])
    assert width == pytest.approx(0.5) and not censored


def test_a_flat_curve_is_as_wide_as_the_grid_and_marked_censored():
    width, censored = near_best_width(GRID, [2.0, 1.05, 1.0, 1.02, 1.08])
    assert width == pytest.approx(3 + math.log10(1.1 / 1.05) / math.log10(2.0 / 1.05)) and censored


def test_ratio_at_ten_times_the_best():
    assert ratio_at_multiple(GRID, [5.0, 2.0, 1.0, 3.0, math.inf]) == pytest.approx(3.0)
    assert ratio_at_multiple(GRID, [5.0, 2.0, 1.0, 3.0, 0.5]) is None  # best at the last step size
    assert ratio_at_multiple(GRID, [5.0, 2.0, 1.0, math.inf, 9.0]) == math.inf


def test_bad_grid_is_refused():
    with pytest.raises(ValueError, match="must be positive and increasing"):
        near_best_width([1.0, 0.1], [1.0, 2.0])


def test_the_reference_optimum_of_ridge_regression_is_its_closed_form():
    generator = torch.Generator().manual_seed(0)
    x, y = torch.randn(40, 5, generator=generator, dtype=torch.float64), torch.randn(40, generator=generator)
    model = nn.Linear(5, 1, bias=False)
    nn.init.zeros_(model.weight)

    def loss(model):
        return (model(x)[:, 0] - y).square().mean() / 2 + 0.05 * model.weight.square().sum()

    assert reference_optimum(model, loss) is model and model.weight.dtype == torch.float64
    exact = torch.linalg.solve(x.T @ x / 40 + 0.1 * torch.eye(5, dtype=torch.float64), x.T @ y.double() / 40)
    # the loss is flat to 1e-16 (L-BFGS's tolerance) within 1e-8 of the minimiser
    torch.testing.assert_close(model.weight[0].detach(), exact, rtol=0, atol=1e-8)
    found = loss(model).item()
    with torch.no_grad():
        model.weight.copy_(exact[None])
    assert found == pytest.approx(loss(model).item(), rel=1e-15, abs=0)
