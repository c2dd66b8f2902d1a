"""PEM on bbob-noisy: wins/losses of RB-PEM and probe-and-switch against sep-CMA-ES, resampling and pycma.

    python benchmarks/pem.py [--seeds 0 1 2] [--instances 1 2 3] [--dimension 10]
    python benchmarks/pem.py --bias-only                          # the update bias on every function, D = 2
    python benchmarks/pem.py --suite-dir outputs/pem_suite        # the misranking-slice report of the suite runs
    python benchmarks/pem.py --suite-dir A B                      # seeds run into two folders, pooled
    python benchmarks/pem.py --suite-dir A --against-dir B        # A's challenger and sep-CMA-ES against B's methods
    python benchmarks/pem.py --suite-dir A --reference-dir B      # A ran without sep-CMA-ES: B's runs give the slice
    python benchmarks/pem.py --suite-dir A --challenger unbiased_pem   # another of our methods against the rest
    python benchmarks/pem.py --bias-only --bias-weights unbiased_pem   # its bias against the plain ES's update

Runs the ``pem`` recipe (D = 10, budgets 100 D and 200 D, f101-f130, ``--instances``; the external tasks with
``--seeds``) and reports, per budget, RB-PEM's and probe-and-switch's wins/losses/ties against every other
method over the (function, instance) pairs, judged by the final best noise-free f - f_opt that COCO's observer
logs, with the two-sided sign-test p-value. It then measures directly, on every bbob-noisy function at
``--bias-dimension`` and a fixed population (the first one, and a plain sep-CMA-ES's after each of
``--bias-warmups`` x D evaluations): RB-PEM's mean update against the hard weights' on the same evaluations over
``--trials`` fresh noisy evaluations (the bias over the norm of the hard update's mean, its Monte Carlo standard
error, the bias over the hard update's root mean square (its typical length, which stays away from 0 when the
ranking is close to random and the mean update is), and the variance ratio); and the bootstrap's time per
generation against the hard weights' (median of many calls).
JSON on the last line. ``--bias-only`` skips the COCO runs and the tasks (about 10 minutes at the defaults on 2
shared CPU cores). A rerun into the same ``--output-dir`` reuses the COCO runs already done. COCO's own
post-processing of the same runs: ``python -m cocopp -o <output-dir>/pem/ppdata <output-dir>/pem/coco/exdata/*``.
"""

import csv
import statistics
import time
from collections import Counter
from pathlib import Path

import cocoex
import numpy as np
from _harness import benchmark_parser, emit, save_json

from hf_ext.companion.es import ESConfig, LogWeights, SepCMAES, make_weight_scheme
from hf_ext.companion.evaluation.es import METHODS, read_index, run_key
from hf_ext.companion.evaluation.es.compare import FUNCTION_GROUPS, slice_tests, win_rate_by_misranking
from hf_ext.recipes._plotting import plot_line_panels
from hf_ext.recipes.pem import main as run_recipe

FUNCTIONS = range(101, 131)  # all of bbob-noisy


def update_bias(
    function: int,
    dimension: int,
    seed: int,
    trials: int,
    warmup: int,
    popsize: int | None = None,
    weights: str = "rb_pem",
) -> dict:
    """A PEM scheme's mean update (``weights``: ``rb_pem`` or ``unbiased_pem``) against the hard weights', over
    ``trials`` fresh noisy evaluations of one fixed population: the population of a plain sep-CMA-ES after
    ``warmup`` x D evaluations from COCO's initial solution (0: the first population). Each trial evaluates the
    population, spends the scheme's capped re-evaluations, and computes the update ``sigma w @ y`` with hard
    log-rank weights on the candidates' means (the reference) and with the scheme's weights; also the hard
    weights on the first evaluations alone (the plain ES's update, without the re-evaluations: the reference
    ``unbiased_pem`` keeps, ``*_vs_single``). ``popsize``: the population's size (None: CMA-ES's default, which
    from D = 10 on leaves RB-PEM's fit no residual freedom)."""
    suite = cocoex.Suite("bbob-noisy", "", "")  # kept referenced while its problem is in use
    problem = suite.get_problem_by_function_dimension_instance(function, dimension, 1)
    es = SepCMAES(problem.initial_solution, ESConfig(weights="log", sigma0=2.0, seed=seed, popsize=popsize))
    while es.evaluations < warmup * dimension:
        X = es.ask()
        es.tell(X, [problem(x) for x in X])
    population = es.ask()
    y = (population - es.mean) / es.sigma
    scheme, hard = make_weight_scheme(ESConfig(weights=weights, seed=seed)), LogWeights()
    updates = {"hard": [], "single": [], "pem": []}
    for _ in range(trials):
        evaluations = [np.array([problem(x)]) for x in population]
        updates["single"].append(es.sigma * hard(evaluations, es.base) @ y)
        means = np.array([e[0] for e in evaluations])
        for i in scheme.reevaluate(means, es.base):
            evaluations[i] = np.append(evaluations[i], problem(population[i]))
        updates["hard"].append(es.sigma * hard(evaluations, es.base) @ y)
        updates["pem"].append(es.sigma * scheme(evaluations, es.base, population) @ y)
    problem.free()
    hard_updates, single, pem = (np.array(updates[name]) for name in ("hard", "single", "pem"))
    norm = max(float(np.linalg.norm(hard_updates.mean(axis=0))), 1e-300)
    rms = max(float(np.sqrt((hard_updates**2).sum(axis=1).mean())), 1e-300)
    difference = pem - hard_updates
    hard_mean, pem_mean = hard_updates.mean(axis=0), pem.mean(axis=0)
    single_norm = max(float(np.linalg.norm(single.mean(axis=0))), 1e-300)
    single_rms = max(float(np.sqrt((single**2).sum(axis=1).mean())), 1e-300)
    from_single = pem - single
    return {
        "bias_over_norm": float(np.linalg.norm(difference.mean(axis=0))) / norm,
        "bias_over_rms": float(np.linalg.norm(difference.mean(axis=0))) / rms,
        "bias_standard_error": float(np.sqrt((difference.var(axis=0, ddof=1) / trials).sum())) / norm,
        "bias_vs_single_over_norm": float(np.linalg.norm(from_single.mean(axis=0))) / single_norm,
        "bias_vs_single_over_rms": float(np.linalg.norm(from_single.mean(axis=0))) / single_rms,
        "bias_vs_single_standard_error": float(np.sqrt((from_single.var(axis=0, ddof=1) / trials).sum())) / single_norm,
        "variance_ratio": float(pem.var(axis=0).sum() / max(hard_updates.var(axis=0).sum(), 1e-300)),
        "variance_ratio_vs_single": float(pem.var(axis=0).sum() / max(single.var(axis=0).sum(), 1e-300)),
        # what the bias is: a shorter mean step (length ratio below 1), a turned one (cosine below 1), or both
        "length_ratio": float(np.linalg.norm(pem_mean)) / norm,
        "cosine": float(pem_mean @ hard_mean) / max(float(np.linalg.norm(pem_mean)) * norm, 1e-300),
    }


def weight_seconds(dimension: int, popsize: int | None = None, repeats: int = 300, weights: str = "rb_pem") -> dict:
    """Median seconds per generation of the weight computation: a PEM scheme (RB-PEM: B replicates) against hard
    weights."""
    config = ESConfig(weights=weights, popsize=popsize)
    es = SepCMAES(np.zeros(dimension), config)
    rng = np.random.default_rng(0)
    scheme, hard = make_weight_scheme(config), LogWeights()
    population = es.ask()
    times = {"hard": [], weights: []}
    for _ in range(repeats):
        evaluations = [np.array([v]) for v in rng.standard_normal(es.popsize)]
        evaluations[0] = np.append(evaluations[0], rng.standard_normal())
        for name, chosen in (("hard", hard), (weights, scheme)):
            start = time.perf_counter()
            chosen(evaluations, es.base, population)
            times[name].append(time.perf_counter() - start)
    hard_s, pem_s = statistics.median(times["hard"]), statistics.median(times[weights])
    return {"hard_seconds": hard_s, f"{weights}_seconds": pem_s, "popsize": es.popsize, "replicates": config.replicates}


def misranking_table(records: list[dict], reference: str = "sep_cma", early: int = 10) -> dict:
    """Per (function, dimension): the mean over instances of the pair misranking of ``reference``'s largest-budget
    run, over its first ``early`` generations and over all of them."""
    budget = max(r["budget_multiplier"] for r in records)
    table = {}
    for r in records:
        if r["method"] == reference and r["budget_multiplier"] == budget:
            values = [v for v in r["misranking"] if v is not None]
            table.setdefault(f"f{r['function']}_{r['dimension']}D", []).append(
                (statistics.fmean(values[:early]), statistics.fmean(values))
            )
    return {
        key: {"early": statistics.fmean(e for e, _ in runs), "whole_run": statistics.fmean(w for _, w in runs)}
        for key, runs in sorted(table.items())
    }


def misranking_curve(runs: list[list], block: int = 10) -> list[tuple[float, float]]:
    """(middle generation, mean misranking) over blocks of ``block`` generations and over ``runs``; a generation
    whose candidates' true values are all equal (``None``, nothing to misrank) and runs already over are skipped."""
    length = max((len(run) for run in runs), default=0)
    values = np.full((len(runs), length), np.nan)
    for i, run in enumerate(runs):
        values[i, : len(run)] = [np.nan if v is None else v for v in run]
    curve = []
    for start in range(0, length, block):
        chunk = values[:, start : start + block]
        if np.isfinite(chunk).any():
            curve.append((start + (chunk.shape[1] + 1) / 2, float(np.nanmean(chunk))))
    return curve


def suite_report(
    suite_dirs: list[str], threshold: float, output_dir: str, reference_dirs: list[str] = (), challenger: str = "rb_pem"
) -> dict:
    """``challenger`` (RB-PEM, or another of our methods) against every other method over the runs of ``hf-ext run pem
    --config pem_suite`` in ``suite_dirs`` (any dimensions; each seed's run of a problem is its own pair):
    wins/losses inside and outside the high-misranking slice, per budget and function group, each dimension apart
    and all together, with the sign and Wilcoxon signed-rank tests; the win rate by misranking bin (plot); the
    misranking of each function, and by generation for each function group (plot). Writes pem_suite_slices.csv,
    pem_suite_winrate.png and pem_suite_misranking.png. ``reference_dirs`` lend their sep-CMA-ES runs, which define
    the slice, to suite runs made without it (the same seeds: each problem's random stream is the same in every
    run)."""
    records = [record for suite_dir in suite_dirs for record in read_index(Path(suite_dir) / "coco")]
    records += [r for folder in reference_dirs for r in read_index(Path(folder) / "coco") if r["method"] == "sep_cma"]
    runs = Counter(run_key(r) for r in records)
    repeated = [run for run, count in runs.items() if count > 1]
    if repeated:
        raise ValueError(f"--suite-dir: {len(repeated)} runs are in more than one folder, e.g. {repeated[0]}")
    dimensions = sorted({r["dimension"] for r in records})
    baselines = sorted({r["method"] for r in records} - {challenger})
    rows = []
    for chosen in [[d] for d in dimensions] + ([dimensions] if len(dimensions) > 1 else []):
        subset = [r for r in records if r["dimension"] in chosen]
        label = "+".join(map(str, chosen))
        rows += [
            {"dimensions": label} | row
            for other in baselines
            for row in slice_tests(subset, challenger, other, threshold)
        ]
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "pem_suite_slices.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    budgets = sorted({r["budget_multiplier"] for r in records})
    edges = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)
    panels = {
        f"budget {k}D, D = {'+'.join(map(str, dimensions))}": {
            f"vs {other}": [
                ((b["low"] + b["high"]) / 2, b["win_rate"])
                for b in win_rate_by_misranking(records, challenger, other, k, edges)
            ]
            for other in baselines
        }
        for k in budgets
    }
    title = f"{challenger}'s win rate against the pair misranking of sep-CMA-ES's run"
    plot_line_panels(panels, out / "pem_suite_winrate.png", title, "misranking (mean over generations)", "win rate")
    by_generation = {
        f"D = {d}, budget {budgets[-1]}D": {
            group: misranking_curve(
                [
                    r["misranking"]
                    for r in records
                    if r["method"] == "sep_cma"
                    and r["dimension"] == d
                    and r["budget_multiplier"] == budgets[-1]
                    and r["function"] in functions
                ]
            )
            for group, functions in FUNCTION_GROUPS.items()
        }
        for d in dimensions
    }
    title = "pair misranking of sep-CMA-ES's generations (mean over functions, instances and 10 generations)"
    plot_line_panels(by_generation, out / "pem_suite_misranking.png", title, "generation", "misranking")
    everything = "+".join(map(str, dimensions))
    summary = {
        f"{row['budget']} {row['slice']} vs {row['baseline']}": (
            f"{row['wins']}/{row['losses']}/{row['ties']} sign p={row['p_value']:.2g} "
            f"wilcoxon p={row['wilcoxon_p_value']:.2g}"
        )
        for row in rows
        if row["dimensions"] == everything and row["group"] == "all"
    }
    return {
        "dimensions": dimensions,
        "runs": len(records),
        "groups": {name: [min(f), max(f)] for name, f in FUNCTION_GROUPS.items()},
        f"{challenger}_all_groups": summary,
        "misranking": misranking_table(records),
        "slices": rows,
    }


def cross_suite_report(
    suite_dirs: list[str], against_dirs: list[str], threshold: float, challenger: str = "rb_pem"
) -> dict:
    """``challenger`` and sep-CMA-ES of suite runs made with one setting (``suite_dirs``, say popsize 2 D or
    another re-evaluation cap) against every method of runs made with another (``against_dirs``, say CMA-ES's
    defaults) on the problems both ran (each seed's its own pair), inside and outside the high-misranking slice
    of ``against_dirs``' sep-CMA-ES: what the setting changes, apart from the weights."""
    compared = (f"{challenger}@suite", "sep_cma@suite")
    ours = [r | {"method": f"{r['method']}@suite"} for folder in suite_dirs for r in read_index(Path(folder) / "coco")]
    theirs = [r for folder in against_dirs for r in read_index(Path(folder) / "coco")]
    records = [r for r in ours if r["method"] in compared] + theirs
    return {
        f"{row['budget']} {row['slice']}: {method} vs {baseline}": (
            f"{row['wins']}/{row['losses']}/{row['ties']} sign p={row['p_value']:.2g} "
            f"wilcoxon p={row['wilcoxon_p_value']:.2g}"
        )
        for method in compared
        for baseline in sorted({r["method"] for r in theirs})
        for row in slice_tests(records, method, baseline, threshold)
        if row["group"] == "all"
    }


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1, 2], seeds_help="external tasks")
    parser.add_argument("--instances", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--dimension", type=int, default=10)
    parser.add_argument("--budgets", type=int, nargs="+", default=[100, 200])
    parser.add_argument("--trials", type=int, default=1000, help="noisy evaluations of each fixed population")
    parser.add_argument("--bias-dimension", type=int, default=2, help="D of the update-bias measurement")
    parser.add_argument("--bias-popsize", type=int, help="its population size (default: CMA-ES's 4 + 3 ln D)")
    parser.add_argument(
        "--bias-weights",
        choices=["rb_pem", "unbiased_pem"],
        default="rb_pem",
        help="the PEM scheme whose update bias is measured",
    )
    parser.add_argument(
        "--bias-warmups", type=int, nargs="+", default=[0, 50], help="sep-CMA-ES evaluations / D before fixing"
    )
    parser.add_argument("--bias-only", action="store_true", help="only the update bias and the weights' time")
    parser.add_argument(
        "--suite-dir",
        nargs="+",
        help="only the misranking-slice report of the pem_suite runs in these output_dirs of the recipe (pooled)",
    )
    parser.add_argument(
        "--against-dir",
        nargs="+",
        help="with --suite-dir: its challenger and sep-CMA-ES against these other suite runs' methods (pooled)",
    )
    parser.add_argument(
        "--reference-dir",
        nargs="+",
        default=[],
        help="with --suite-dir: take the slice's sep-CMA-ES runs from these suite runs (the same seeds)",
    )
    parser.add_argument("--misranking-threshold", type=float, default=0.25, help="the high-misranking slice")
    parser.add_argument(
        "--challenger",
        choices=[method for method in METHODS if method != "sep_cma"],
        default="rb_pem",
        help="with --suite-dir: the method compared with every other",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    if args.reference_dir and (not args.suite_dir or args.against_dir):
        parser.error("--reference-dir goes with --suite-dir alone (--against-dir takes its slice from its own runs)")
    if args.suite_dir and args.against_dir:
        report = cross_suite_report(args.suite_dir, args.against_dir, args.misranking_threshold, args.challenger)
        save_json(args.output_dir, "pem_cross_suite", report)
        emit(report)
        return
    if args.suite_dir:
        report = suite_report(
            args.suite_dir, args.misranking_threshold, args.output_dir, args.reference_dir, args.challenger
        )
        save_json(args.output_dir, "pem_suite", report)
        emit({key: report[key] for key in ("dimensions", "runs", f"{args.challenger}_all_groups")})
        return
    summary = {"seeds": args.seeds}
    results = {"winloss": [], "tasks": {}}
    if not args.bias_only:
        results = run_recipe(
            ["--instances", *map(str, args.instances), "--dimension", str(args.dimension)]
            + ["--budget_multipliers", *map(str, args.budgets), "--task_seeds", *map(str, args.seeds)]
            + ["--output_dir", str(Path(args.output_dir) / "pem")]
        )
        summary |= {"dimension": args.dimension, "instances": args.instances}
        for row in results["winloss"]:
            summary[f"{row['challenger']}_vs_{row['baseline']}_{row['budget']}"] = (
                f"{row['wins']}/{row['losses']}/{row['ties']} p={row['p_value']:.3g}"
            )
        summary["tasks"] = {
            name: f"{v['mean']:.4g} +- {v['std']:.2g} (at xbest: {v['mean_at_xbest']:.4g})"
            for name, v in results["tasks"].items()
        }
    bias = {
        f"f{function}_warmup{warmup}": update_bias(
            function, args.bias_dimension, 0, args.trials, warmup, args.bias_popsize, args.bias_weights
        )
        for warmup in args.bias_warmups
        for function in FUNCTIONS
    }
    below = {  # the reference a scheme is meant to keep: RB-PEM the hard weights' on its evaluations, the other the
        # plain ES's single-evaluation update
        "functions_below_0.05": "bias_over_norm",
        "functions_below_0.05_of_rms": "bias_over_rms",
        "functions_below_0.05_vs_single": "bias_vs_single_over_norm",
        "functions_below_0.05_of_rms_vs_single": "bias_vs_single_over_rms",
    }
    summary["update_bias"] = {
        "weights": args.bias_weights,
        "dimension": args.bias_dimension,
        "popsize": args.bias_popsize,
        **{
            name: {
                warmup: sum(bias[f"f{f}_warmup{warmup}"][key] < 0.05 for f in FUNCTIONS) for warmup in args.bias_warmups
            }
            for name, key in below.items()
        },
        "median_variance_ratio": statistics.median(run["variance_ratio"] for run in bias.values()),
        "median_variance_ratio_vs_single": statistics.median(run["variance_ratio_vs_single"] for run in bias.values()),
    }
    # a population size belongs to the dimension it was given with
    timed = (args.bias_dimension, args.bias_popsize) if args.bias_popsize else (args.dimension, None)
    summary["weights_time_per_generation"] = weight_seconds(*timed, weights=args.bias_weights)
    summary["wall_seconds"] = round(time.perf_counter() - started, 1)
    save_json(
        args.output_dir, "pem", summary | {"winloss": results["winloss"], "task_runs": results["tasks"], "bias": bias}
    )
    emit(summary)


if __name__ == "__main__":
    main()
