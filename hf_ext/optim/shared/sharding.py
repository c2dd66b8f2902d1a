"""Whole-matrix work (Newton-Schulz, inverse roots) on FSDP2-sharded parameters, each matrix on one owner rank.

Orthogonalizing each rank's block of rows is not orthogonalizing the matrix (``torch.optim.Muon`` on
shards: silently 1e-2 off), and gathering every matrix on every rank repeats the work ``N`` times. As
in the distributed Muons of Dion, torchtitan and pith-train, each sharded matrix gets one owner rank:

1. every rank sends its shard of each matrix to that matrix's owner (one ``all_to_all`` for all
   matrices and all inputs, any mix of dtypes, sent as bytes so nothing is rounded);
2. each owner computes its matrices' results on the whole matrices, bit for bit what one process computes;
3. the owners send each rank its block of each result (a second ``all_to_all``).

Owners are assigned by cost (default: elements), each matrix to the rank with the least so far, so
work and whatever state an owner keeps for its matrices are split evenly (within one matrix). Tensors that
are not sharded (one process, DDP, replicated ``DTensor``\\ s) are computed where they are, on every rank.
"""

from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

from ..._sharded import Sharding, local, shard_group, sharding


def assign_owners(costs: Sequence[int], world_size: int) -> list[int]:
    """Owner rank of each matrix (``costs``: its work or state): the least loaded rank so far, ties to the lower rank.

    In the given order, so appending matrices (``add_param_group``) keeps the earlier owners.
    """
    loads = [0] * world_size
    owners = []
    for cost in costs:
        owner = min(range(world_size), key=loads.__getitem__)
        loads[owner] += cost
        owners.append(owner)
    return owners


def _view(data: torch.Tensor, dtype: torch.dtype, shape: torch.Size) -> torch.Tensor:
    """Received bytes as a tensor (copied when they do not start on a ``dtype`` boundary)."""
    size = torch.empty((), dtype=dtype).element_size()
    return (data if data.storage_offset() % size == 0 else data.clone()).view(dtype).view(shape)


class OwnerExchange:
    """Runs a function of whole matrices on FSDP2-sharded ``params``, each on its owner rank.

    Build one per step over all parameters that need whole matrices (whether or not they have a
    gradient this step), so that owners stay put across steps; :meth:`owns` tells an optimizer which
    matrices' state it keeps. ``costs`` (one per parameter; default: its elements) balance the owners.
    """

    def __init__(self, params: Sequence[torch.Tensor], owner: str, costs: Sequence[int] | None = None):
        self.params = list(params)
        self.shardings: list[Sharding | None] = [sharding(p, f"{owner}: a parameter") for p in self.params]
        self.group = shard_group(self.params, owner)
        sharded = [i for i, s in enumerate(self.shardings) if s is not None]
        world_size = dist.get_world_size(self.group) if self.group is not None else 1
        costs = [p.numel() for p in self.params] if costs is None else list(costs)
        owners = assign_owners([costs[i] for i in sharded], world_size)
        self.owners = dict(zip(sharded, owners, strict=True))
        self.rank = dist.get_rank(self.group) if self.group is not None else 0

    def owns(self, index: int) -> bool:
        """Whether this rank computes ``params[index]``'s results (always, for a tensor that is not sharded)."""
        return self.owners.get(index, self.rank) == self.rank

    def run(
        self,
        indices: Sequence[int],
        inputs: Sequence[Sequence[torch.Tensor]],
        fn: Callable[[int, list[torch.Tensor]], torch.Tensor],
        out_dtypes: Sequence[torch.dtype] | None = None,
    ) -> list[torch.Tensor]:
        """``fn(index, whole inputs)`` for each of ``indices``, returned as this rank's part.

        ``inputs[k]`` are tensors shaped like ``params[indices[k]]`` (its ``DTensor``\\ s or their local shards);
        ``fn`` gets them whole and returns a tensor of the parameter's shape, in ``out_dtypes[k]`` (default: the
        first input's dtype; every rank must know it to receive its part). It runs only on the owner of a
        sharded parameter, on every rank otherwise.
        """

        def each(computed: list[int], wholes: list[list[torch.Tensor]]) -> list[torch.Tensor]:
            return [fn(index, whole) for index, whole in zip(computed, wholes, strict=True)]

        return self.run_batched(indices, inputs, each, out_dtypes)

    def run_batched(
        self,
        indices: Sequence[int],
        inputs: Sequence[Sequence[torch.Tensor]],
        fn: Callable[[list[int], list[list[torch.Tensor]]], list[torch.Tensor]],
        out_dtypes: Sequence[torch.dtype] | None = None,
    ) -> list[torch.Tensor]:
        """:meth:`run` with one call ``fn(computed, wholes)`` for every matrix this rank computes (its tensors that are
        not sharded, then the sharded ones it owns), returning their results in that order: so that ``fn`` can batch
        them (one Newton-Schulz call per matrix shape)."""
        results: list[torch.Tensor | None] = [None] * len(indices)
        here = [k for k, index in enumerate(indices) if self.shardings[index] is None]
        sharded = [k for k, index in enumerate(indices) if self.shardings[index] is not None]
        owned = {}
        if sharded:
            gathered = self._gather([indices[k] for k in sharded], [[local(t) for t in inputs[k]] for k in sharded])
            owned = {index: whole for index, whole in gathered.items() if whole}
        computed = [indices[k] for k in here] + list(owned)
        wholes = [[local(t) for t in inputs[k]] for k in here] + list(owned.values())
        outputs = fn(computed, wholes) if computed else []
        for k, output in zip(here, outputs[: len(here)], strict=True):
            results[k] = output
        if sharded:
            dtypes = [out_dtypes[k] if out_dtypes else local(inputs[k][0]).dtype for k in sharded]
            dtype_of = dict(zip((indices[k] for k in sharded), dtypes, strict=True))
            ours = zip(owned, outputs[len(here) :], strict=True)
            mine = {index: output.to(dtype_of[index]) for index, output in ours}
            for k, part in zip(sharded, self._scatter([indices[k] for k in sharded], dtypes, mine), strict=True):
                results[k] = part
        return results

    def _exchange(self, send: list[list[torch.Tensor]], receive_bytes: list[int]) -> list[torch.Tensor]:
        """Send ``send[r]`` (tensors, as bytes) to group rank ``r``; the bytes received from each rank."""
        pieces = [torch.cat([t.contiguous().view(-1).view(torch.uint8) for t in ts]) if ts else None for ts in send]
        device = next((p.device for p in pieces if p is not None), self.params[0].device)
        empty = torch.empty(0, dtype=torch.uint8, device=device)
        pieces = [empty if p is None else p for p in pieces]
        received = torch.empty(sum(receive_bytes), dtype=torch.uint8, device=device)
        dist.all_to_all_single(
            received, torch.cat(pieces), receive_bytes, [p.numel() for p in pieces], group=self.group
        )
        return list(received.split(receive_bytes))

    def _gather(self, indices: list[int], inputs: list[list[torch.Tensor]]) -> dict[int, list[torch.Tensor]]:
        """Each rank's shards sent to their owners; the whole inputs of the matrices this rank owns (by index)."""
        world_size = len(self.shardings[indices[0]].sizes)
        send = [[] for _ in range(world_size)]
        for index, tensors in zip(indices, inputs, strict=True):
            send[self.owners[index]].extend(tensors)
        mine = [(index, tensors) for index, tensors in zip(indices, inputs, strict=True) if self.owns(index)]
        shapes = {
            index: [self.shardings[index].local_shape(self.params[index].shape, r) for r in range(world_size)]
            for index, _ in mine
        }
        receive = [
            sum(shapes[index][r].numel() * t.element_size() for index, tensors in mine for t in tensors)
            for r in range(world_size)
        ]
        received = self._exchange(send, receive)
        whole = {index: [] for index in indices}
        offsets = [0] * world_size
        for index, tensors in mine:
            for t in tensors:
                parts = []
                for r in range(world_size):
                    length = shapes[index][r].numel() * t.element_size()
                    data = received[r][offsets[r] : offsets[r] + length]
                    parts.append(_view(data, t.dtype, shapes[index][r]))
                    offsets[r] += length
                whole[index].append(torch.cat(parts, dim=self.shardings[index].dim))
        return whole

    def _scatter(
        self, indices: list[int], dtypes: list[torch.dtype], computed: dict[int, torch.Tensor]
    ) -> list[torch.Tensor]:
        """The owners' results sent back in blocks; this rank's block of each (in ``indices`` order)."""
        world_size = len(self.shardings[indices[0]].sizes)
        send = [[] for _ in range(world_size)]
        for index, result in computed.items():
            layout = self.shardings[index]
            for r, block in enumerate(result.split(layout.sizes, dim=layout.dim)):
                send[r].append(block)
        shapes = [self.shardings[i].local_shape(self.params[i].shape, self.rank) for i in indices]
        element = [torch.empty((), dtype=d).element_size() for d in dtypes]
        receive = [
            sum(s.numel() * e for i, s, e in zip(indices, shapes, element, strict=True) if self.owners[i] == r)
            for r in range(world_size)
        ]
        received = self._exchange(send, receive)
        offsets = [0] * world_size
        parts = []
        for index, shape, dtype, size in zip(indices, shapes, dtypes, element, strict=True):
            r, length = self.owners[index], shape.numel() * size
            parts.append(_view(received[r][offsets[r] : offsets[r] + length], dtype, shape))
            offsets[r] += length
        return parts
