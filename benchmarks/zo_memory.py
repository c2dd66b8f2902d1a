"""Peak memory of one training step on SmolLM2-135M: AGZO vs MeZO vs a first-order AdamW step.

    python benchmarks/zo_memory.py [--batch-size 8] [--seq-len 128] [--repeats 3]

Each configuration runs in its own process, ``--repeats`` times (the median is reported), with
``MALLOC_ARENA_MAX=2`` so that glibc's per-thread arenas do not add noise to the readings. The
step's peak resident memory (RSS; the kernel's high-water mark, reset before the step) is reported
twice, in MiB: as absolute RSS, and above the process's RSS after importing the libraries and
before loading the model (what the model, its optimizer state and the step itself take, the CPU
analogue of CUDA's allocated memory).
Targets, on the latter: AGZO/MeZO <= 1.10 and AGZO/AdamW <= 0.40. The last line is JSON.
"""

import argparse
import json

from _harness import PeakRSS, benchmark_parser, current_rss, emit, median_of_isolated_runs, save_json

CONFIGS = ("agzo", "mezo", "adamw")


def run_one(config: str, batch_size: int, seq_len: int) -> dict:
    """One training step of ``config`` in this process; returns its memory figures in MiB."""
    from transformers import Trainer, TrainingArguments

    from hf_ext.data import stdlib_corpus
    from hf_ext.models import load_smollm2, load_smollm2_tokenizer
    from hf_ext.zo import AGZOConfig, MeZOConfig, ZOTrainer

    tokenizer = load_smollm2_tokenizer()
    data = stdlib_corpus(tokenizer, block_size=seq_len, max_files=40)["train"].select(range(batch_size))
    baseline = current_rss()
    model, _ = load_smollm2()
    args = TrainingArguments(
        output_dir="/tmp/hf_ext_zo_memory",
        per_device_train_batch_size=batch_size,
        max_steps=1,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        dataloader_pin_memory=False,
        max_grad_norm=0.0 if config != "adamw" else 1.0,
        learning_rate=1e-6,
    )
    if config == "adamw":
        trainer = Trainer(model, args, train_dataset=data)
    else:
        zo_config = AGZOConfig() if config == "agzo" else MeZOConfig()
        trainer = ZOTrainer(model, args, train_dataset=data, zo_config=zo_config)
    with PeakRSS() as peak:
        trainer.train()
    mib = 1024**2
    return {"peak_rss_mib": peak.peak / mib, "peak_above_baseline_mib": (peak.peak - baseline) / mib}


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=CONFIGS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        print(json.dumps(run_one(args.only, args.batch_size, args.seq_len)))
        return
    results = {}
    for config in CONFIGS:
        flags = ["--only", config, "--batch-size", str(args.batch_size), "--seq-len", str(args.seq_len)]
        results[config] = median_of_isolated_runs(__file__, flags, args.repeats)
        print(
            f"{config}: peak RSS {results[config]['peak_rss_mib']:.0f} MiB, "
            f"{results[config]['peak_above_baseline_mib']:.0f} MiB above the import baseline",
            flush=True,
        )
    key = "peak_above_baseline_mib"
    summary = {
        "batch_size": args.batch_size,
        "seq_len": args.seq_len,
        "repeats": args.repeats,
        **{f"{c}_{key}": results[c][key] for c in CONFIGS},
        "agzo_over_mezo": results["agzo"][key] / results["mezo"][key],
        "agzo_over_adamw": results["agzo"][key] / results["adamw"][key],
        "agzo_over_mezo_absolute": results["agzo"]["peak_rss_mib"] / results["mezo"]["peak_rss_mib"],
        "agzo_over_adamw_absolute": results["agzo"]["peak_rss_mib"] / results["adamw"]["peak_rss_mib"],
    }
    summary["target_met"] = summary["agzo_over_mezo"] <= 1.10 and summary["agzo_over_adamw"] <= 0.40
    save_json(args.output_dir, "zo_memory", {"results": results, "summary": summary})
    emit(summary)


if __name__ == "__main__":
    main()
