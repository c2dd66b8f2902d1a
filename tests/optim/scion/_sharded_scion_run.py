"""Run by torchrun with 2 CPU processes from test_sharded_scion.py: Scion on row shards (FSDP2's Shard(0)) of stacks of
experts (split along the experts: each rank steps whole matrices), of matrices stored transposed and of embeddings,
next to one-process Scion on the maps alone (each expert its own (out, in) parameter, each transposed matrix stored as
its map), with the same gradients; rank 0 writes both, the maps stored as the sharded tensor is."""

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.tensor import Shard, distribute_tensor, init_device_mesh

from hf_ext.optim import Scion

CASES = {  # name: (shape, group settings)
    "experts": ((3, 12, 8), {"norm": "spectral", "stacked": True}),
    "experts_sign": ((3, 12, 8), {"norm": "sign", "stacked": True}),
    "conv1d": ((8, 32), {"norm": "spectral", "transposed": True}),
    "embedding": ((10, 6), {"norm": "colnorm", "transposed": True}),
}


def as_maps(tensor: torch.Tensor, settings: dict) -> list[torch.Tensor]:
    """The (out, in) matrices of a stored tensor: each expert of a stack, or the transpose of a transposed one."""
    return list(tensor) if settings.get("stacked") else [tensor.T]


def main(out_dir: Path) -> None:
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    generator = torch.Generator().manual_seed(0)
    results = {}
    for name, (shape, settings) in CASES.items():
        weight, grads = torch.randn(shape, generator=generator), torch.randn(3, *shape, generator=generator)
        sharded = torch.nn.Parameter(distribute_tensor(weight, mesh, [Shard(0)]))
        maps = [torch.nn.Parameter(m.contiguous()) for m in as_maps(weight, settings)]
        optimizers = [
            Scion([{"params": [sharded], **settings}], lr=0.1, alpha=0.5),
            Scion(maps, lr=0.1, alpha=0.5, norm=settings["norm"]),
        ]
        for grad in grads:
            sharded.grad = distribute_tensor(grad, mesh, [Shard(0)])
            for p, g in zip(maps, as_maps(grad, settings), strict=True):
                p.grad = g.contiguous()
            for optimizer in optimizers:
                optimizer.step()
        stored = torch.stack([p.detach() for p in maps]) if settings.get("stacked") else maps[0].detach().T
        results[name] = (sharded.full_tensor(), stored)
    if dist.get_rank() == 0:
        torch.save(results, out_dir / "scion.pt")
    dist.destroy_process_group()
    os._exit(0)  # not Python's shutdown, where gloo's threads freeing a DTensor gather abort it (pytorch#190489)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
