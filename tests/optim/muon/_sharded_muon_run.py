"""Run by torchrun with 2 CPU processes from test_sharded_muon.py: ShardedMuon on row shards of tall and wide matrices,
of stacks of experts (split along the experts) and of matrices stored transposed, in fp32 and bf16, next to
torch.optim.Muon on the whole matrices (each expert alone; the transposed matrix as its map), with the same
gradients; rank 0 writes both."""

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.tensor import Shard, distribute_tensor, init_device_mesh

from hf_ext.optim import ShardedMuon


def main(out_dir: Path) -> None:
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    generator = torch.Generator().manual_seed(0)
    results = {}
    for dtype in (torch.float32, torch.bfloat16):
        for shape in ((48, 16), (16, 48), (5, 3)):  # tall, wide, rows split 3 + 2
            weight, grads = torch.randn(shape, generator=generator), torch.randn(3, *shape, generator=generator)
            sharded = torch.nn.Parameter(distribute_tensor(weight.to(dtype), mesh, [Shard(0)]))
            whole = torch.nn.Parameter(weight.to(dtype))
            optimizers = [ShardedMuon([sharded], lr=0.1, adjust_lr_fn="match_rms_adamw")]
            optimizers.append(torch.optim.Muon([whole], lr=0.1, adjust_lr_fn="match_rms_adamw"))
            for grad in grads:
                sharded.grad = distribute_tensor(grad.to(dtype), mesh, [Shard(0)])
                whole.grad = grad.to(dtype)
                for optimizer in optimizers:
                    optimizer.step()
            results[(str(dtype), shape)] = (sharded.full_tensor(), whole.detach().clone())
        for shape, settings in (((3, 12, 8), {"stacked": True}), ((16, 16), {"transposed": True})):
            weight, grads = torch.randn(shape, generator=generator), torch.randn(3, *shape, generator=generator)
            sharded = torch.nn.Parameter(distribute_tensor(weight.to(dtype), mesh, [Shard(0)]))
            # Each expert alone, or the stored (in, out) matrix as the (out, in) map it is.
            maps = weight if settings.get("stacked") else [weight.T]
            alone = [torch.nn.Parameter(m.to(dtype).contiguous()) for m in maps]
            optimizers = [ShardedMuon([{"params": [sharded], **settings}], lr=0.1, adjust_lr_fn="match_rms_adamw")]
            optimizers.append(torch.optim.Muon(alone, lr=0.1, adjust_lr_fn="match_rms_adamw"))
            for grad in grads:
                sharded.grad = distribute_tensor(grad.to(dtype), mesh, [Shard(0)])
                for p, g in zip(alone, grad if settings.get("stacked") else [grad.T], strict=True):
                    p.grad = g.to(dtype).contiguous()  # laid out as an nn.Linear's gradient
                for optimizer in optimizers:
                    optimizer.step()
            moved = torch.stack([p.detach() for p in alone]) if settings.get("stacked") else alone[0].detach().T
            results[(str(dtype), shape, *settings)] = (sharded.full_tensor(), moved)
    if dist.get_rank() == 0:
        torch.save(results, out_dir / "muon.pt")
    dist.destroy_process_group()
    os._exit(0)  # not Python's shutdown, where gloo's threads freeing a DTensor gather abort it (pytorch#190489)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
