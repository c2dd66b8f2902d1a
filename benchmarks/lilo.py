"""LILO: true utility of the best point found vs feedback rounds, LILO vs preferential BO vs LLM-only vs random.

    python benchmarks/lilo.py [--seeds 0 1 2 3 4] [--environments dtlz2 vehicle_safety] [--base-url URL]

Runs the ``lilo`` recipe with its shipped settings (SmolLM2-135M-Instruct through transformers,
3 rounds of 2 points after 4 Sobol points, 2 labelled pairs per round) on two environments with
simulated decision makers, LILO with pairwise labels and with scalar scores (``lilo_scalar``), and
reports per environment and method the gap of the best point's true utility to the best known
(mean and standard deviation over seeds; lower is better), the LLM's label accuracy against the
hidden utility (scalar: the pairs of a round's outcomes it scored apart), and the LLM calls made. BO on the true utility
is the upper reference, preferential BO with EUBO on true comparisons the outside baseline LILO
claims to beat. ``--base-url`` adds LILO through an OpenAI-compatible server (first environment).
A rerun into the same ``--output-dir`` takes the LLM's answers from the transcripts. The last line is JSON.
"""

from pathlib import Path

from _harness import benchmark_parser, emit, save_json

from hf_ext.recipes import shipped_config
from hf_ext.recipes._plotting import plot_bands
from hf_ext.recipes.lilo import main as run_recipe

METHODS = ["lilo", "lilo_scalar", "preferential", "true_utility", "llm_only", "random"]


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1, 2, 3, 4])
    parser.add_argument("--environments", nargs="+", default=["dtlz2", "vehicle_safety"])
    parser.add_argument(
        "--llm-seeds", type=int, nargs="+", default=None, help="seeds of the LLM methods (default --seeds)"
    )
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible server for the http backend run")
    parser.add_argument(
        "--timeout", type=float, default=900.0, help="seconds per server request (a busy CPU server took 130 s)"
    )
    args = parser.parse_args()
    out = Path(args.output_dir) / "lilo"
    llm_seeds = args.llm_seeds or args.seeds
    common = ["--config", str(shipped_config("lilo")), "--environments", *args.environments]
    runs, curves = {}, []
    for methods, seeds, feedback in (
        (["preferential", "true_utility", "random"], args.seeds, "pairwise"),
        (["lilo", "llm_only"], llm_seeds, "pairwise"),
        (["lilo"], llm_seeds, "scalar"),
    ):
        flags = ["--methods", *methods, "--seeds", *map(str, seeds), "--feedback", feedback]
        where = out / ("local" if feedback == "pairwise" else "scalar")  # a transcript keeps its own settings
        results = run_recipe([*common, *flags, "--output_dir", str(where)])
        suffix = "" if feedback == "pairwise" else "_scalar"  # the scalar variant runs as the recipe's `lilo`
        runs |= {f"{key}{suffix}": entry for key, entry in results["summary"].items()}
        curves += [run | {"method": run["method"] + suffix} for run in results["runs"]]
    panels = {
        env: {m: [r["gap"] for r in curves if r["environment"] == env and r["method"] == m] for m in METHODS}
        for env in args.environments
    }
    title = "Gap to the best true utility (mean +- std over seeds; round 1 = initial design)"
    plot_bands(panels, out / "lilo_utility_gap.png", title, "round", "utility gap", ncols=len(panels))
    summary = {"seeds": args.seeds, "llm_seeds": llm_seeds, "backend": "local smollm2"}
    summary |= {key: _short(entry) for key, entry in runs.items()}
    if args.base_url:
        server = run_recipe(
            ["--config", str(shipped_config("lilo")), "--environments", args.environments[0], "--methods", "lilo"]
            + ["--seeds", *map(str, llm_seeds), "--backend", "http", "--base_url", args.base_url]
            + ["--timeout", str(args.timeout)]
            + ["--output_dir", str(out / "http")]
        )
        summary |= {f"http/{key}": _short(entry) for key, entry in server["summary"].items()}
    per_round = {key: entry["gap_per_round"] for key, entry in runs.items()}
    save_json(args.output_dir, "lilo", summary | {"per_round": per_round})
    emit(summary)


def _short(entry: dict) -> dict:
    keys = ("final_gap", "final_gap_std", "label_accuracy", "labels", "llm_calls", "seconds")
    return {key: round(entry[key], 4) if isinstance(entry[key], float) else entry[key] for key in keys}


if __name__ == "__main__":
    main()
