"""Run by torchrun from test_decentralized_distributed.py: gossip rounds and steps saved per rank, or bad input.

torchrun --nproc_per_node=N _dsgd_workers.py gossip OUT_DIR
torchrun --nproc_per_node=N _dsgd_workers.py refuse OUT_DIR TOPOLOGY
"""

import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn

from hf_ext.optim import DecentralizedSGD, GossipCommunicator, Topology

# 2 x 3 parameters in buckets of at most 8 bytes: several messages per round.
TINY_BUCKET_MB = 8 / 2**20


def _params(rank: int) -> nn.ParameterList:
    generator = torch.Generator().manual_seed(rank)
    return nn.ParameterList([nn.Parameter(torch.randn(2, generator=generator)) for _ in range(3)])


def mix(rank: int, world: int) -> dict:
    """One gossip round per topology (and per round of the time-varying one) on rank-seeded buffers."""
    results = {}
    eye = torch.eye(world)
    custom = 0.5 * eye + 0.3 * torch.roll(eye, 1, 0) + 0.2 * torch.roll(eye, 2, 0)  # directed, not symmetric
    cases = [("ring", 0), ("torus", 0), ("exponential", 0), ("one_peer_exponential", 0), ("one_peer_exponential", 1)]
    cases += [("complete", 0), ("custom", 0)]
    communicator = GossipCommunicator()
    for name, step in cases:
        topology = Topology(custom if name == "custom" else name, world)
        buffers = [torch.randn(3, generator=torch.Generator().manual_seed(10 * rank + k)) for k in range(2)]
        before = torch.cat(buffers)
        communicator.mix_(buffers, topology.matrix(step))
        results[f"{name}/{step}"] = (before, torch.cat(buffers), topology.matrix(step))
    results["custom_matrix"] = custom
    results["bytes_sent"] = communicator.bytes_sent
    return results


def update(rank: int, world: int) -> dict:
    """One DecentralizedSGD step of SGD on f_i(x) = 0.5 ||x - a_i||^2 in each order, and consensus on f = 0."""
    results = {}
    for order in ("atc", "cta"):
        params = _params(0)  # overwritten by rank 0's broadcast anyway
        optimizer = DecentralizedSGD(torch.optim.SGD(params, lr=0.1), "ring", order, bucket_cap_mb=TINY_BUCKET_MB)
        with torch.no_grad():
            for p, q in zip(params, _params(rank), strict=True):
                p.copy_(q)  # a different point per rank
        before = torch.cat([p.detach().clone() for p in params])
        target = torch.full((6,), float(rank))
        loss = 0.5 * (torch.cat(list(params)) - target).square().sum()
        loss.backward()
        optimizer.step()
        results[order] = (before, target, torch.cat([p.detach().clone() for p in params]), len(optimizer.buckets))
    results["added"] = added_group(rank)
    # consensus: zero gradients, so gossip alone moves the workers to their mean
    params = _params(0)
    optimizer = DecentralizedSGD(torch.optim.SGD(params, lr=0.1), "ring")
    with torch.no_grad():
        for p, q in zip(params, _params(rank), strict=True):
            p.copy_(q)
    mean = torch.cat([p.detach().clone() for p in params])
    dist.all_reduce(mean)
    distances = []
    for _ in range(15):
        distances.append(optimizer.consensus_distance())
        (0.0 * torch.cat(list(params)).sum()).backward()
        optimizer.step()
    distances.append(optimizer.consensus_distance())
    results["consensus"] = (distances, mean / world, torch.cat([p.detach().clone() for p in params]))
    results["spectral_gap"] = optimizer.topology.spectral_gap()
    return results


def added_group(rank: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A parameter added by add_param_group: rank 0's value on joining, then gossiped like the others (lr 0)."""
    optimizer = DecentralizedSGD(torch.optim.SGD(_params(0), lr=0.0), "ring")
    extra = nn.Parameter(torch.full((2,), float(rank)))
    optimizer.add_param_group({"params": [extra]})
    joined = extra.detach().clone()
    with torch.no_grad():
        extra.copy_(torch.full((2,), float(rank)))
    before = extra.detach().clone()
    extra.grad = torch.zeros(2)
    optimizer.step()
    return joined, before, extra.detach().clone()


def refuse(rank: int, world: int) -> dict:
    """Bad input: the topology is checked on every rank before any message is sent."""
    topology = sys.argv[3]
    if topology == "rank1_not_doubly_stochastic":  # ranks disagree: rank 0 is fine and would wait for rank 1
        topology = [[0.6, 0.6], [0.4, 0.4]] if rank == 1 else "ring"
    try:
        DecentralizedSGD(torch.optim.SGD(_params(rank), lr=0.1), topology)
    except ValueError as error:
        Path(sys.argv[2], f"refused{rank}.txt").write_text(str(error))
        raise
    return {}


def main() -> None:
    job, out = sys.argv[1], Path(sys.argv[2])
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    results = refuse(rank, world) if job == "refuse" else mix(rank, world) | update(rank, world)
    torch.save(results, out / f"{job}{rank}.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
