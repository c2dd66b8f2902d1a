"""PEM on bbob-noisy: wins/losses of RB-PEM and probe-and-switch against sep-CMA-ES, resampling and pycma.

    python benchmarks/pem.py [--seeds 0 1 2] [--instances 1 2 3] [--dimension 10]

Runs the ``pem`` recipe (D = 10, budgets 100 D and 200 D, f101-f130, ``--instances``; the external tasks with
``--seeds``) and reports, per budget, RB-PEM's and probe-and-switch's wins/losses/ties against every other
method over the (function, instance) pairs, judged by the final best noise-free f - f_opt that COCO's observer
logs, with the two-sided sign-test p-value. It then measures directly, on bbob-noisy problems at a fixed
population: the dispersion of the mean update (its variance over fresh noise, summed over coordinates) with
RB-PEM's expected weights against hard log-rank weights, and the bias between them; and the bootstrap's time per
generation against the hard weights' (median of many calls). JSON on the last line. About 15 minutes on 2 CPU
cores; a rerun into the same ``--output-dir`` reuses the COCO runs already done. COCO's own post-processing of
the same runs: ``python -m cocopp -o <output-dir>/pem/ppdata <output-dir>/pem/coco/exdata/*``.
"""

import statistics
import time
from pathlib import Path

import cocoex
import numpy as np
from _harness import benchmark_parser, emit, save_json

from hf_ext.companion.es import ESConfig, LogWeights, SepCMAES, make_weight_scheme
from hf_ext.recipes.pem import main as run_recipe

DISPERSION_FUNCTIONS = (101, 107, 113, 119, 125)


def update_dispersion(function: int, dimension: int, seed: int, trials: int) -> dict:
    """Variance over ``trials`` noisy evaluations of one fixed population of the mean update ``sigma w @ y``,
    hard log-rank weights (the first evaluations) against RB-PEM's (the same plus its capped re-evaluations)."""
    suite = cocoex.Suite("bbob-noisy", "", "")  # kept referenced while its problem is in use
    problem = suite.get_problem_by_function_dimension_instance(function, dimension, 1)
    config = ESConfig(weights="rb_pem", seed=seed)
    es = SepCMAES(np.zeros(dimension), config)
    population = es.ask()
    y = (population - es.mean) / es.sigma
    scheme, hard = make_weight_scheme(config), LogWeights()
    updates = {"hard": [], "rb_pem": []}
    for _ in range(trials):
        evaluations = [np.array([problem(x)]) for x in population]
        updates["hard"].append(es.sigma * hard(evaluations, es.base) @ y)
        means = np.array([e[0] for e in evaluations])
        for i in scheme.reevaluate(means, es.base):
            evaluations[i] = np.append(evaluations[i], problem(population[i]))
        updates["rb_pem"].append(es.sigma * scheme(evaluations, es.base) @ y)
    problem.free()
    hard_updates, pem_updates = np.array(updates["hard"]), np.array(updates["rb_pem"])
    return {
        "hard_variance": float(hard_updates.var(axis=0).sum()),
        "rb_pem_variance": float(pem_updates.var(axis=0).sum()),
        "variance_ratio": float(pem_updates.var(axis=0).sum() / hard_updates.var(axis=0).sum()),
        "mean_difference": float(np.linalg.norm(pem_updates.mean(axis=0) - hard_updates.mean(axis=0))),
        "hard_mean_norm": float(np.linalg.norm(hard_updates.mean(axis=0))),
    }


def weight_seconds(dimension: int, repeats: int = 300) -> dict:
    """Median seconds per generation of the weight computation: RB-PEM (B replicates) against hard weights."""
    config = ESConfig(weights="rb_pem")
    es = SepCMAES(np.zeros(dimension), config)
    rng = np.random.default_rng(0)
    scheme, hard = make_weight_scheme(config), LogWeights()
    times = {"hard": [], "rb_pem": []}
    for _ in range(repeats):
        evaluations = [np.array([v]) for v in rng.standard_normal(es.popsize)]
        evaluations[0] = np.append(evaluations[0], rng.standard_normal())
        for name, weights in (("hard", hard), ("rb_pem", scheme)):
            start = time.perf_counter()
            weights(evaluations, es.base)
            times[name].append(time.perf_counter() - start)
    hard_s, pem_s = statistics.median(times["hard"]), statistics.median(times["rb_pem"])
    return {"hard_seconds": hard_s, "rb_pem_seconds": pem_s, "popsize": es.popsize, "replicates": config.replicates}


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1, 2], seeds_help="external tasks and dispersion")
    parser.add_argument("--instances", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--dimension", type=int, default=10)
    parser.add_argument("--budgets", type=int, nargs="+", default=[100, 200])
    parser.add_argument("--trials", type=int, default=300, help="noisy evaluations of the fixed population")
    args = parser.parse_args()
    started = time.perf_counter()
    results = run_recipe(
        ["--instances", *map(str, args.instances), "--dimension", str(args.dimension)]
        + ["--budget_multipliers", *map(str, args.budgets), "--task_seeds", *map(str, args.seeds)]
        + ["--output_dir", str(Path(args.output_dir) / "pem")]
    )
    summary = {"dimension": args.dimension, "instances": args.instances, "seeds": args.seeds}
    for row in results["winloss"]:
        summary[f"{row['challenger']}_vs_{row['baseline']}_{row['budget']}"] = (
            f"{row['wins']}/{row['losses']}/{row['ties']} p={row['p_value']:.3g}"
        )
    summary["tasks"] = {
        name: f"{v['mean']:.4g} +- {v['std']:.2g} (at xbest: {v['mean_at_xbest']:.4g})"
        for name, v in results["tasks"].items()
    }
    dispersion = {}
    for function in DISPERSION_FUNCTIONS:
        runs = [update_dispersion(function, args.dimension, seed, args.trials) for seed in args.seeds]
        ratios = [run["variance_ratio"] for run in runs]
        dispersion[f"f{function}"] = {
            "variance_ratio_mean": statistics.fmean(ratios),
            "variance_ratio_std": statistics.stdev(ratios) if len(ratios) > 1 else 0.0,
            "mean_difference_over_hard_norm": statistics.fmean(
                run["mean_difference"] / max(run["hard_mean_norm"], 1e-300) for run in runs
            ),
        }
    summary["update_dispersion_rb_pem_over_hard"] = dispersion
    summary["weights_time_per_generation"] = weight_seconds(args.dimension)
    summary["wall_seconds"] = round(time.perf_counter() - started, 1)
    save_json(args.output_dir, "pem", summary | {"winloss": results["winloss"], "task_runs": results["tasks"]})
    emit(summary)


if __name__ == "__main__":
    main()
