"""Step-size sensitivity: SPS, NGN and NGN-M against SGD, SGD+momentum and AdamW (torch.optim) on four problems.

    python benchmarks/stepsize_sensitivity.py [--seeds 0 1 2] [--timing-rounds 5]

Runs the ``stepsize_sensitivity`` recipe with its shipped config (13 step sizes from 1e-4 to 1e2;
logistic regression on breast-cancer and digits, an MLP on digits, a 2-layer Llama on standard-library
source) and reports per problem and method the width in decades of the range within 10% of the best
(convex: of the best suboptimality; non-convex: of the best loss), its spread over seeds (the width of
each seed's own curve), and the loss ratio at 10x the best step size. Then the seconds per step
(forward, backward, optimizer) of each method over SGD's, timed by the recipe (``timing_rounds``) in 7
interleaved rounds of 50 steps on a fixed batch, so that load from other processes hits every method
alike. The issue's goals are checked: SPS's and NGN's width >= 2x SGD's on the convex problems, wider
than AdamW's on at least one non-convex problem, step time <= 1.05x SGD's. About 17 minutes on 2 shared
CPU cores. The last line is JSON.
"""

import statistics
from pathlib import Path

import torch
from _harness import benchmark_parser, emit, save_json

from hf_ext.recipes import shipped_config
from hf_ext.recipes.stepsize_sensitivity import main as run_recipe

CONVEX = ("breast_cancer_logreg", "digits_logreg")
ADAPTIVE = ("sps", "ngn", "ngn_m")


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1, 2])
    parser.add_argument("--timing-rounds", type=int, default=7)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads: the models are tiny, 1 avoids contention"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    output_dir = Path(args.output_dir) / "stepsize_sensitivity"
    flags = ["--config", str(shipped_config("stepsize_sensitivity")), "--output_dir", str(output_dir)]
    flags += ["--seeds", *map(str, args.seeds), "--timing_rounds", str(args.timing_rounds)]
    results = run_recipe(flags)
    problems, methods = results["args"]["problems"], results["args"]["methods"]
    times = {p: {m: results["summary"][f"{p}/{m}"]["step_time_vs_sgd"] for m in methods} for p in problems}
    for problem, ratios in times.items():
        print(f"{problem}: step time / SGD " + ", ".join(f"{m} {r:.3f}" for m, r in ratios.items()), flush=True)
    summary = {"seeds": args.seeds, "grid_decades": 6, "grid_points": len(results["grid"])}
    for problem in problems:
        for method in methods:
            entry = results["summary"][f"{problem}/{method}"]
            key = f"{problem}/{method}"
            per_seed = entry["width_decades_per_seed"]
            summary[f"{key}/width_decades"] = round(entry["width_decades"], 3)
            summary[f"{key}/width_reaches_grid_end"] = entry["width_reaches_grid_end"]
            summary[f"{key}/width_per_seed_mean"] = round(statistics.mean(per_seed), 3)
            summary[f"{key}/width_per_seed_std"] = round(statistics.stdev(per_seed), 3) if len(per_seed) > 1 else 0.0
            ratio = entry["ratio_at_10x_best"]
            summary[f"{key}/ratio_at_10x_best"] = None if ratio is None else min(round(ratio, 3), 1e9)
            summary[f"{key}/best_step_size"] = entry["best_step_size"]
            summary[f"{key}/step_time_vs_sgd"] = round(times[problem][method], 3)
    width = {key.removesuffix("/width_decades"): v for key, v in summary.items() if key.endswith("/width_decades")}
    summary["goal_convex_width_2x_sgd"] = {
        f"{p}/{m}": width[f"{p}/{m}"] >= 2 * width[f"{p}/sgd"] for p in CONVEX for m in ADAPTIVE
    }
    summary["goal_nonconvex_wider_than_adamw"] = {
        m: [p for p in problems if p not in CONVEX and width[f"{p}/{m}"] > width[f"{p}/adamw"]] for m in ADAPTIVE
    }
    summary["goal_step_time_within_1.05"] = {f"{p}/{m}": times[p][m] <= 1.05 for p in problems for m in ADAPTIVE}
    save_json(args.output_dir, "stepsize_sensitivity", summary)
    emit(summary)


if __name__ == "__main__":
    main()
