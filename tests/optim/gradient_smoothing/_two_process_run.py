"""Run by torchrun with 2 CPU processes from test_trainer_integration.py: a short Trainer run with
gradient smoothing, then each rank writes its final parameters."""

import sys
from pathlib import Path

import torch
from datasets import Dataset
from transformers import Trainer, TrainingArguments

from hf_ext.models import tiny_causal_lm
from hf_ext.optim import GradientSmoothingFactory


def main(out_dir: Path) -> None:
    model, _ = tiny_causal_lm(num_layers=3)
    ids = torch.randint(0, 500, (32, 12), generator=torch.Generator().manual_seed(0)).tolist()
    args = TrainingArguments(
        output_dir=str(out_dir / "trainer"),
        per_device_train_batch_size=4,
        max_steps=4,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        dataloader_pin_memory=False,
    )
    factory = (GradientSmoothingFactory, {"base_kwargs": {"lr": 1e-2}, "window": 3})
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_dict({"input_ids": ids, "labels": ids}),
        optimizer_cls_and_kwargs=factory,
    )
    trainer.train()
    torch.save(
        {
            "num_processes": trainer.accelerator.num_processes,
            "optimizer": type(trainer.optimizer.optimizer).__name__,
            "params": {n: p.detach().clone() for n, p in model.named_parameters()},
        },
        out_dir / f"rank{trainer.accelerator.process_index}.pt",
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
