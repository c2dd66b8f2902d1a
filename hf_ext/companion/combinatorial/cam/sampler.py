"""The CTMC sampler: uniform start, T steps of independent per-node flips, K parallel chains, best-of-K decoding.

The network gives each node's flip logit at the current state and time; node i flips at step k with probability
``p_k[i] = sigmoid(logit)`` (the CAM paper's parametrization); training starts the network at the reference
chain of its KL term, ``p = base_flip`` everywhere (:func:`hf_ext.companion.combinatorial.cam.initial_model`).
"""

from dataclasses import dataclass

import torch

from hf_ext._validation import check_count, check_field_type

from .graphs import GraphBatch
from .local_search import local_search_maxcut, local_search_mis
from .model import FlipGNN, check_trained_for
from .problems import check_problem, decode, objective

LOCAL_SEARCH = {"mis": local_search_mis, "maxcut": local_search_maxcut}


def times(steps: int) -> torch.Tensor:
    return torch.arange(steps, dtype=torch.float32) / steps


@dataclass
class Trajectory:
    """``states`` ``(T + 1, K, N)``, the ``flips`` taken from each ``(T, K, N)`` (``x_{k+1} = x_k xor f_k``) and
    the flip probabilities ``probs`` ``(T, K, N)`` they were drawn with."""

    states: torch.Tensor
    flips: torch.Tensor
    probs: torch.Tensor

    def expected_terminal(self) -> torch.Tensor:
        """``E[x_T | x_{T-1}]``, the last step taken in expectation: the scores decoded at inference."""
        x = self.states[-2]
        return x + (1 - 2 * x) * self.probs[-1]


def flip_logits(model: FlipGNN, batch: GraphBatch, states: torch.Tensor, steps: int) -> torch.Tensor:
    """The network's flip logits at every visited state at once: ``(T, K, N)`` -> ``(T, K, N)``."""
    t_count, k, n = states.shape
    t = times(steps)[:t_count].repeat_interleave(k)
    return model(batch, states.reshape(t_count * k, n), t).reshape(t_count, k, n)


@torch.no_grad()
def rollout(model: FlipGNN, batch: GraphBatch, steps: int, chains: int, generator: torch.Generator) -> Trajectory:
    """Run ``chains`` chains for ``steps`` steps from uniform random states, without gradients."""
    check_count("rollout", "steps", steps, 1)
    check_count("rollout", "chains", chains, 1)
    n = batch.num_nodes
    x = (torch.rand(chains, n, generator=generator) < 0.5).float()
    states, flips, probs, t = [x], [], [], times(steps)
    for k in range(steps):
        p = torch.sigmoid(model(batch, x, t[k].expand(chains)))
        f = (torch.rand(chains, n, generator=generator) < p).float()
        x = (x + f) % 2
        states.append(x)
        flips.append(f)
        probs.append(p)
    return Trajectory(torch.stack(states), torch.stack(flips), torch.stack(probs))


@torch.no_grad()
def solve(
    model: FlipGNN, problem: str, batch: GraphBatch, steps: int, chains: int, seed: int = 0,
    local_search: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Best-of-K decoded solution per graph: ``(values (G,), solution (N,))``, values as :func:`objective`;
    each chain's expected terminal state is decoded. With ``local_search``, each chain's decoded solution is then
    improved by the problem's classical local search (MIS 2-improvement, max-cut one-flip) before the best is kept,
    the post-processing neural solvers are usually reported with. A model trained for another problem is refused."""
    check_problem("solve", problem)  # before the model's: that message would suggest training for "tsp"
    check_trained_for("solve", model, problem)
    check_field_type("solve", "seed", seed, int)
    check_field_type("solve", "local_search", local_search, bool)
    trajectory = rollout(model, batch, steps, chains, torch.Generator().manual_seed(seed))
    solutions = decode(problem, batch, trajectory.expected_terminal())
    if local_search:
        solutions = locally_improved(problem, batch, solutions)
    values = objective(problem, batch, solutions)
    best = values.argmax(0)
    return values.max(0).values, solutions[best[batch.graph_of], torch.arange(batch.num_nodes)]


def locally_improved(problem: str, batch: GraphBatch, solutions: torch.Tensor) -> torch.Tensor:
    """``(K, N)`` decoded solutions, each graph's part improved by :data:`LOCAL_SEARCH` (a solution several chains
    decoded to is searched once)."""
    improved = solutions.clone()
    for g, graph in enumerate(batch.graphs):
        low, high = batch.offsets[g], batch.offsets[g + 1]
        searched: dict[bytes, torch.Tensor] = {}
        for k, start in enumerate(solutions[:, low:high].bool().numpy()):
            key = start.tobytes()
            if key not in searched:
                searched[key] = torch.as_tensor(LOCAL_SEARCH[problem](graph, start), dtype=solutions.dtype)
            improved[k, low:high] = searched[key]
    return improved
