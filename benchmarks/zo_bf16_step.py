"""A few AGZO training steps on SmolLM2-135M in bfloat16 (the GPU check's training step).

    python benchmarks/zo_bf16_step.py [--steps 3]

Runs on CUDA when available (Triton kernels), else on the CPU (torch references). Checks that
losses are finite and that the weights moved; prints seconds per step and, on CUDA, the peak
allocated memory. The last line is JSON.
"""

import argparse
import time

import torch
from _harness import emit
from transformers import TrainingArguments

from hf_ext.data import stdlib_corpus
from hf_ext.kernels import use_triton
from hf_ext.models import load_smollm2
from hf_ext.zo import AGZOConfig, ZOTrainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    model, tokenizer = load_smollm2(dtype=torch.bfloat16)
    data = stdlib_corpus(tokenizer, block_size=128, max_files=20)["train"]
    weight = model.model.layers[0].mlp.up_proj.weight
    before = weight.detach().float().clone()
    training_args = TrainingArguments(
        output_dir="/tmp/hf_ext_bf16_step",
        per_device_train_batch_size=args.batch_size,
        max_steps=args.steps,
        learning_rate=1e-3,
        max_grad_norm=0.0,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=not cuda,
        dataloader_pin_memory=False,
    )
    trainer = ZOTrainer(model, training_args, train_dataset=data, zo_config=AGZOConfig())
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    trainer.train()
    seconds = (time.perf_counter() - start) / args.steps
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    moved = (weight.detach().float().to(before.device) - before).abs().max().item()
    result = {
        "device": torch.cuda.get_device_name() if cuda else "cpu",
        "triton_kernels": use_triton(weight),
        "dtype": str(weight.dtype),
        "seconds_per_step": seconds,
        "losses": losses,
        "finite": all(torch.isfinite(torch.tensor(losses)).tolist()),
        "weights_moved": moved > 0,
    }
    if cuda:
        result["peak_allocated_gib"] = torch.cuda.max_memory_allocated() / 1024**3
    emit(result)


if __name__ == "__main__":
    main()
