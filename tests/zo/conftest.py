import pytest
import torch
from torch import nn


class LeastSquares(nn.Module):
    """``loss = 0.5 * mean ||x W^T (+ b) - y||^2``: a quadratic whose gradient is known in closed form."""

    def __init__(self, in_features: int = 6, out_features: int = 4, seed: int = 0, bias: bool = False):
        super().__init__()
        torch.manual_seed(seed)
        self.proj = nn.Linear(in_features, out_features, bias=bias)

    def forward(self, x, y, **kwargs):
        residual = self.proj(x) - y
        return {"loss": 0.5 * residual.pow(2).sum(-1).mean(), "logits": residual}

    def true_gradient(self, x, y):
        """The gradient of the weight (the model built without a bias)."""
        residual = x @ self.proj.weight.T - y
        return residual.T @ x / x.shape[0]


class TwoLayers(nn.Module):
    """``tanh(x A^T + a) B^T + b`` regressed on ``y``; with ``use_head=False`` the forward never calls ``head``."""

    def __init__(self, use_head: bool = True, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.body, self.head = nn.Linear(6, 5), nn.Linear(5, 4)
        self.use_head = use_head

    def forward(self, x, y, **kwargs):
        hidden = torch.tanh(self.body(x))
        output = self.head(hidden) if self.use_head else hidden[..., :4]
        return {"loss": 0.5 * (output - y).pow(2).sum(-1).mean()}


@pytest.fixture
def make_two_layers():
    return TwoLayers


@pytest.fixture
def least_squares():
    return LeastSquares()


@pytest.fixture
def make_least_squares():
    return LeastSquares


@pytest.fixture
def low_rank_batch():
    """Inputs of rank 3 in 6 dimensions, and targets."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(32, 3, generator=generator) @ torch.randn(3, 6, generator=generator)
    return {"x": x, "y": torch.randn(32, 4, generator=generator)}
