"""The baseline a user would reach for first: a two-layer ReLU network trained by mini-batch SGD (torch)."""

from collections.abc import Callable

import numpy as np
import torch
from torch import nn


def fit_two_layer_network(
    X: np.ndarray,
    y: np.ndarray,
    *,
    width: int = 64,
    epochs: int = 100,
    batch_size: int = 64,
    lr: float = 0.05,
    seed: int = 0,
) -> Callable[[np.ndarray], np.ndarray]:
    """Train ``a^T relu(W x + b) + c`` (PyTorch's default initialisation) on the squared error; returns ``predict``.

    ``epochs`` passes of mini-batch SGD over ``X``: with ``epochs`` equal to a full-batch method's iterations,
    both see the same number of per-sample gradients.
    """
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(X.shape[1], width), nn.ReLU(), nn.Linear(width, 1)).double()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    inputs, targets = torch.as_tensor(X, dtype=torch.float64), torch.as_tensor(y, dtype=torch.float64)
    for _ in range(epochs):
        for batch in torch.randperm(len(inputs), generator=generator).split(batch_size):
            optimizer.zero_grad()
            loss = 0.5 * (model(inputs[batch]).squeeze(-1) - targets[batch]).square().mean()
            loss.backward()
            optimizer.step()

    @torch.no_grad()
    def predict(X_new: np.ndarray) -> np.ndarray:
        return model(torch.as_tensor(X_new, dtype=torch.float64)).squeeze(-1).numpy()

    return predict
