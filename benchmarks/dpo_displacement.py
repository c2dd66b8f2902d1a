"""Likelihood displacement: vanilla vs regularized DPO and SimPO from the same start on the same pairs.

    python benchmarks/dpo_displacement.py [--algorithms dpo simpo] [--max-steps 60] [--model smollm2] [--seeds 0 1 2]

Runs the ``dpo_regularized`` recipe with its shipped configs (SmolLM2-135M-Instruct, 64 training
pairs, lr 3e-5, 60 steps: a regime where stock DPO lowers the chosen likelihood) and reports,
on 64 held-out pairs, the change of the chosen and rejected responses' mean token log-prob, of
log P, and TRL's reward accuracy and margin after training. Expected shape: vanilla lets the
chosen log-prob fall, the regularized run keeps it near or above its start with comparable
accuracy. Each seed draws its own training and held-out pairs; every number is reported as the mean
over seeds with ``_std`` beside it (``_displaces_chosen`` as the share of seeds where it happened).
About 25 minutes per seed on 2 CPU cores for both algorithms. The last line is JSON.
"""

import argparse
import statistics
from pathlib import Path

from _harness import benchmark_parser, emit, save_json

from hf_ext.models import CAUSAL_LMS
from hf_ext.recipes import recipes_dir
from hf_ext.recipes.dpo_regularized import main as run_recipe

REPORTED = ("chosen_mean_logp_change", "rejected_mean_logp_change", "log_p_change")


def run_seed(args: argparse.Namespace, seed: int) -> dict[str, float]:
    """One seed: each algorithm's vanilla and regularized runs, flattened to ``<algorithm>_<variant>_<number>``."""
    summary = {}
    for algorithm in args.algorithms:
        config = recipes_dir() / "configs" / f"{algorithm}_regularized.yaml"
        output_dir = Path(args.output_dir) / f"{algorithm}_displacement" / f"seed_{seed}"
        results = run_recipe(
            ["--config", str(config), "--model", args.model, "--max_steps", str(args.max_steps)]
            + ["--seed", str(seed), "--output_dir", str(output_dir), "--disable_tqdm", "true"]
        )
        for variant, result in results.items():
            prefix = f"{algorithm}_{variant}"
            summary |= {f"{prefix}_{key}": result["held_out_displacement"][key] for key in REPORTED}
            summary[f"{prefix}_reward_accuracy"] = result["held_out_after"]["reward_accuracy"]
            summary[f"{prefix}_reward_margin"] = result["held_out_after"]["reward_margin"]
        if {"vanilla", "regularized"} <= set(results):
            summary[f"{algorithm}_vanilla_displaces_chosen"] = float(
                summary[f"{algorithm}_vanilla_chosen_mean_logp_change"] < 0
            )
            summary[f"{algorithm}_regularized_minus_vanilla_chosen_change"] = (
                summary[f"{algorithm}_regularized_chosen_mean_logp_change"]
                - summary[f"{algorithm}_vanilla_chosen_mean_logp_change"]
            )
    return summary


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1, 2], seeds_help="seeds of the pairs and the runs")
    parser.add_argument("--algorithms", nargs="+", choices=["dpo", "simpo"], default=["dpo", "simpo"])
    parser.add_argument("--max-steps", type=int, default=60)
    parser.add_argument("--model", choices=sorted(CAUSAL_LMS), default="smollm2")
    args = parser.parse_args()
    per_seed = {seed: run_seed(args, seed) for seed in args.seeds}
    summary = {"model": args.model, "max_steps": args.max_steps, "seeds": args.seeds}
    for key in per_seed[args.seeds[0]]:
        values = [runs[key] for runs in per_seed.values()]
        summary[key] = statistics.fmean(values)
        summary[f"{key}_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
    save_json(args.output_dir, "dpo_displacement", summary | {"per_seed": per_seed})
    emit(summary)


if __name__ == "__main__":
    main()
