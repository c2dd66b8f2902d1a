"""Robust BO: final cumulative regret of GP-UCB, RCGP-UCB (stable, adaptive), GP-TS and RCGP-TS under corruption.

    python benchmarks/bo_robust.py [--seeds 0 1 2 3 4] [--rounds 60] [--relevance-pursuit]

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
"""

from pathlib import Path

from _harness import benchmark_parser, emit, save_json

from hf_ext.recipes.bo_robust import main as run_recipe

METHODS = ["gp_ucb", "rcgp_ucb_stable", "rcgp_ucb_adaptive", "gp_ts", "rcgp_ts"]


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1, 2, 3, 4])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--objectives", nargs="+", default=["branin", "hartmann6", "ackley5"])
    parser.add_argument("--relevance-pursuit", action="store_true", help="add RobustRelevancePursuitSingleTaskGP + UCB")
    args = parser.parse_args()
    methods = METHODS + (["relevance_pursuit_ucb"] if args.relevance_pursuit else [])
    results = run_recipe(
        ["--methods", *methods, "--objectives", *args.objectives, "--corruptions", "none", "1e6", "inf"]
        + ["--seeds", *map(str, args.seeds), "--rounds", str(args.rounds)]
        + ["--output_dir", str(Path(args.output_dir) / "bo_robust")]
    )
    summary = {"seeds": args.seeds, "rounds": args.rounds, "methods": methods}
    summary |= {key: value for key, value in results["summary"].items() if "/simple" not in key}
    summary["model_warnings"] = results["warnings"]["total"]
    save_json(args.output_dir, "bo_robust", summary)
    emit(summary)


if __name__ == "__main__":
    main()
