"""Run by torchrun with 2 CPU processes from test_sharding.py: OwnerExchange on DTensor shards of uneven,
column-split and mixed-dtype matrices; rank 0 writes what it saw."""

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.tensor import Shard, distribute_tensor, init_device_mesh

from hf_ext.optim.shared.sharding import OwnerExchange


def whole_function(whole: list[torch.Tensor]) -> torch.Tensor:
    """Needs every entry: each result entry depends on the whole matrices."""
    return whole[0] * whole[1].float().sum() + whole[0].sum()


def main(out_dir: Path) -> None:
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    generator = torch.Generator().manual_seed(0)
    full = [  # (5, 3): rows 3 + 2; (1, 4): rows 1 + 0; (4, 6) split along columns; bf16 second inputs
        (torch.randn(5, 3, generator=generator), Shard(0)),
        (torch.randn(1, 4, generator=generator), Shard(0)),
        (torch.randn(4, 6, generator=generator), Shard(1)),
    ]
    params = [distribute_tensor(t, mesh, [placement]) for t, placement in full]
    seconds = [distribute_tensor(t.bfloat16() + 1, mesh, [placement]) for t, placement in full]
    exchange = OwnerExchange(params, "test")
    calls = []

    def fn(index, whole):
        calls.append(index)
        return whole_function(whole)

    parts = exchange.run([2, 0, 1], [[params[i], seconds[i]] for i in (2, 0, 1)], fn)
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, calls)
    results = [distribute_tensor(torch.zeros_like(full[i][0]), mesh, [full[i][1]]) for i in (2, 0, 1)]
    for result, part in zip(results, parts, strict=True):
        result.to_local().copy_(part)
    whole_results = [r.full_tensor() for r in results]
    if dist.get_rank() == 0:
        expected = [whole_function([full[i][0], full[i][0].bfloat16() + 1]) for i in (2, 0, 1)]
        torch.save({"calls": gathered, "results": whole_results, "expected": expected}, out_dir / "exchange.pt")
    dist.destroy_process_group()
    os._exit(0)  # not Python's shutdown, where gloo's threads freeing a DTensor gather abort it (pytorch#190489)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
