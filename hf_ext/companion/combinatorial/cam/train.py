"""Training by combinatorial adjoint matching (CAM), and the REINFORCE baseline in the same loop.

Both optimise one objective: the expected terminal energy ``E[E(x_T)]`` plus ``tau`` times the KL divergence of the
flip decisions from a reference chain flipping each node with probability ``config.reference_flip`` (``tau``
annealed from ``tau_start`` to ``config.final_temperature``). A lazy reference matters: when every node flips with
probability 1/2 the next state is independent of the current one, every carried adjoint is zero in expectation, and
max-cut (whose energy gradient averages to zero over a random state) gets no signal at all.
CAM: roll out without gradients, carry the discrete adjoint ``a_k ~ dE[E(x_T) | x_k]/dx_k`` backward along each
trajectory (:func:`adjoint_targets`); flipping node i at step k then changes the expected terminal energy by
``-benefit = (1 - 2 x_k[i]) a_{k+1}[i]``, and the network's flip probability ``p`` at that state is fitted by
``-p benefit + tau KL(p || reference_flip)``: linear in the benefit, so over rollouts it is minimised by the flip
probability optimal under the KL term, ``sigmoid(logit(reference_flip) + E[benefit | x] / tau)``.
REINFORCE: the score-function gradient of the same objective, the mean over the K chains of a graph as baseline.
"""

import math
import time

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from hf_ext._random import seeded_global_rng

from .adjoint import flip_benefit
from .config import CAMConfig
from .diagnostics import chain_diagnostics
from .graphs import Graph, batch_graphs
from .model import FlipGNN, check_trained_for
from .problems import energy
from .sampler import Trajectory, flip_logits, rollout


def temperature(config: CAMConfig, progress: float) -> float:
    return config.tau_start * (config.final_temperature / config.tau_start) ** min(max(progress, 0.0), 1.0)


def base_logit(config: CAMConfig) -> float:
    return math.log(config.reference_flip / (1 - config.reference_flip))


def initial_model(config: CAMConfig) -> FlipGNN:
    """The network ``train`` starts from, seeded by ``config.seed`` (the global generator is left as it was): the
    reference chain, ``config.reference_flip``."""
    with seeded_global_rng(config.seed):  # torch.nn's initialisers draw from the global generator
        model = FlipGNN(config.hidden, config.layers, config.neighbour_aggregation, config.problem)
    torch.nn.init.constant_(model.head.bias, base_logit(config))
    return model


def bernoulli_kl(logits: torch.Tensor, reference_logit: float) -> torch.Tensor:
    """``KL(Bernoulli(sigmoid(logits)) || Bernoulli(sigmoid(reference_logit)))``, elementwise."""
    reference = torch.full_like(logits, reference_logit)
    p = torch.sigmoid(logits)
    return p * (F.logsigmoid(logits) - F.logsigmoid(reference)) + (1 - p) * (
        F.logsigmoid(-logits) - F.logsigmoid(-reference)
    )


def cam_loss(model: FlipGNN, config: CAMConfig, batch, trajectory: Trajectory, tau: float) -> torch.Tensor:
    """``mean(-p * benefit + tau * KL(p || reference_flip))`` over steps, chains and nodes, ``p`` the network's flip
    probabilities at the visited states. Linear in the benefit, so it is minimised in expectation by
    ``p = sigmoid(logit(reference_flip) + E[benefit | x] / tau)``. A cross-entropy fit to each rollout's
    ``sigmoid(logit(reference_flip) + benefit / tau)``, our earlier loss, converges to the mean of the sigmoid instead,
    pulled toward the reference wherever the benefit is noisy: it kept MIS chains at the uniform chain before their
    last step (docs/results/cam.md, *Why MIS did not learn*)."""
    benefit = flip_benefit(config.problem, batch, trajectory, config.beta)
    logits = flip_logits(model, batch, trajectory.states[:-1], config.steps)
    return (-torch.sigmoid(logits) * benefit + tau * bernoulli_kl(logits, base_logit(config))).mean()


def reinforce_loss(model: FlipGNN, config: CAMConfig, batch, trajectory: Trajectory, tau: float) -> torch.Tensor:
    """Score-function estimate of ``E[E(x_T)] / tau + KL(flips || reference)``, baseline the graph's mean over
    the K chains, averaged per node and step like CAM's loss."""
    terminal = energy(config.problem, batch, trajectory.states[-1], config.beta)  # (K, G)
    advantage = (terminal - terminal.mean(0, keepdim=True)) / tau
    logits = flip_logits(model, batch, trajectory.states[:-1], config.steps)
    logp = -F.binary_cross_entropy_with_logits(logits, trajectory.flips, reduction="none").sum(0)  # (K, N)
    per_graph = logp.new_zeros(logp.shape[0], batch.num_graphs).index_add_(1, batch.graph_of, logp)
    kl = bernoulli_kl(logits, base_logit(config)).sum()
    return ((advantage * per_graph).sum() + kl) / max(logits.numel(), 1)


LOSSES = {"cam": cam_loss, "reinforce": reinforce_loss}


def train(config: CAMConfig, graphs: list[Graph], model: FlipGNN | None = None, progress: bool = True):
    """Train a :class:`FlipGNN` on ``graphs`` by ``config.method``; returns ``(model, history)``, the history
    holding per step the loss and the rollout's :func:`chain_diagnostics` (terminal energy per node, for MIS the
    conflicts left before decoding, per step the flip rate and the adjoint's signal). A ``model`` trained for
    another problem is refused; the model returned records ``config.problem``."""
    if not graphs:
        raise ValueError("train: `graphs` must hold at least one training Graph")
    if model is not None:
        check_trained_for("train", model, config.problem)
        model.problem = config.problem
    model = model or initial_model(config)
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
        diagnostics = chain_diagnostics(config.problem, batch, trajectory, config.beta)
        history.append({"step": step, "loss": loss.item()} | diagnostics)
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
        LOSSES[config.method](model, config, batch, trajectory, config.final_temperature).backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]))
    grads = torch.stack(grads)
    variance = float(grads.var(0, unbiased=True).sum())
    return {"variance": variance, "relative_variance": variance / max(float(grads.mean(0).square().sum()), 1e-30)}
