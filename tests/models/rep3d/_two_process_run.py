"""Run by torchrun with 2 CPU processes from test_trainer.py: a short Trainer run of Rep3D, then each rank
writes its parameters and evaluation metrics."""

import sys
from pathlib import Path

import torch
from transformers import Trainer, TrainingArguments

from hf_ext.data import volume_segmentation
from hf_ext.data.volumes import class_names
from hf_ext.models.rep3d import DiceMetrics, Rep3DConfig, Rep3DForSegmentation, argmax_logits


def main(out_dir: Path) -> None:
    torch.manual_seed(0)
    config = Rep3DConfig(hidden_sizes=[4, 8], depths=[1, 1], kernel_sizes=[7, 3], decoder_hidden_size=8, num_labels=4)
    data = volume_segmentation(num_train=8, num_validation=4, size=16)
    args = TrainingArguments(
        output_dir=str(out_dir / "trainer"),
        per_device_train_batch_size=2,
        per_device_eval_batch_size=2,
        max_steps=3,
        learning_rate=1e-2,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        dataloader_pin_memory=False,
    )
    trainer = Trainer(
        model=Rep3DForSegmentation(config),
        args=args,
        train_dataset=data["train"],
        eval_dataset=data["validation"],
        compute_metrics=DiceMetrics(class_names(4)),
        preprocess_logits_for_metrics=argmax_logits,
    )
    trainer.train()
    metrics = trainer.evaluate()
    torch.save(
        {
            "num_processes": trainer.accelerator.num_processes,
            "metrics": {
                k: v
                for k, v in metrics.items()
                if k.startswith("eval_") and "runtime" not in k and "per_second" not in k
            },
            "params": {n: p.detach().clone() for n, p in trainer.model.named_parameters()},
        },
        out_dir / f"rank{trainer.accelerator.process_index}.pt",
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
