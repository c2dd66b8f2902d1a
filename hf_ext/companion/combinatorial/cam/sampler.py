"""The CTMC sampler: uniform start, T steps of independent per-node flips, K parallel chains, best-of-K decoding.

The network predicts the clean end state (``P(x_1[i] = 1 | x_t, t)``, a logit per node) and node i jumps to it
at step k with probability ``gamma_k P(x_1[i] != x_k[i])``, ``gamma_k = 1 / (T - k)``: the discretised bridge
of a uniform-noise discrete diffusion, which lands on a sample of the prediction at the last step.
"""

from dataclasses import dataclass

import torch

from .graphs import GraphBatch
from .model import FlipGNN
from .problems import decode, objective


def jump_rates(steps: int) -> torch.Tensor:
    """``gamma_k = 1 / (T - k)`` for each step, ``(T,)``."""
    return 1 / (steps - torch.arange(steps, dtype=torch.float32))


def times(steps: int) -> torch.Tensor:
    return torch.arange(steps, dtype=torch.float32) / steps


def flip_probability(clean_logits: torch.Tensor, x: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """Probability that each node flips now: ``gamma P(x_1 != x)``."""
    p_one = torch.sigmoid(clean_logits)
    return gamma * torch.where(x > 0, 1 - p_one, p_one)


@dataclass
class Trajectory:
    """``states`` ``(T + 1, K, N)`` and the ``flips`` taken from each, ``(T, K, N)``: ``x_{k+1} = x_k xor f_k``."""

    states: torch.Tensor
    flips: torch.Tensor


def clean_logits(model: FlipGNN, batch: GraphBatch, states: torch.Tensor, steps: int) -> torch.Tensor:
    """The network's clean-state logits at every visited state at once: ``(T, K, N)`` -> ``(T, K, N)``."""
    t_count, k, n = states.shape
    t = times(steps)[:t_count].repeat_interleave(k)
    return model(batch, states.reshape(t_count * k, n), t).reshape(t_count, k, n)


@torch.no_grad()
def rollout(model: FlipGNN, batch: GraphBatch, steps: int, chains: int, generator: torch.Generator) -> Trajectory:
    """Run ``chains`` chains for ``steps`` steps from uniform random states, without gradients."""
    if steps < 1 or chains < 1:
        raise ValueError(f"rollout: `steps` and `chains` must be >= 1, got steps={steps}, chains={chains}")
    n = batch.num_nodes
    x = (torch.rand(chains, n, generator=generator) < 0.5).float()
    states, flips, gamma, t = [x], [], jump_rates(steps), times(steps)
    for k in range(steps):
        p = flip_probability(model(batch, x, t[k].expand(chains)), x, gamma[k])
        f = (torch.rand(chains, n, generator=generator) < p).float()
        x = (x + f) % 2
        states.append(x)
        flips.append(f)
    return Trajectory(torch.stack(states), torch.stack(flips))


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
