"""Tensors of an FSDP2-sharded model as the code that steps it sees them: this rank's shard, how the
tensor is split, and sums taken once across the ranks that hold the pieces.

FSDP2 (``torch.distributed.fsdp.fully_shard``) turns each parameter into a ``DTensor`` split along one
dimension over a process group (``Shard(0)``: each rank keeps a block of rows, the last ranks fewer or
none). Element-wise work runs on the local shards as it would on the whole tensor; a norm, count or
loss needs its local part summed over that group, once. Plain tensors (one process, DDP) and
replicated ``DTensor``\\ s are whole on every rank and need no sum.
"""

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor, Partial, Shard


def local(tensor: torch.Tensor) -> torch.Tensor:
    """This rank's part of ``tensor``: a ``DTensor``'s local shard (in-place ops on it change the ``DTensor``), else
    the tensor itself."""
    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def whole(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` entire: a ``DTensor``'s shards gathered (every rank of its mesh calls this), else ``tensor``."""
    return tensor.full_tensor() if isinstance(tensor, DTensor) else tensor


def chunk_sizes(length: int, parts: int) -> tuple[int, ...]:
    """The length of each rank's block when ``length`` rows are split as ``torch.chunk`` (and FSDP2) splits them."""
    block = -(-length // parts)
    return tuple(max(0, min(block, length - rank * block)) for rank in range(parts))


@dataclass(frozen=True)
class Sharding:
    """How a tensor is split: along ``dim`` over ``group``, ``sizes[r]`` entries of ``dim`` on group rank ``r``."""

    dim: int
    group: dist.ProcessGroup
    sizes: tuple[int, ...]

    @property
    def rank(self) -> int:
        return dist.get_rank(self.group)

    def local_shape(self, shape: torch.Size, rank: int) -> torch.Size:
        """The shape of group rank ``rank``'s shard of a tensor of global ``shape``."""
        return torch.Size((*shape[: self.dim], self.sizes[rank], *shape[self.dim + 1 :]))


def sharding(tensor: torch.Tensor, name: str = "a parameter") -> Sharding | None:
    """How ``tensor`` is split across ranks; ``None`` when every rank holds all of it (a plain tensor, a replicated
    ``DTensor``, or a group of one).

    A ``DTensor`` sharded along one dimension over one mesh dimension (FSDP2; HSDP's replicated mesh
    dimension holds copies) is supported; a pending reduction (``Partial``), several sharded mesh
    dimensions (FSDP with tensor parallelism) or a layout other than ``torch.chunk``'s raise ``ValueError``.
    """
    if not isinstance(tensor, DTensor):
        return None
    placements = tensor.placements
    if any(isinstance(p, Partial) for p in placements):
        raise ValueError(f"{name} is a DTensor with a pending reduction {placements}; reduce it first")
    shards = [(mesh_dim, p) for mesh_dim, p in enumerate(placements) if p.is_shard()]
    shards = [(mesh_dim, p) for mesh_dim, p in shards if tensor.device_mesh.size(mesh_dim) > 1]
    if not shards:
        return None
    if len(shards) > 1 or type(shards[0][1]) is not Shard:
        raise ValueError(
            f"{name} is sharded as {placements}; supported: one Shard(dim) placement (FSDP2, HSDP), the other mesh "
            "dimensions replicated"
        )
    mesh_dim, placement = shards[0]
    dim = placement.dim % tensor.dim()
    sizes = chunk_sizes(tensor.shape[dim], tensor.device_mesh.size(mesh_dim))
    layout = Sharding(dim, tensor.device_mesh.get_group(mesh_dim), sizes)
    if tensor.to_local().shape != layout.local_shape(tensor.shape, layout.rank):
        raise ValueError(
            f"{name}: its local shard has shape {tuple(tensor.to_local().shape)}, not torch.chunk's "
            f"{tuple(layout.local_shape(tensor.shape, layout.rank))} for {placements}"
        )
    return layout


def flat_shard(tensor: torch.Tensor, name: str = "a tensor") -> tuple[torch.Tensor, int, dist.ProcessGroup | None]:
    """This rank's entries of ``tensor`` in flat order, the whole tensor's flat index of the first one, and the group
    that holds the rest (``None``: this rank holds them all).

    A ``DTensor`` sharded along dimension 0 (FSDP2's layout) holds a contiguous run of the flat order;
    other layouts raise ``ValueError`` naming ``name``.
    """
    layout = sharding(tensor, name)
    if layout is None:
        return local(tensor).reshape(-1), 0, None
    if layout.dim != 0:
        raise ValueError(
            f"{name} is sharded along dimension {layout.dim}; a flat run of entries needs dimension 0 (FSDP2's)"
        )
    row = tensor.numel() // max(tensor.shape[0], 1)
    return local(tensor).view(-1), sum(layout.sizes[: layout.rank]) * row, layout.group


def shard_group(tensors: Iterable[torch.Tensor], owner: str) -> dist.ProcessGroup | None:
    """The one process group over which the sharded ``tensors`` are split (``None`` if none is); ``ValueError``
    naming ``owner`` when they are split over different groups."""
    groups = {id(s.group): s.group for s in (sharding(t, f"{owner}: a parameter") for t in tensors) if s is not None}
    if len(groups) > 1:
        raise ValueError(f"{owner}: the parameters are sharded over {len(groups)} different process groups; need one")
    return next(iter(groups.values()), None)


def sum_across(values: torch.Tensor, group: dist.ProcessGroup | None) -> torch.Tensor:
    """``values`` summed over the ranks of ``group`` (in place, one ``all_reduce``); unchanged for ``None``."""
    if group is not None and dist.get_world_size(group) > 1:
        dist.all_reduce(values, group=group)
    return values


def squared_norm_parts(tensors: Iterable[torch.Tensor], group: dist.ProcessGroup | None) -> torch.Tensor:
    """This rank's part of each ``||t||^2`` of ``tensors`` (float64, one entry each): the squares of its shards, and
    those of the tensors whole on every rank on group rank 0 only (0 elsewhere), so that :func:`sum_across` counts
    every entry once. One ``torch._foreach_norm``, accumulated in float64 so that a sum over shards is the whole
    tensor's (a float32 one is not, bit for bit, and ``S^(-1/2)`` amplifies that in symmetry curvature)."""
    tensors = list(tensors)
    counted = group is None or dist.get_rank(group) == 0
    norms = torch._foreach_norm([local(t) for t in tensors], 2, dtype=torch.float64)
    if not counted:
        norms = [n if sharding(t) is not None else torch.zeros_like(n) for n, t in zip(norms, tensors, strict=True)]
    return torch.stack(norms).square()


def squared_norm_part(tensors: Iterable[torch.Tensor], group: dist.ProcessGroup | None) -> torch.Tensor:
    """This rank's part of ``sum ||t||^2`` over ``tensors`` (float64), as :func:`squared_norm_parts` counts it."""
    tensors = list(tensors)
    if not tensors:
        return torch.zeros((), dtype=torch.float64)
    return squared_norm_parts(tensors, group).sum()


def gathered(tensor: torch.Tensor, keep: bool) -> torch.Tensor | None:
    """``tensor`` whole, on the CPU if it had to be gathered, where ``keep`` (a writer rank), else ``None``; every
    rank of a sharded tensor's group must call it (one all-gather)."""
    if sharding(tensor) is None:
        return local(tensor) if keep else None
    whole = tensor.full_tensor()
    return whole.cpu() if keep else None


def reshard(model: nn.Module) -> None:
    """Shard again whatever FSDP2 holds gathered in ``model``: the root module keeps its parameters whole after a
    forward, for the backward that would reshard them, so a forward-only step (zeroth order) reshards itself."""
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()


@contextmanager
def unsharded(model: nn.Module) -> Iterator[nn.Module]:
    """``model`` with every FSDP2 module's parameters gathered whole (plain tensors) on every rank while open, so that
    each rank computes what one process computes from the weights; a model that is not sharded is left as it is.
    Every rank enters. A forward pass inside reshards each block after it (FSDP2's hooks): read weights, not
    activations, in here."""
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.unshard()
    try:
        yield model
    finally:
        reshard(model)
