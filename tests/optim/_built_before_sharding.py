"""Run by torchrun with 2 CPU processes from test_built_before_sharding.py: every method of benchmarks/sharded.py
built on a model before ``fully_shard``, then one training step; rank 0 writes what each step raised."""

import importlib.util
import json
import os
import sys
from pathlib import Path

import torch.distributed as dist

from hf_ext.models import tiny_causal_lm

WORKER = Path(__file__).resolve().parents[2] / "benchmarks" / "sharded.py"
spec = importlib.util.spec_from_file_location("sharded_benchmark", WORKER)
sharded = importlib.util.module_from_spec(spec)
sys.path.insert(0, str(WORKER.parent))  # it imports its sibling _harness
spec.loader.exec_module(sharded)


def main(out_dir: Path) -> None:
    dist.init_process_group("gloo")
    ids = sharded.batches(seed=0, steps=1, size=2)[0]
    raised = {}
    for method, build in sharded.METHODS.items():
        model, _ = tiny_causal_lm(hidden_size=16, num_layers=3)  # the parity runs' model
        optimizer = build(model)  # the mistake: the optimizer holds the tensors fully_shard replaces
        sharded.prepare(model, "fsdp")
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        if hasattr(optimizer, "set_loss"):
            optimizer.set_loss(loss.detach())
        try:
            optimizer.step()
            raised[method] = None
        except RuntimeError as error:
            raised[method] = str(error)
    if dist.get_rank() == 0:
        (out_dir / "raised.json").write_text(json.dumps(raised))
    dist.barrier()
    dist.destroy_process_group()
    os._exit(0)  # not Python's shutdown, where gloo's threads freeing a DTensor gather abort it (pytorch#190489)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
