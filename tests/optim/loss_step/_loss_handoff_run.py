"""Run by torchrun with 2 CPU processes from test_loss_trainer.py: two NGN steps through the Trainer's
``optimizer_cls_and_kwargs`` on half of the 8 blocks each, then each rank writes its parameters and step sizes."""

import sys
from pathlib import Path

import torch
from transformers import TrainingArguments

from hf_ext.models import tiny_causal_lm
from hf_ext.optim import NGN, LossToOptimizerTrainer

sys.path.insert(0, str(Path(__file__).parent))
from test_loss_trainer import RUN, blocks  # noqa: E402


def main(out_dir: Path) -> None:
    model, _ = tiny_causal_lm()
    args = TrainingArguments(output_dir=str(out_dir / "trainer"), per_device_train_batch_size=4, use_cpu=True, **RUN)
    trainer = LossToOptimizerTrainer(
        model=model, args=args, train_dataset=blocks(), optimizer_cls_and_kwargs=(NGN, {"lr": 100.0})
    )
    trainer.train()
    torch.save(
        {
            "num_processes": trainer.accelerator.num_processes,
            "step_sizes": [e["step_size"] for e in trainer.state.log_history if "step_size" in e],
            "params": {n: p.detach().clone() for n, p in model.named_parameters()},
        },
        out_dir / f"rank{trainer.accelerator.process_index}.pt",
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
