"""Step-size sensitivity: SPS, NGN and NGN-M against SGD, SGD+momentum and AdamW (torch.optim) on four problems.

    python benchmarks/stepsize_sensitivity.py [--seeds 0 1 2] [--timing-rounds 5]

Runs the ``stepsize_sensitivity`` recipe with its shipped config (13 step sizes from 1e-4 to 1e2;
logistic regression on breast-cancer and digits, an MLP on digits, a 2-layer Llama on
standard-library source) and reports per problem and method the width in decades of the range
within 10% of the best (convex: of the best suboptimality; non-convex: of the best loss), its
spread over seeds (the width of each seed's own curve), and the loss ratio at 10x the best step
size. Then the seconds per step (forward, backward, optimizer) of each method over SGD's, timed
interleaved (7 rounds of 50 steps) on a fixed batch so that load from other processes hits every method alike. The
issue's goals are checked: SPS's and NGN's width >= 2x SGD's on the convex problems, wider than
AdamW's on at least one non-convex problem, step time <= 1.05x SGD's. About 17 minutes on 2 shared
CPU cores. The last line is JSON.
"""

import argparse
import statistics
from pathlib import Path

import torch
from _harness import emit, median_seconds, save_json

from hf_ext.recipes import stepsize_sensitivity as recipe
from hf_ext.recipes.stepsize_sensitivity import (
    METHODS,
    PROBLEMS,
    StepSizeSensitivityArguments,
    build_optimizer,
    build_problem,
)
from hf_ext.recipes.stepsize_sensitivity import main as run_recipe

CONVEX = ("breast_cancer_logreg", "digits_logreg")
ADAPTIVE = ("sps", "ngn", "ngn_m")


def training_step(problem, method: str, args: StepSizeSensitivityArguments):
    """One training step (forward, backward, optimizer) of ``method`` at step size 1e-3 on a fixed batch."""
    model = problem.build(0)
    optimizer = build_optimizer(method, model.parameters(), 1e-3, args)
    index = torch.arange(problem.batch_size)

    def closure():
        optimizer.zero_grad()
        loss = problem.loss(model, index)
        loss.backward()
        return loss

    return lambda: optimizer.step(closure)


def step_times(args: StepSizeSensitivityArguments, rounds: int, repeats: int = 50) -> dict[str, dict[str, float]]:
    """Per problem, each method's median seconds per training step over SGD's."""
    ratios = {}
    for name in args.problems:
        problem = build_problem(name, args)
        steps = {method: training_step(problem, method, args) for method in args.methods}
        samples = {method: [] for method in args.methods}
        for _ in range(rounds):  # interleaved: drift in the machine's load reaches every method
            for method, step in steps.items():
                samples[method].append(median_seconds(step, torch.device("cpu"), warmup=3, repeats=repeats))
        sgd = statistics.median(samples["sgd"])
        ratios[name] = {method: statistics.median(values) / sgd for method, values in samples.items()}
        print(f"{name}: step time / SGD " + ", ".join(f"{m} {r:.3f}" for m, r in ratios[name].items()), flush=True)
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--timing-rounds", type=int, default=7)
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads: the models are tiny, 1 avoids contention"
    )
    parser.add_argument("--output-dir", default="outputs/benchmarks")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = Path(recipe.__file__).with_name("configs") / "stepsize_sensitivity.yaml"
    output_dir = Path(args.output_dir) / "stepsize_sensitivity"
    flags = ["--config", str(config), "--output_dir", str(output_dir), "--seeds", *map(str, args.seeds)]
    results = run_recipe(flags)
    sweep = StepSizeSensitivityArguments(**results["args"])
    times = step_times(sweep, args.timing_rounds)
    summary = {"seeds": args.seeds, "grid_decades": 6, "grid_points": len(results["grid"])}
    for problem in PROBLEMS:
        for method in METHODS:
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
        m: [p for p in PROBLEMS if p not in CONVEX and width[f"{p}/{m}"] > width[f"{p}/adamw"]] for m in ADAPTIVE
    }
    summary["goal_step_time_within_1.05"] = {f"{p}/{m}": times[p][m] <= 1.05 for p in PROBLEMS for m in ADAPTIVE}
    save_json(args.output_dir, "stepsize_sensitivity", summary)
    emit(summary)


if __name__ == "__main__":
    main()
