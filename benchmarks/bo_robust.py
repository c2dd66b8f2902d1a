"""Robust BO: final cumulative regret of GP-UCB, RCGP-UCB (stable, adaptive), GP-TS and RCGP-TS under corruption.

    python benchmarks/bo_robust.py [--seeds 0 1 2 3 4] [--rounds 60] [--relevance-pursuit]
    python benchmarks/bo_robust.py --clean [--seeds 0 1 2 3 4 5 6 7] [--rounds 25]

Runs the ``bo_robust`` recipe on Branin, Hartmann-6 and Ackley-5 (maximised), T = ``rounds``
evaluations per run, under no corruption and under ``floor(T^(1/4))`` corruptions (random rounds,
adding the magnitude: a fake optimum) of magnitude 1e6 and of infinite magnitude. Reports each
method's final cumulative regret (mean and standard deviation over seeds), its ratio to its own
regret without corruption (target for RCGP-UCB: <= 1.2, while GP-UCB's is many times worse) and
RCGP-UCB's ratio to GP-UCB's without corruption (target <= 1.1). ``--relevance-pursuit`` adds
BoTorch's ``RobustRelevancePursuitSingleTaskGP`` with UCB (about 7 s per round on 2 CPU cores).
About 30 minutes on 2 CPU cores without it. A rerun into the same ``--output-dir`` resumes the
runs when ``--rounds`` is unchanged (more seeds or objectives only add runs) and is refused
otherwise. The last line is JSON; it also counts the gpytorch/BoTorch warnings raised.

``--clean`` measures what robustness costs without outliers instead: GP-UCB and RCGP-UCB (stable,
adaptive) without corruption on a 3-D quadratic bowl, Branin and Hartmann-6 (``--objectives``
changes them), each method's final simple and cumulative regret (mean and standard deviation over
seeds) and its simple regret on each seed, side by side (a few minutes at 25 rounds and 8 seeds).
"""

import csv
from pathlib import Path

from _harness import benchmark_parser, emit, save_json

from hf_ext.recipes.bo_robust import main as run_recipe

METHODS = ["gp_ucb", "rcgp_ucb_stable", "rcgp_ucb_adaptive", "gp_ts", "rcgp_ts"]
CLEAN_METHODS = ["gp_ucb", "rcgp_ucb_stable", "rcgp_ucb_adaptive"]


def corrupted(args) -> dict:
    """The recipe under no, 1e6 and infinite corruptions: the summary of final cumulative regrets and ratios."""
    methods = METHODS + (["relevance_pursuit_ucb"] if args.relevance_pursuit else [])
    results = run_recipe(
        ["--methods", *methods, "--objectives", *(args.objectives or ["branin", "hartmann6", "ackley5"])]
        + ["--corruptions", "none", "1e6", "inf", "--seeds", *map(str, args.seeds), "--rounds", str(args.rounds)]
        + ["--output_dir", str(Path(args.output_dir) / "bo_robust"), "--workers", "2"]
    )
    summary = {"seeds": args.seeds, "rounds": args.rounds, "methods": methods}
    summary |= {key: value for key, value in results["summary"].items() if "/simple" not in key}
    summary["model_warnings"] = results["warnings"]["total"]
    return summary


def clean(args) -> dict:
    """The recipe without corruption: final simple and cumulative regret (mean, std, simple per seed) per method."""
    objectives = args.objectives or ["bowl3", "branin", "hartmann6"]
    out = Path(args.output_dir) / "bo_robust_clean"
    results = run_recipe(
        ["--methods", *CLEAN_METHODS, "--objectives", *objectives, "--corruptions", "none"]
        + ["--seeds", *map(str, args.seeds), "--rounds", str(args.rounds), "--output_dir", str(out), "--workers", "2"]
    )
    with (out / "regret.csv").open() as handle:
        final = {(r["objective"], r["method"], int(r["seed"])): r for r in csv.DictReader(handle)}  # last round wins
    summary = {"seeds": args.seeds, "rounds": args.rounds, "methods": CLEAN_METHODS, "objectives": objectives}
    for objective in objectives:
        print(f"{objective}, no corruption, {args.rounds} evaluations: final simple regret, mean +- std; per seed")
        for method in CLEAN_METHODS:
            name = f"{objective}/none/{method}"
            per_seed = [round(float(final[objective, method, seed]["simple_regret"]), 4) for seed in args.seeds]
            summary[f"{name}/simple_per_seed"] = per_seed
            for regret in ("simple", "cumulative"):
                summary[f"{name}/{regret}"] = results["summary"][f"{name}/{regret}"]
                summary[f"{name}/{regret}_std"] = results["summary"][f"{name}/{regret}_std"]
            mean, std = summary[f"{name}/simple"], summary[f"{name}/simple_std"]
            print(f"  {method:18s} {mean:.4f} +- {std:.4f}; {per_seed}")
    return summary


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1, 2, 3, 4])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--objectives", nargs="+", default=None, help="default: as described above")
    parser.add_argument("--relevance-pursuit", action="store_true", help="add RobustRelevancePursuitSingleTaskGP + UCB")
    parser.add_argument("--clean", action="store_true", help="GP-UCB vs RCGP-UCB without corruption (see above)")
    args = parser.parse_args()
    summary = clean(args) if args.clean else corrupted(args)
    save_json(args.output_dir, "bo_robust_clean" if args.clean else "bo_robust", summary)
    emit(summary)


if __name__ == "__main__":
    main()
