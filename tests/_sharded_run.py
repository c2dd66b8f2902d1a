"""Run by torchrun with 2 CPU processes from test_sharded.py: progressive binarization trained on FSDP2 shards, its
packed export and the plasticity metrics, next to one process (rank 0) on the same global batches."""

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from datasets import Dataset
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from transformers import TrainerControl, TrainerState, TrainingArguments

from hf_ext.models import tiny_causal_lm
from hf_ext.plasticity import PlasticityCallback
from hf_ext.quant import ProgressiveBinarizationCallback, binarize_model, save_packed

STEPS = 3


def run(mode: str, out_dir: Path) -> dict:
    world_size, rank = dist.get_world_size(), dist.get_rank()
    model, _ = tiny_causal_lm(num_layers=2)
    binarize_model(model, target_modules=["q_proj", "down_proj"])
    if mode == "fsdp":
        for block in model.model.layers:
            fully_shard(block)
        fully_shard(model)
        assert all(isinstance(p, DTensor) for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    schedule = ProgressiveBinarizationCallback(end=STEPS)
    args, state, control = TrainingArguments(output_dir=str(out_dir)), TrainerState(max_steps=STEPS), TrainerControl()
    schedule.on_train_begin(args, state, control, model=model)
    ids = torch.randint(0, 500, (STEPS, 4, 12), generator=torch.Generator().manual_seed(0))
    mixes = []
    for step in range(STEPS):
        state.global_step = step
        schedule.on_step_begin(args, state, control, model=model)
        mixes.append(schedule.mix)
        parts = ids[step].chunk(world_size) if mode == "single" else [ids[step].chunk(world_size)[rank]]
        for part in parts:  # one process accumulates the ranks' micro-batches: their averaged gradient
            (model(input_ids=part, labels=part).loss / len(parts)).backward()
        optimizer.step()
        optimizer.zero_grad()
    state.global_step = STEPS
    schedule.on_train_end(args, state, control, model=model)
    sizes = save_packed(model, out_dir / f"packed-{mode}")
    probe = Dataset.from_dict({"input_ids": ids[0, :, :8].tolist() * 2, "label": [0, 1] * 4})
    metrics = PlasticityCallback(probe, batch_size=4).measure(model)
    params = {n: (p.full_tensor() if isinstance(p, DTensor) else p).detach() for n, p in model.named_parameters()}
    return {"mixes": mixes, "sizes": sizes, "metrics": metrics, "params": params}


def main(out_dir: Path) -> None:
    dist.init_process_group("gloo")
    results = {"fsdp": run("fsdp", out_dir)}
    if dist.get_rank() == 0:
        results["single"] = run("single", out_dir)
        torch.save(results, out_dir / "results.pt")
    dist.destroy_process_group()
    os._exit(0)  # not Python's shutdown, where gloo's threads freeing a DTensor gather abort it (pytorch#190489)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
