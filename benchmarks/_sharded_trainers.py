"""The trainers' per-rank memory on SmolLM2-135M, one process or sharded by accelerate's FSDP2 (``--trainers`` of
``benchmarks/sharded.py``, which starts this script).

``python _sharded_trainers.py --output-dir OUT TRAINER...`` runs each trainer for a few steps in this process, or,
started as ``torchrun --nproc_per_node N -m hf_ext.distributed _sharded_trainers.py ...`` with the variables of
``recipes/accelerate/fsdp2_cpu_2proc.yaml``, on N FSDP2 processes with the same global batch. For each trainer
every rank measures the bytes it holds (its parameters' shards, their gradients, the optimizer's state, ZO's
state among it, the reference model's shards) at each optimizer step, and its peak RSS above the RSS before the
model was loaded, apart while setting up (each process loads the whole model before accelerate shards it) and
while training; rank 0 writes ``OUT/TRAINER.json`` with one entry per rank.

The trainers run one after another in one process: ``sharded.py`` starts it with ``MALLOC_MMAP_THRESHOLD_``
fixed at 64 KiB, so every tensor but the smallest is mapped on its own and returned to the system when freed,
and one trainer's peak is not hidden in memory an earlier one left behind.
"""

import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from _harness import PeakRSS, benchmark_parser, peak_rss, reset_peak_rss
from datasets import Dataset
from torch import nn
from torch.distributed.tensor import DTensor
from transformers import Trainer, TrainerCallback, TrainingArguments

from hf_ext.data import arithmetic_dataset, preference_dataset
from hf_ext.distributed import fsdp_launch_env
from hf_ext.models import load_smollm2
from hf_ext.recipes import recipes_dir

GLOBAL_BATCH = 4
SEQUENCE_LENGTH = 32
STEPS = 2


def world_size() -> int:
    """The number of processes torchrun started (the process group starts with the first Trainer)."""
    return int(os.environ.get("WORLD_SIZE", 1))


def tensor_bytes(tensors) -> int:
    """Bytes this rank holds of ``tensors`` (a ``DTensor``'s local shard; ``None`` entries skipped)."""
    tensors = [t.to_local() if isinstance(t, DTensor) else t for t in tensors if isinstance(t, torch.Tensor)]
    return sum(t.numel() * t.element_size() for t in tensors)


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of this rank's optimizer state (AGZO's bases and ZO's step counts are state too)."""
    inner = getattr(optimizer, "optimizer", optimizer)  # accelerate's AcceleratedOptimizer wraps ours
    return tensor_bytes(value for state in inner.state.values() for value in state.values())


class HeldBytes(TrainerCallback):
    """The most bytes of parameters, gradients and optimizer state this rank holds at any optimizer step, and the
    peak RSS before training (loading the model, and sharding it, which accelerate does when training starts).

    The peak is then reset, so that the high-water mark read after training is the training steps' alone.
    """

    def __init__(self):
        self.peak = {"params": 0, "grads": 0, "state": 0}
        self.setup_peak_rss = 0

    def on_train_begin(self, args, state, control, **kwargs):
        self.setup_peak_rss = peak_rss()
        reset_peak_rss()

    def on_optimizer_step(self, args, state, control, model: nn.Module = None, optimizer=None, **kwargs):
        params = list(model.parameters())
        held = {
            "params": tensor_bytes(params),
            "grads": tensor_bytes(p.grad for p in params),
            "state": optimizer_state_bytes(optimizer),
        }
        if sum(held.values()) > sum(self.peak.values()):
            self.peak = held


def settings(output_dir: Path, **overrides) -> dict:
    """fp32 CPU training of the global batch for ``STEPS`` steps, nothing saved or logged."""
    return {
        "output_dir": str(output_dir),
        "per_device_train_batch_size": GLOBAL_BATCH // world_size(),
        "max_steps": STEPS,
        "learning_rate": 1e-5,
        "report_to": "none",
        "save_strategy": "no",
        "use_cpu": True,
        "bf16": False,
        "activation_checkpointing": False,
        "disable_tqdm": True,
        "dataloader_pin_memory": False,
        "seed": 0,
    } | overrides


def token_dataset(rows: int = 16) -> Dataset:
    """Equal-length rows of SmolLM2 token ids (no padding)."""
    ids = torch.randint(0, 49152, (rows, SEQUENCE_LENGTH), generator=torch.Generator().manual_seed(0)).tolist()
    return Dataset.from_dict({"input_ids": ids, "labels": ids})


def adamw(output_dir: Path, callback: HeldBytes) -> Trainer:
    """The stock Trainer with AdamW (AGZO's and MeZO's first-order counterpart)."""
    model, _ = load_smollm2()
    args = TrainingArguments(**settings(output_dir, optim="adamw_torch"))
    return Trainer(model=model, args=args, train_dataset=token_dataset(), callbacks=[callback])


def zeroth_order(method: str):
    """ZOTrainer with AGZO (rank 4) or MeZO, isotropic noise on the other parameters."""

    def build(output_dir: Path, callback: HeldBytes) -> Trainer:
        from hf_ext.zo import AGZOConfig, MeZOConfig, ZOTrainer

        model, _ = load_smollm2()
        config = AGZOConfig(rank=4, other_params="isotropic") if method == "agzo" else MeZOConfig()
        args = TrainingArguments(**settings(output_dir, max_grad_norm=0.0))
        return ZOTrainer(model, args, train_dataset=token_dataset(), zo_config=config, callbacks=[callback])

    return build


def length_reward(completions, **kwargs):
    """A reward that varies within each group, so that the advantages, and the gradient, are not zero."""
    return [float(len(c[0]["content"]) % 7) for c in completions]


def grpo(preset: str):
    """TRL's GRPOTrainer with our SGD or AdamW preset: one prompt, 4 completions of up to 8 tokens a step."""

    def build(output_dir: Path, callback: HeldBytes) -> Trainer:
        from trl import GRPOTrainer

        from hf_ext.rl import adamw_grpo_config, sgd_grpo_config

        model, tokenizer = load_smollm2()
        config = {"sgd": sgd_grpo_config, "adamw": adamw_grpo_config}[preset]
        fields = {k: v for k, v in settings(output_dir, max_completion_length=8).items() if k != "learning_rate"}
        args = config(**fields)  # the preset's own learning rate
        return GRPOTrainer(
            model=model,
            reward_funcs=length_reward,
            args=args,
            train_dataset=arithmetic_dataset(16),
            processing_class=tokenizer,
            callbacks=[callback],
        )

    return build


def regularized_dpo(output_dir: Path, callback: HeldBytes) -> Trainer:
    """RegularizedDPOTrainer with AdamW and a reference model (which TRL shards like the policy)."""
    from hf_ext.alignment import RegularizedDPOConfig, RegularizedDPOTrainer

    model, tokenizer = load_smollm2()
    args = RegularizedDPOConfig(**settings(output_dir, optim="adamw_torch", max_length=4 * SEQUENCE_LENGTH))
    return RegularizedDPOTrainer(
        model=model,
        ref_model=load_smollm2()[0],
        args=args,
        train_dataset=preference_dataset(16),
        processing_class=tokenizer,
        callbacks=[callback],
    )


TRAINERS = {
    "adamw": adamw,
    "agzo": zeroth_order("agzo"),
    "mezo": zeroth_order("mezo"),
    "grpo_sgd": grpo("sgd"),
    "grpo_adamw": grpo("adamw"),
    "regularized_dpo": regularized_dpo,
}


def measure(name: str, out: Path) -> dict:
    """One trainer's run on this rank: the bytes held at the fullest optimizer step; the peak RSS above the RSS before
    the model was loaded, while setting up (loading, sharding) and while training; seconds."""
    callback = HeldBytes()
    with PeakRSS() as rss:  # entering resets the peak; the callback resets it again when training starts
        start = time.perf_counter()
        trainer = TRAINERS[name](out / name, callback)
        trainer.train()
        seconds = time.perf_counter() - start
    reference = getattr(trainer, "ref_model", None)
    held = callback.peak | {"reference": 0 if reference is None else tensor_bytes(reference.parameters())}
    del trainer, reference
    gc.collect()
    return held | {
        "setup_peak_rss_growth": callback.setup_peak_rss - rss.start,
        "train_peak_rss_growth": rss.peak - rss.start,
        "rss_before": rss.start,
        "seconds": seconds,
    }


def main(out: Path, names: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        mine = measure(name, out)
        ranks = [mine]
        if dist.is_initialized():
            ranks = [None] * dist.get_world_size()
            dist.all_gather_object(ranks, mine)
        if not dist.is_initialized() or dist.get_rank() == 0:
            (out / f"{name}.json").write_text(json.dumps({"world_size": world_size(), "ranks": ranks}, indent=2))


def launch(world_size: int, out: Path, names: list[str]) -> None:
    """This script on one plain process (N = 1) or on N FSDP2 processes with the shipped CPU config's settings."""
    env = os.environ | {
        "OMP_NUM_THREADS": "1",
        "MALLOC_MMAP_THRESHOLD_": str(64 * 1024),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")])),
    }
    command = [sys.executable, __file__]
    if world_size > 1:
        env |= fsdp_launch_env(recipes_dir() / "accelerate" / "fsdp2_cpu_2proc.yaml")
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world_size}"]
        command = [*torchrun, "-m", "hf_ext.distributed", __file__]
    subprocess.run([*command, "--output-dir", str(out), *names], check=True, env=env)


HELD = ("params", "grads", "state", "reference")


def held_of(rank: dict) -> int:
    """Parameters, gradients, optimizer state and reference model: the bytes a rank holds for training."""
    return sum(rank[k] for k in HELD)


def summarize(runs: dict[int, dict]) -> dict:
    """One trainer's rows by world size: the fullest rank's bytes and their ratio to one process's (1/N when every
    byte is split); the ranks' largest peak RSS growth while training and while setting up, over one process's,
    the training one with its spread over the ranks."""
    one = runs[1]["ranks"][0]
    rows = {}
    for world_size, run in sorted(runs.items()):
        fullest = max(run["ranks"], key=held_of)
        training = [rank["train_peak_rss_growth"] for rank in run["ranks"]]
        setup = max(rank["setup_peak_rss_growth"] for rank in run["ranks"])
        rows[world_size] = {k: fullest[k] for k in HELD} | {
            "held": held_of(fullest),
            "held_over_one": held_of(fullest) / held_of(one),
            "train_peak_rss_growth": max(training),
            "train_peak_rss_growth_over_one": max(training) / one["train_peak_rss_growth"],
            "train_peak_rss_growth_spread": (max(training) - min(training)) / one["train_peak_rss_growth"],
            "setup_peak_rss_growth": setup,
            "setup_peak_rss_growth_over_one": setup / one["setup_peak_rss_growth"],
            "seconds": max(rank["seconds"] for rank in run["ranks"]),
        }
    return rows


def trainer_memory(out: Path, world_sizes: list[int], names: list[str]) -> dict:
    """Run the trainers ``names`` (none: all) at each world size, one launch each, and summarize them by trainer."""
    if 1 not in world_sizes:
        raise ValueError(f"--world-sizes must include 1 (the reference), got {world_sizes}")
    if unknown := sorted(set(names) - TRAINERS.keys()):
        raise ValueError(f"--trainers must be among {list(TRAINERS)}, got {unknown}")
    names = names or list(TRAINERS)
    for world_size in world_sizes:
        launch(world_size, out / f"n{world_size}", names)
    return {
        name: summarize({n: json.loads((out / f"n{n}" / f"{name}.json").read_text()) for n in world_sizes})
        for name in names
    }


if __name__ == "__main__":
    parser = benchmark_parser(__doc__)
    parser.add_argument("trainers", nargs="+", choices=list(TRAINERS))
    arguments = parser.parse_args()
    main(Path(arguments.output_dir), arguments.trainers)
