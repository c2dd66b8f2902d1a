import pytest
import torch
from torch import nn
from transformers import MixtralConfig, MixtralForCausalLM


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


def tiny_mixtral(seed: int = 0) -> MixtralForCausalLM:
    """One Mixtral block, 4 experts of which each token takes 2: a router and two expert tensors to perturb."""
    torch.manual_seed(seed)
    config = MixtralConfig(
        hidden_size=16,
        intermediate_size=24,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=32,
        num_local_experts=4,
        num_experts_per_tok=2,
    )
    return MixtralForCausalLM(config).eval()


@pytest.fixture
def make_tiny_mixtral():
    return tiny_mixtral


@pytest.fixture
def token_batch():
    ids = torch.randint(0, 32, (2, 7), generator=torch.Generator().manual_seed(2))
    return {"input_ids": ids, "labels": ids}
