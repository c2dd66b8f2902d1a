"""Decentralized SGD in a plain training loop, against plain SGD under DDP: error, consensus, time and bytes per step.

Each process is one worker holding its shard of the data (a :class:`WorkerProblem`). :func:`train_decentralized`
runs SGD with the step size ``lr * t0 / (t + t0)`` (the ``1/t`` schedule of the analysis), gossiping through
:class:`~hf_ext.optim.DecentralizedSGD` over a topology, or, with ``topology="ddp"``, all-reducing its gradients
under ``DistributedDataParallel``: the baseline, whose bytes per step are those of a ring all-reduce
(:func:`ring_allreduce_bytes`). A model too large for a plain loop trains through
:class:`~hf_ext.optim.DecentralizedTrainer` instead.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from .optimizer import DecentralizedSGD

DDP = "ddp"


@dataclass
class WorkerProblem:
    """One worker's view of a problem: its shard of the training data, a model builder (from a seed), the loss on
    a batch, and the error of a model (the averaged one) with any other numbers to record."""

    features: torch.Tensor
    targets: torch.Tensor
    make_model: Callable[[int], nn.Module]
    loss: Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]
    evaluate: Callable[[nn.Module], dict[str, float]]


def ring_allreduce_bytes(model: nn.Module, world_size: int) -> float:
    """Bytes one process sends to all-reduce ``model``'s gradients over ``world_size`` processes in a ring (DDP's
    step): ``2 (N - 1) / N`` times the parameters' bytes."""
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    return 2 * (world_size - 1) / world_size * param_bytes


def train_decentralized(
    problem: WorkerProblem,
    topology: str,
    seed: int,
    *,
    lr: float,
    steps: int,
    batch_size: int,
    lr_decay_steps: int,
    eval_every: int,
    order: str = "atc",
) -> dict:
    """One run of ``steps`` SGD steps of ``batch_size`` rows of this worker's shard, gossiping over ``topology``
    (``"ddp"``: the all-reduce baseline).

    The model is ``problem.make_model(seed)``; the rows are drawn from a generator seeded by ``seed`` and this
    process's rank. Every ``eval_every`` steps and at the end the averaged model ``x_bar`` is evaluated, with the
    consensus distance. Returns the ``curve`` of those evaluations, ``seconds_per_step`` (the steps alone) and
    ``bytes_per_step`` (sent by this process).
    """
    model = problem.make_model(seed)
    sgd = torch.optim.SGD(model.parameters(), lr=lr)
    if topology == DDP:
        trained = nn.parallel.DistributedDataParallel(model) if dist.is_initialized() else model
        optimizer, decentralized = sgd, None
    else:
        trained = model
        optimizer = decentralized = DecentralizedSGD(sgd, topology, order)
    schedule = torch.optim.lr_scheduler.LambdaLR(sgd, lambda step: lr_decay_steps / (step + lr_decay_steps))
    rank, world = (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)
    generator = torch.Generator().manual_seed(1000 * seed + rank)
    curve, seconds = [], 0.0
    for step in range(steps + 1):
        if step % eval_every == 0 or step == steps:
            curve.append({"step": step, **_averaged_metrics(problem, model, decentralized)})
        if step == steps:
            break
        start = time.perf_counter()
        rows = torch.randint(len(problem.targets), (batch_size,), generator=generator)
        optimizer.zero_grad()
        problem.loss(trained, problem.features[rows], problem.targets[rows]).backward()
        optimizer.step()
        schedule.step()
        seconds += time.perf_counter() - start
    sent = ring_allreduce_bytes(model, world)
    if decentralized is not None:
        sent = decentralized.communicator.bytes_sent / steps
    return {"curve": curve, "seconds_per_step": seconds / steps, "bytes_per_step": sent}


def _averaged_metrics(problem: WorkerProblem, model: nn.Module, decentralized: DecentralizedSGD | None) -> dict:
    """The consensus distance and ``problem.evaluate`` at the workers' average (DDP: the one model)."""
    if decentralized is None:
        return {"consensus_distance": 0.0, **problem.evaluate(model)}
    consensus = decentralized.consensus_distance()
    with decentralized.averaged_parameters():
        return {"consensus_distance": consensus, **problem.evaluate(model)}
