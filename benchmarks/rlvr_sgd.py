"""SGD vs AdamW for GRPO on verifiable arithmetic: reward, update sparsity, optimizer state, delta sizes.

    python benchmarks/rlvr_sgd.py [--max-steps 20] [--seeds 0 1] [--param-dtypes float32 bfloat16] [--num-eval 64]

Runs the ``grpo_sgd`` recipe with its shipped config (SmolLM2-135M-Instruct, presets' learning
rates, same seed and budget for both optimizers) for each seed and parameter dtype, and reports
for each optimizer: held-out mean reward (greedy exact answer) at start and end, the fraction of
parameter entries changed (bit-exact in the training dtype; by at least half a bf16 ulp; with a
different bf16-rounded value), optimizer-state bytes, and a sparse delta's size as a fraction of
a full checkpoint in both modes (exact; bf16-visible). ``bfloat16`` parameters are stored and
updated in bf16 (no fp32 master copy), the setting where small steps round away. Means and
standard deviations over the seeds. The defaults (2 seeds x 2 dtypes x 2 optimizers x 20 steps)
are 160 GRPO steps, as many as the former single 80-step pair (about 20 minutes on 2 idle CPU
cores); docs/results/rl.md (*Measured sizes*) has a 3-step run measured on busy cores. The last line is JSON.
"""

import statistics
from pathlib import Path

from _harness import benchmark_parser, emit, save_json

from hf_ext.models import CAUSAL_LMS
from hf_ext.recipes import recipes_dir
from hf_ext.recipes.grpo_sgd import main as run_recipe

REPORTED = (
    "held_out_reward_before",
    "held_out_reward_after",
    "changed_fraction",
    "changed_fraction_bf16",
    "delta_changed_fraction_visible",
    "optimizer_state_bytes",
    "delta_over_full_exact",
    "delta_over_full_visible",
)


def _mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1])
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--param-dtypes", nargs="+", default=["float32", "bfloat16"], help="the recipe's param_dtype")
    parser.add_argument("--model", choices=sorted(CAUSAL_LMS), default="smollm2")
    parser.add_argument("--num-eval", type=int, default=64, help="held-out prompts for the reward")
    args = parser.parse_args()
    runs = {}  # (param dtype, optimizer) -> one result per seed
    for param_dtype in args.param_dtypes:
        for seed in args.seeds:
            out = Path(args.output_dir) / "rlvr_sgd" / f"{param_dtype}_seed{seed}"
            results = run_recipe(
                ["--config", str(recipes_dir() / "configs" / "grpo_sgd.yaml"), "--model", args.model]
                + ["--param_dtype", param_dtype, "--seed", str(seed), "--output_dir", str(out)]
                + ["--max_steps", str(args.max_steps), "--num_eval", str(args.num_eval), "--disable_tqdm", "true"]
            )
            for optimizer, result in results.items():
                runs.setdefault((param_dtype, optimizer), []).append(result)
    summary = {"model": args.model, "max_steps": args.max_steps, "seeds": args.seeds, "num_eval": args.num_eval}
    for (param_dtype, optimizer), results in runs.items():
        for key in REPORTED:
            mean, std = _mean_std([result[key] for result in results])
            summary[f"{param_dtype}_{optimizer}_{key}"], summary[f"{param_dtype}_{optimizer}_{key}_std"] = mean, std
    save_json(args.output_dir, "rlvr_sgd", summary)
    emit(summary)


if __name__ == "__main__":
    main()
