"""Short training runs that a test repeats on one process and on FSDP2-sharded CPU processes (2, or 4).

``torchrun --nproc_per_node=N -m hf_ext.distributed _distributed_runs.py OUT RUN...`` (with the
FSDP variables of recipes/accelerate/fsdp2_cpu_2proc.yaml) runs each RUN sharded and writes
``OUT/RUN.pt`` from rank 0 (``LATER_RUNS`` in a second launch, which reads what the first wrote);
a test loads this file with ``runpy.run_path`` and calls the same
function in its own process for the one-process result. The global batch is the same in both.
"""

import os
import sys
from pathlib import Path

import torch
from accelerate.utils import patch_environment
from datasets import Dataset
from torch.distributed.tensor import DTensor
from transformers import Trainer, TrainingArguments

from hf_ext.models import tiny_causal_lm

GLOBAL_BATCH = 4


def world_size() -> int:
    """The number of processes torchrun started (the process group starts later, with the Trainer)."""
    return int(os.environ.get("WORLD_SIZE", 1))


def token_dataset(rows: int = 16, length: int = 12) -> Dataset:
    """Equal-length rows (no padding), so each rank's loss averages as many tokens as the others'."""
    ids = [[1 + (7 * row + 3 * col) % 97 for col in range(length)] for row in range(rows)]
    return Dataset.from_dict({"input_ids": ids, "labels": ids})


def cpu_settings(output_dir, **overrides) -> dict:
    """fp32 on CPU, three steps of the global batch, nothing saved; ``overrides`` win."""
    return {
        "output_dir": str(output_dir),
        "per_device_train_batch_size": GLOBAL_BATCH // world_size(),
        "max_steps": 3,
        "learning_rate": 1e-3,
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "no",
        "use_cpu": True,
        "bf16": False,
        "activation_checkpointing": False,
        "disable_tqdm": True,
        "dataloader_pin_memory": False,
        "seed": 0,
    } | overrides


def result(trainer) -> dict:
    """Whole parameters (gathered from the shards), whether they were sharded, and the logged losses."""
    params = {name: p.full_tensor() if isinstance(p, DTensor) else p for name, p in trainer.model.named_parameters()}
    return {
        "wrapped": type(trainer.model_wrapped).__name__,
        "params": {name: p.detach().cpu().clone() for name, p in params.items()},
        "sharded": [name for name, p in trainer.model.named_parameters() if isinstance(p, DTensor)],
        "losses": [entry["loss"] for entry in trainer.state.log_history if "loss" in entry],
    }


def adamw(output_dir, resume_from_checkpoint=None, **overrides) -> dict:
    """The stock Trainer with AdamW and gradient clipping."""
    model, _ = tiny_causal_lm(seed=0)
    args = TrainingArguments(**cpu_settings(output_dir, optim="adamw_torch", max_grad_norm=1.0, **overrides))
    trainer = Trainer(model=model, args=args, train_dataset=token_dataset())
    trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    return result(trainer)


def adamw_checkpointed(output_dir) -> dict:
    """``adamw`` saving a checkpoint after step 2 (DCP shards of the model and the optimizer, RNG states)."""
    return adamw(output_dir, save_strategy="steps", save_steps=2)


def adamw_resumed(output_dir) -> dict:
    """``adamw`` resumed from ``adamw_checkpointed``'s step-2 checkpoint, in a later launch: step 3 again."""
    return adamw(output_dir, Path(output_dir).parent / "adamw_checkpointed" / "checkpoint-2")


def zeroth_order(
    method: str, output_dir, resume_from_checkpoint=None, model_name="tiny", eps=1e-2, **overrides
) -> dict:
    """ZOTrainer (AGZO or MeZO) with isotropic noise on the other parameters (the sharded embeddings among them),
    on ``tiny_causal_lm`` or SmolLM2-135M (``model_name="smollm2"``)."""
    from hf_ext.models import load_causal_lm
    from hf_ext.zo import AGZOConfig, MeZOConfig, ZOTrainer

    model, _ = load_causal_lm(model_name)  # tiny_causal_lm's default seed is the other runs' 0
    settings = cpu_settings(output_dir, **{"learning_rate": 1e-2, "max_grad_norm": 0.0} | overrides)
    if method == "agzo":  # bases from steps 0 and 3: a run resumed at step 2 needs the saved ones
        config = AGZOConfig(rank=2, other_params="isotropic", eps=eps, subspace_refresh_interval=3)
    else:
        config = MeZOConfig(other_params="isotropic", eps=eps)
    trainer = ZOTrainer(model, TrainingArguments(**settings), train_dataset=token_dataset(), zo_config=config)
    trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    return result(trainer) | {"zo_steps": trainer.zo_optimizer.state_dict()["state"][0]["step"].item()}


def agzo_checkpointed(output_dir) -> dict:
    """AGZO saving a checkpoint after step 2 (DCP shards of the model; the ZO optimizer's step and bases)."""
    return zeroth_order("agzo", output_dir, save_strategy="steps", save_steps=2, max_steps=4)


def agzo_resumed(output_dir) -> dict:
    """``agzo_checkpointed`` resumed from its step-2 checkpoint in a later launch."""
    checkpoint = Path(output_dir).parent / "agzo_checkpointed" / "checkpoint-2"
    return zeroth_order("agzo", output_dir, checkpoint, max_steps=4)


def preference_run(algorithm: str, output_dir) -> dict:
    """Regularized DPO (with a reference model, which TRL shards too) or SimPO (no reference), two-sided penalty."""
    from hf_ext.alignment import (
        RegularizedDPOConfig,
        RegularizedDPOTrainer,
        RegularizedSimPOConfig,
        RegularizedSimPOTrainer,
    )
    from hf_ext.data import preference_dataset

    model, tokenizer = tiny_causal_lm(seed=0)
    settings = cpu_settings(output_dir, optim="adamw_torch", regularizer_coef=5.0, regularizer_form="two_sided")
    if algorithm == "dpo":
        trainer_class, args = RegularizedDPOTrainer, RegularizedDPOConfig(**settings)
        reference = {"ref_model": tiny_causal_lm(seed=1)[0]}
    else:
        trainer_class, args, reference = RegularizedSimPOTrainer, RegularizedSimPOConfig(**settings), {}
    data = preference_dataset(16)
    trainer = trainer_class(model=model, args=args, train_dataset=data, processing_class=tokenizer, **reference)
    trainer.train()
    reference_model = getattr(trainer, "ref_model", None)  # CPOTrainer (SimPO) has none
    ref_params = [] if reference_model is None else list(reference_model.parameters())
    logs = trainer.state.log_history
    return result(trainer) | {
        "reference_sharded": bool(ref_params) and all(isinstance(p, DTensor) for p in ref_params),
        "penalties": [entry["regularizer/penalty"] for entry in logs if "regularizer/penalty" in entry],
    }


def length_reward(completions, **kwargs):
    """Varies within each group, so that GRPO's advantages, and the gradient, are not zero."""
    return [float(len(c[0]["content"]) % 7) for c in completions]


def grpo_sgd(output_dir) -> dict:
    """TRL's GRPOTrainer with the SGD preset, the sparsity callbacks and the preset's delta checkpoint at step 3."""
    from trl import GRPOTrainer

    from hf_ext.data import arithmetic_dataset
    from hf_ext.rl import UpdateSparsityCallback, grpo_delta_callback, sgd_grpo_config

    model, tokenizer = tiny_causal_lm(seed=0)
    # Block checksums of 100 entries: blocks that straddle two ranks' shards.
    sparsity, blocks = UpdateSparsityCallback(), UpdateSparsityCallback(snapshot="block_hash", block_size=100)
    settings = cpu_settings(output_dir, save_strategy="steps", save_steps=3, learning_rate=1e-2)
    args = sgd_grpo_config(**settings | {"per_device_train_batch_size": 8 // world_size(), "max_completion_length": 8})
    data = arithmetic_dataset(16)
    callbacks = [sparsity, blocks, grpo_delta_callback()]
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=length_reward,
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
        callbacks=callbacks,
    )
    trainer.train()
    checksums = {name: sums.cpu() for name, sums in blocks.initial.items()}
    return result(trainer) | {"sparsity": sparsity.history, "block_sparsity": blocks.history, "checksums": checksums}


def grpo_sgd_replicated(output_dir) -> dict:
    """``grpo_sgd`` on the same processes without sharding (DDP): the same completions, which sampling draws per
    process, so that one process could not be compared."""
    with patch_environment(accelerate_use_fsdp="false"):
        return grpo_sgd(output_dir)


def delta_onto_sharded(output_dir) -> dict:
    """The replicated GRPO run's delta checkpoint applied to the initial model sharded by FSDP2 (after that run)."""
    from torch.distributed.fsdp import fully_shard

    from hf_ext.rl import apply_sparse_delta
    from hf_ext.rl.delta import DELTA_FILE

    model, _ = tiny_causal_lm(seed=0)
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    apply_sparse_delta(model, Path(output_dir).parent / "grpo_sgd_replicated" / "checkpoint-3" / DELTA_FILE)
    whole = {name: p.full_tensor() for name, p in model.named_parameters()}
    return {"params": {name: p.detach().cpu().clone() for name, p in whole.items()}}


def copy_of_sharded(output_dir) -> dict:
    """``unsharded_copy`` of the initial model sharded by FSDP2."""
    from torch.distributed.fsdp import fully_shard

    from hf_ext.distributed import unsharded_copy

    model, _ = tiny_causal_lm(seed=0)
    for layer in model.model.layers:
        fully_shard(layer)
    fully_shard(model)
    plain = unsharded_copy(model)
    return {
        "class": type(plain).__name__,
        "params": {name: p.detach().clone() for name, p in plain.named_parameters()},
        "sharded": [name for name, p in plain.named_parameters() if isinstance(p, DTensor)],
        "tied": plain.lm_head.weight is plain.model.embed_tokens.weight,
    }


RUNS = {
    "adamw": adamw,
    "adamw_checkpointed": adamw_checkpointed,
    "agzo": lambda output_dir: zeroth_order("agzo", output_dir),
    "mezo": lambda output_dir: zeroth_order("mezo", output_dir),
    "agzo_checkpointed": agzo_checkpointed,
    "dpo": lambda output_dir: preference_run("dpo", output_dir),
    "simpo": lambda output_dir: preference_run("simpo", output_dir),
    "grpo_sgd": grpo_sgd,
    "grpo_sgd_replicated": grpo_sgd_replicated,
    "delta_onto_sharded": delta_onto_sharded,
    "copy_of_sharded": copy_of_sharded,
}

# Run in a second launch, after RUNS: they read what those wrote.
LATER_RUNS = {"adamw_resumed": adamw_resumed, "agzo_resumed": agzo_resumed}

# The pretrained 135M model at MeZO's usual scale of steps (the tiny model's lr 1e-2 diverges on it): launched by the
# slow tests only.
SMOLLM2_RUNS = {
    f"{method}_smollm2": lambda output_dir, method=method: zeroth_order(
        method, output_dir, model_name="smollm2", eps=1e-3, learning_rate=1e-5
    )
    for method in ("agzo", "mezo")
}
ALL_RUNS = RUNS | LATER_RUNS | SMOLLM2_RUNS

if __name__ == "__main__":
    out, names = Path(sys.argv[1]), sys.argv[2:]
    for name in names:
        outcome = ALL_RUNS[name](out / name)
        if torch.distributed.get_rank() == 0:
            torch.save(outcome, out / f"{name}.pt")
