"""Cost of the total-probability regularizer per training step, vs TRL's plain DPO and SimPO.

    python benchmarks/dpo_regularizer_overhead.py [--steps 8] [--warmup 2] [--rounds 3] [--model smollm2]

Trains SmolLM2-135M-Instruct on the same arithmetic preference batches with TRL's trainer and
with ours (regularizer_coef 1), alternating ``--rounds`` times; a callback times each optimizer
step. Both trainers see the same batches in the same order, so each step after ``--warmup``
gives a paired ratio regularized / plain; the reported ratio is the median of those over all
rounds (robust to the odd slow step that a shared 2-core machine produces). SimPO's one-off anchor pass
at construction is reported separately. Target: ratio <= 1.05. The last line is JSON.
"""

import statistics
import time

from _harness import benchmark_parser, emit, save_json
from transformers import TrainerCallback
from trl import DPOConfig, DPOTrainer
from trl.experimental.cpo import CPOConfig, CPOTrainer

from hf_ext.alignment import (
    RegularizedDPOConfig,
    RegularizedDPOTrainer,
    RegularizedSimPOConfig,
    RegularizedSimPOTrainer,
)
from hf_ext.data import preference_dataset
from hf_ext.models import CAUSAL_LMS, load_causal_lm

SIMPO = {"loss_type": "simpo", "cpo_alpha": 0.0, "beta": 2.0, "simpo_gamma": 0.5}
TRAINERS = {
    ("dpo", "plain"): (DPOTrainer, DPOConfig, {}),
    ("dpo", "regularized"): (RegularizedDPOTrainer, RegularizedDPOConfig, {"regularizer_coef": 1.0}),
    ("simpo", "plain"): (CPOTrainer, CPOConfig, SIMPO),
    ("simpo", "regularized"): (RegularizedSimPOTrainer, RegularizedSimPOConfig, SIMPO | {"regularizer_coef": 1.0}),
}


class StepTimer(TrainerCallback):
    """Wall time of each optimizer step."""

    def __init__(self):
        self.seconds, self._start = [], 0.0

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.seconds.append(time.perf_counter() - self._start)


def time_steps(algorithm: str, variant: str, model_name: str, steps: int) -> dict:
    """Per-step seconds of one short run, and how long building the trainer took."""
    trainer_class, config_class, extra = TRAINERS[algorithm, variant]
    model, tokenizer = load_causal_lm(model_name)
    reference = {"ref_model": load_causal_lm(model_name)[0]} if algorithm == "dpo" else {}
    args = config_class(
        output_dir="/tmp/hf_ext_dpo_overhead",
        per_device_train_batch_size=4,
        max_steps=steps,
        learning_rate=3e-5,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        bf16=False,
        activation_checkpointing=False,
        dataloader_pin_memory=False,
        disable_tqdm=True,
        seed=0,
        **extra,
    )
    timer = StepTimer()
    start = time.perf_counter()
    trainer = trainer_class(
        model=model,
        args=args,
        train_dataset=preference_dataset(64),
        processing_class=tokenizer,
        callbacks=[timer],
        **reference,
    )
    construction = time.perf_counter() - start
    trainer.train()
    return {"step_seconds": timer.seconds, "construction_seconds": construction}


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", choices=sorted(CAUSAL_LMS), default="smollm2")
    parser.add_argument("--algorithms", nargs="+", choices=["dpo", "simpo"], default=["dpo", "simpo"])
    args = parser.parse_args()
    runs, summary = {}, {"model": args.model, "steps": args.steps, "warmup": args.warmup, "rounds": args.rounds}
    for algorithm in args.algorithms:
        ratios = []
        for _ in range(args.rounds):
            steps = {}
            for variant in ("plain", "regularized"):
                run = time_steps(algorithm, variant, args.model, args.warmup + args.steps)
                runs.setdefault(f"{algorithm}_{variant}", []).append(run)
                steps[variant] = run["step_seconds"][args.warmup :]
            ratios += [r / p for r, p in zip(steps["regularized"], steps["plain"], strict=True)]
        summary[f"{algorithm}_overhead_ratio"] = statistics.median(ratios)
        summary[f"{algorithm}_step_ratio_quartiles"] = statistics.quantiles(ratios, n=4)
        for variant in ("plain", "regularized"):
            construction = statistics.median(r["construction_seconds"] for r in runs[f"{algorithm}_{variant}"])
            summary[f"{algorithm}_{variant}_construction_seconds"] = construction
        print(f"{algorithm}: regularized / plain step time {summary[f'{algorithm}_overhead_ratio']:.3f}", flush=True)
    summary["target_met"] = all(summary[f"{a}_overhead_ratio"] <= 1.05 for a in args.algorithms)
    save_json(args.output_dir, "dpo_regularizer_overhead", {"runs": runs, "summary": summary})
    emit(summary)


if __name__ == "__main__":
    main()
