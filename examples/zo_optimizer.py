"""Zeroth-order training in a plain torch loop: `ZOOptimizer.step(closure)` runs the perturbed forwards itself.

The closure returns the loss and never calls `backward`: the step evaluates it at `theta +/- eps Z`
(under `torch.no_grad()`) and moves along `Z`. Every parameter group keeps its own learning rate,
so torch's schedulers work as with any optimizer. Runs in seconds on a CPU.
"""

import functools

import torch
from torch import nn

from hf_ext.zo import AGZOConfig, ZOOptimizer, ZOPerturbation

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1))
x = torch.randn(512, 16)
y = torch.sin(x[:, :1]) + 0.5 * x[:, 1:2]


def batch_loss(rows: torch.Tensor) -> torch.Tensor:
    """The loss on `rows`; the step calls it at perturbed weights, and it never calls backward."""
    return nn.functional.mse_loss(model(x[rows]), y[rows])


optimizer = ZOOptimizer(ZOPerturbation(model, AGZOConfig(rank=4, eps=1e-3)), lr=0.05, seed=0)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=500)
losses = []
for _ in range(500):
    rows = torch.randint(0, len(x), (64,))
    losses.append(optimizer.step(functools.partial(batch_loss, rows)).item())
    scheduler.step()
first, last = sum(losses[:50]) / 50, sum(losses[-50:]) / 50
print(f"ZOOptimizer: mean loss {first:.3f} over the first 50 steps, {last:.3f} over the last 50")
