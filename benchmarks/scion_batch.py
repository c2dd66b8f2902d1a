"""Scion's batch size at a fixed token budget: the three regimes, the predicted critical batch, the adaptive schedule.

    python benchmarks/scion_batch.py [--seeds 0 1] [--token-budget 32768] [--seq-len 32]

Runs ``recipes/scion_batch.py`` (a 2-layer Llama pretrained from scratch on standard-library source
through the stock Trainer, every run on the same tokens) and prints, as measured: held-out loss
against tokens per step for fixed batch sizes 1..64 (each at its best of three step sizes), the
critical tokens per step predicted from the constants measured on the run against the empirical
best, the adaptive schedule against the best fixed batch (final loss, optimizer steps, steps to
reach the best fixed final loss), and AdamW and ``torch.optim.Muon`` at the best fixed batch, each
tuned over the same step-size multipliers. Mean and std over the seeds. The last line is JSON.
"""

from _harness import benchmark_parser, emit, save_json

from hf_ext.recipes import recipes_dir
from hf_ext.recipes.scion_batch import main as run_recipe


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1])
    parser.add_argument("--token-budget", type=int, default=32768)
    parser.add_argument("--seq-len", type=int, default=32)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--corpus-files", type=int, default=60)
    args = parser.parse_args()
    out = f"{args.output_dir}/scion_batch"
    results = run_recipe(
        [
            "--config",
            str(recipes_dir() / "configs" / "scion_batch.yaml"),
            "--output_dir",
            out,
            "--seeds",
            *map(str, args.seeds),
            "--token_budget",
            str(args.token_budget),
            "--seq_len",
            str(args.seq_len),
            "--batch_sizes",
            *map(str, args.batch_sizes),
            "--corpus_files",
            str(args.corpus_files),
            "--eval_points",
            "4",
            "--eval_blocks",
            "32",
        ]
    )
    summary = {"seeds": args.seeds, "token_budget": args.token_budget, "seq_len": args.seq_len}
    for row in results["fixed"]:
        print(
            f"fixed {row['tokens_per_step']:>5} tokens/step ({row['steps']:>4} steps, lr {row['lr']:.3g}): "
            f"held-out loss {row['final_loss']:.4f} +- {row['final_loss_std']:.4f}",
            flush=True,
        )
        summary[f"fixed_{row['tokens_per_step']}_loss"] = row["final_loss"]
        summary[f"fixed_{row['tokens_per_step']}_loss_std"] = row["final_loss_std"]
    best = results["best_fixed"]
    summary |= {
        "best_fixed_tokens_per_step": best["tokens_per_step"],
        "best_fixed_loss": best["final_loss"],
        "best_fixed_steps": best["steps"],
        "best_fixed_lr": best["lr"],
        "adaptive_steps_to_best_fixed_loss": results["adaptive_steps_to_best_fixed_loss"],
    }
    for key in ("adaptive", "adamw", "muon"):
        row = results[key]
        summary |= {f"{key}_loss": row["final_loss"], f"{key}_loss_std": row["final_loss_std"]}
        summary |= {f"{key}_steps": row["steps"], f"{key}_lr": row["lr"], f"{key}_tokens": row["tokens"]}
        print(f"{key}: held-out loss {row['final_loss']:.4f} +- {row['final_loss_std']:.4f}, {row['steps']} steps")
    for key, prediction in results["predicted"].items():
        summary[f"predicted_tokens_per_step_{key}"] = prediction["tokens_per_step"]
        summary[f"predicted_lr_{key}"] = prediction["lr"]
        summary[f"predicted_over_best_{key}"] = results[f"predicted_over_best_{key}"]
    save_json(args.output_dir, "scion_batch", summary)
    emit(summary)


if __name__ == "__main__":
    main()
