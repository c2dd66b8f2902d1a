"""Run by torchrun with 2 CPU processes from test_decentralized_trainer.py: a short DecentralizedTrainer run
with the metrics callback; each rank writes its own final parameters, the Trainer saves the average."""

import sys
from pathlib import Path

import torch
from datasets import Dataset
from transformers import TrainingArguments

from hf_ext.models import tiny_causal_lm
from hf_ext.optim import DecentralizedMetricsCallback, DecentralizedSGDFactory, DecentralizedTrainer


def main(out_dir: Path) -> None:
    model, _ = tiny_causal_lm(num_layers=2)
    ids = torch.randint(0, 500, (32, 12), generator=torch.Generator().manual_seed(0))
    args = TrainingArguments(
        output_dir=str(out_dir / "trainer"),
        per_device_train_batch_size=4,
        max_steps=4,
        logging_steps=100,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        dataloader_pin_memory=False,
        disable_tqdm=True,
    )
    trainer = DecentralizedTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_dict({"input_ids": ids.tolist(), "labels": ids.tolist()}),
        optimizer_cls_and_kwargs=(DecentralizedSGDFactory, {"base_kwargs": {"lr": 0.05}, "topology": "ring"}),
        callbacks=[DecentralizedMetricsCallback(every=2, loss_inputs={"input_ids": ids[:4], "labels": ids[:4]})],
    )
    trainer.train()
    own = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer.save_model(str(out_dir / "saved"))
    torch.save(
        {
            "num_processes": trainer.accelerator.num_processes,
            "wrapped": type(trainer.model_wrapped).__name__,
            "params": own,
            "after_save": {n: p.detach().clone() for n, p in model.named_parameters()},
            "log_history": trainer.state.log_history,
        },
        out_dir / f"rank{trainer.accelerator.process_index}.pt",
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
