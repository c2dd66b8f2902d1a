"""The CTMC sampler: uniform start, T steps of independent per-node flips, K parallel chains, best-of-K decoding.

The base (uncontrolled) chain flips each node at step k with probability ``0.5 (T - k) / T``: it starts at the
uniform distribution's mixing rate and freezes towards the end; the network adds a learned control to its logit.
"""

from dataclasses import dataclass

import torch

from .graphs import GraphBatch
from .model import FlipGNN
from .problems import decode, objective


def base_logits(steps: int) -> torch.Tensor:
    """Logit of the base chain's flip probability at each step, ``(T,)``."""
    p = 0.5 * (steps - torch.arange(steps, dtype=torch.float32)) / steps
    return torch.log(p) - torch.log1p(-p)


def times(steps: int) -> torch.Tensor:
    return torch.arange(steps, dtype=torch.float32) / steps


@dataclass
class Trajectory:
    """``states`` ``(T + 1, K, N)`` and the ``flips`` taken from each, ``(T, K, N)``: ``x_{k+1} = x_k xor f_k``."""

    states: torch.Tensor
    flips: torch.Tensor


def flip_logits(model: FlipGNN, batch: GraphBatch, states: torch.Tensor, steps: int) -> torch.Tensor:
    """Flip logits at every visited state at once: ``states`` ``(T, K, N)`` -> ``(T, K, N)``."""
    t_count, k, n = states.shape
    t = times(steps)[:t_count].repeat_interleave(k)
    control = model(batch, states.reshape(t_count * k, n), t).reshape(t_count, k, n)
    return control + base_logits(steps)[:t_count, None, None]


@torch.no_grad()
def rollout(model: FlipGNN, batch: GraphBatch, steps: int, chains: int, generator: torch.Generator) -> Trajectory:
    """Run ``chains`` chains for ``steps`` steps from uniform random states, without gradients."""
    if steps < 1 or chains < 1:
        raise ValueError(f"rollout: `steps` and `chains` must be >= 1, got steps={steps}, chains={chains}")
    n = batch.num_nodes
    x = (torch.rand(chains, n, generator=generator) < 0.5).float()
    states, flips = [x], []
    for k in range(steps):
        logits = _step_logits(model, batch, x, k, steps)
        f = (torch.rand(chains, n, generator=generator) < torch.sigmoid(logits)).float()
        x = (x + f) % 2
        states.append(x)
        flips.append(f)
    return Trajectory(torch.stack(states), torch.stack(flips))


def _step_logits(model: FlipGNN, batch: GraphBatch, x: torch.Tensor, k: int, steps: int) -> torch.Tensor:
    return model(batch, x, times(steps)[k].expand(x.shape[0])) + base_logits(steps)[k]


@torch.no_grad()
def solve(
    model: FlipGNN, problem: str, batch: GraphBatch, steps: int, chains: int, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Best-of-K decoded solution per graph: ``(values (G,), solution (N,))``, values as :func:`objective`."""
    trajectory = rollout(model, batch, steps, chains, torch.Generator().manual_seed(seed))
    solutions = decode(problem, batch, trajectory.states[-1])
    values = objective(problem, batch, solutions)
    best = values.argmax(0)
    return values.max(0).values, solutions[best[batch.graph_of], torch.arange(batch.num_nodes)]
