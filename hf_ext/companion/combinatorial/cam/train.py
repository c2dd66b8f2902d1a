"""Training by combinatorial adjoint matching (CAM), and the REINFORCE baseline in the same loop.

CAM: roll out without gradients; the adjoint at the end is each node's flip energy change at the terminal state;
it is carried back through the chain (``x_{k+1} = x_k xor f_k`` with the flips held fixed has the identity as its
Jacobian, and, as in adjoint matching's lean adjoint, the network's own dependence on the state is dropped), so a
flip at a visited state is valued by what it does to the terminal energy. The network's clean-state prediction at
every visited state is fitted by cross-entropy to the tilted target ``P(x_1[i] = x_T[i]) = sigmoid(a[i] / tau)``
(keep the terminal value in proportion to what changing it would cost), the Gibbs-optimal choice of the
entropy-regularised problem at temperature ``tau``, annealed from ``tau_start`` to ``tau_end``.
REINFORCE: ``(E(x_T) - mean over the K chains) * log p(trajectory)``.
"""

import math
import time

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .config import CAMConfig
from .graphs import Graph, batch_graphs
from .model import FlipGNN
from .problems import energy, flip_delta
from .sampler import Trajectory, clean_logits, flip_probability, jump_rates, rollout


def adjoint_targets(problem: str, batch, trajectory: Trajectory, beta: float) -> torch.Tensor:
    """Discrete adjoint ``a_k[i]`` at every visited state ``(T, K, N)``: the terminal energy change caused by
    flipping node i at step k with the later flips held fixed; ``a_T = dE(x_T)``, ``a_k = a_{k+1}``."""
    adjoint = flip_delta(problem, batch, trajectory.states[-1], beta)
    carried = [adjoint]
    for _ in range(trajectory.flips.shape[0] - 1):
        carried.append(carried[-1])  # identity Jacobian of the xor transition
    return torch.stack(carried[::-1])


def temperature(config: CAMConfig, progress: float) -> float:
    return config.tau_start * (config.tau_end / config.tau_start) ** min(max(progress, 0.0), 1.0)


def cam_loss(model: FlipGNN, config: CAMConfig, batch, trajectory: Trajectory, tau: float) -> torch.Tensor:
    """Cross-entropy of the network's clean-state predictions against the adjoint-tilted targets."""
    adjoint = adjoint_targets(config.problem, batch, trajectory, config.beta)
    targets = torch.sigmoid((2 * trajectory.states[-1] - 1) * adjoint / tau)
    logits = clean_logits(model, batch, trajectory.states[:-1], config.steps)
    return F.binary_cross_entropy_with_logits(logits, targets)


def reinforce_loss(model: FlipGNN, config: CAMConfig, batch, trajectory: Trajectory, tau: float) -> torch.Tensor:
    """Score-function loss with the K-chain mean as baseline, energies per node so graph sizes weigh alike."""
    sizes = torch.as_tensor([max(g.num_nodes, 1) for g in batch.graphs], dtype=torch.float32)
    terminal = energy(config.problem, batch, trajectory.states[-1], config.beta) / sizes
    advantage = (terminal - terminal.mean(0, keepdim=True)) / tau
    logits = clean_logits(model, batch, trajectory.states[:-1], config.steps)
    gamma = jump_rates(config.steps)[:, None, None]
    p = flip_probability(logits, trajectory.states[:-1], gamma).clamp(1e-6, 1 - 1e-6)
    logp = (trajectory.flips * p.log() + (1 - trajectory.flips) * (-p).log1p()).sum(0)  # (K, N)
    per_graph = logp.new_zeros(logp.shape[0], batch.num_graphs).index_add_(1, batch.graph_of, logp)
    return (advantage * per_graph).mean() / config.steps


LOSSES = {"cam": cam_loss, "reinforce": reinforce_loss}


def train(config: CAMConfig, graphs: list[Graph], model: FlipGNN | None = None, progress: bool = True):
    """Train a :class:`FlipGNN` on ``graphs`` by ``config.method``; returns ``(model, history)``, the history
    holding per step the mean terminal energy per node of the rollouts and the loss."""
    if not graphs:
        raise ValueError("train: `graphs` must hold at least one training Graph")
    torch.manual_seed(config.seed)
    model = model or FlipGNN(config.hidden, config.layers)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    generator = torch.Generator().manual_seed(config.seed)
    history, start = [], time.perf_counter()
    for step in tqdm(range(config.train_steps), desc=f"cam[{config.method}]", disable=not progress):
        elapsed = time.perf_counter() - start
        if elapsed > config.train_seconds:
            break
        picks = torch.randint(len(graphs), (config.graphs_per_step,), generator=generator).tolist()
        batch = batch_graphs([graphs[i] for i in picks])
        trajectory = rollout(model, batch, config.steps, config.chains, generator)
        progress_fraction = max(step / config.train_steps, elapsed / config.train_seconds)
        loss = LOSSES[config.method](model, config, batch, trajectory, temperature(config, progress_fraction))
        if not math.isfinite(loss.item()):
            raise FloatingPointError(f"train: the {config.method} loss is {loss.item()} at step {step}")
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        optimizer.step()
        terminal = energy(config.problem, batch, trajectory.states[-1], config.beta).sum(1) / batch.num_nodes
        history.append({"step": step, "loss": loss.item(), "energy_per_node": float(terminal.mean())})
    return model, history


def training_signal_variance(model: FlipGNN, config: CAMConfig, graphs: list[Graph], repeats: int = 16) -> dict:
    """The variance of the gradient a method feeds the optimizer, measured directly: ``repeats`` independent
    rollouts on the same graphs and weights; returns the total variance ``E||g - mean g||^2`` and its ratio to
    ``||mean g||^2`` (the relative variance, comparable across losses of different scale)."""
    batch = batch_graphs(graphs)
    generator = torch.Generator().manual_seed(config.seed + 1)
    grads = []
    for _ in range(repeats):
        trajectory = rollout(model, batch, config.steps, config.chains, generator)
        model.zero_grad()
        LOSSES[config.method](model, config, batch, trajectory, config.tau_end).backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
    grads = torch.stack(grads)
    variance = float(grads.var(0, unbiased=True).sum())
    return {"variance": variance, "relative_variance": variance / max(float(grads.mean(0).square().sum()), 1e-30)}
