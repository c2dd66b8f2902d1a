"""MuonWithAdamW on an FSDP2-sharded Llama: each matrix is orthogonalized whole on one owner rank.

Run it on 2 CPU processes with `torchrun --nproc_per_node=2 examples/sharded_training.py`;
`python examples/sharded_training.py` runs one process. Shards each decoder block and then the root with
`fully_shard`, trains a few steps (each rank its half of the batch), saves model and optimizer with
torch.distributed.checkpoint and loads them into a fresh sharded model. Every optimizer and wrapper of
hf_ext.optim runs the same way; see docs/scaling.md.
"""

import copy
import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.fsdp import fully_shard

from hf_ext.models import tiny_causal_lm
from hf_ext.optim import MuonWithAdamW

if "RANK" in os.environ:  # started by torchrun
    dist.init_process_group("gloo")
else:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
rank, world_size = dist.get_rank(), dist.get_world_size()


def sharded_model_and_optimizer(model):
    for block in model.model.layers:
        fully_shard(block)
    fully_shard(model)  # parameters are now DTensor shards
    return model, MuonWithAdamW(model, lr=1e-2)  # the optimizer comes after sharding: it steps the shards


initial, _ = tiny_causal_lm(hidden_size=16, num_layers=2)
model, optimizer = sharded_model_and_optimizer(copy.deepcopy(initial))
batch = torch.randint(0, 500, (4, 16), generator=torch.Generator().manual_seed(0))
mine = batch.chunk(world_size)[rank]  # each rank its part of the global batch
for _ in range(3):
    loss = model(input_ids=mine, labels=mine).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()

checkpoint = "outputs/sharded_training_example/checkpoint"  # every rank writes its shards into this folder
model_state, optimizer_state = get_state_dict(model, optimizer)
dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=checkpoint)

resumed, resumed_optimizer = sharded_model_and_optimizer(copy.deepcopy(initial))
model_state, optimizer_state = get_state_dict(resumed, resumed_optimizer)  # the layout to load into
state = {"model": model_state, "optimizer": optimizer_state}
dcp.load(state, checkpoint_id=checkpoint)
set_state_dict(resumed, resumed_optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
pairs = zip(model.parameters(), resumed.parameters(), strict=True)
same = all(torch.equal(a.full_tensor(), b.full_tensor()) for a, b in pairs)
if rank == 0:
    print(f"{world_size} process(es): loss {loss.item():.3f} after 3 steps; reloaded model equal: {same}")
dist.destroy_process_group()
