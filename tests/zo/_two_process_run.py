"""Run by torchrun with 2 CPU processes from test_two_process.py: a short AGZO run, then each rank
writes its final parameters and the first batch it saw."""

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from transformers import DataCollatorForSeq2Seq, TrainingArguments

from hf_ext.data import arithmetic_dataset
from hf_ext.data.sft import tokenize_prompt_completion
from hf_ext.models import tiny_causal_lm
from hf_ext.zo import AGZOConfig, ZOTrainer


def main(out_dir: Path) -> None:
    model, tokenizer = tiny_causal_lm(seed=0)
    data = arithmetic_dataset(32, seed=1)
    data = data.map(tokenize_prompt_completion, fn_kwargs={"tokenizer": tokenizer}, remove_columns=data.column_names)
    args = TrainingArguments(
        output_dir=str(out_dir / "trainer"),
        per_device_train_batch_size=4,
        max_steps=4,
        learning_rate=1e-2,
        max_grad_norm=0.0,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        dataloader_pin_memory=False,
    )
    trainer = ZOTrainer(
        model,
        args,
        train_dataset=data,
        data_collator=DataCollatorForSeq2Seq(tokenizer, padding=True),
        zo_config=AGZOConfig(rank=2, other_params="isotropic", eps=1e-2),
    )
    first_batch = next(iter(trainer.get_train_dataloader()))["input_ids"]
    trainer.train()
    rank = trainer.accelerator.process_index
    torch.save(
        {
            "num_processes": trainer.accelerator.num_processes,
            "wrapped": type(trainer.model_wrapped).__name__,
            "first_batch": first_batch,
            "params": {n: p.detach().clone() for n, p in model.named_parameters()},
        },
        out_dir / f"rank{rank}.pt",
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
    dist.destroy_process_group()
    os._exit(0)  # not Python's shutdown, where gloo's threads aborted a rank once after its run had finished
