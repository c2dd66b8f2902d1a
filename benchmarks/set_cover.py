"""Weighted set cover: primal integral and final gap of GLNS, local-LNS and random-LNS against HiGHS alone,
OR-Tools' set-cover heuristics (greedy + steepest search, guided local search) and greedy, at equal wall-clock.

    python benchmarks/set_cover.py [--seeds 0 1 2] [--n-columns 50000] [--time-limits 10 60]

Runs the ``set_cover`` recipe on the two cost regimes held out from the denoiser's training (``correlated``:
Beasley-style structure, cost = row count plus up to as much again; ``rail_wide``: rail-like structure, costs
1-1000), one instance per seed and family, and reports per (family, size) each method's mean +- std over seeds of
the primal integral (gap-seconds over the budget, lower is better) and the final primal gap to the best objective
any method found; also the ratios of GLNS's (alone and adaptive) and local-LNS's primal integral to random-LNS's
(the paper's goal: GLNS <= 0.8x) and the peak resident memory. JSON on the last line. About 10 minutes on 2 CPU
cores at the defaults, two more the first time GLNS's default denoiser is trained (then cached). ``--methods``
runs a subset (the gaps are then to the best of those).
"""

import itertools
import time
from pathlib import Path

from _harness import benchmark_parser, emit, save_json

from hf_ext.recipes.set_cover import main as run_recipe


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1, 2])
    parser.add_argument("--n-columns", type=int, nargs="+", default=[50000])
    parser.add_argument("--families", nargs="+", default=["correlated", "rail_wide"])
    parser.add_argument("--time-limits", type=float, nargs="+", default=[10.0], help="one run per method, cut at each")
    parser.add_argument("--methods", nargs="+", help="a subset of the recipe's methods (default: the config's)")
    args = parser.parse_args()
    started = time.perf_counter()
    config = str(Path(__file__).resolve().parents[1] / "recipes" / "configs" / "set_cover.yaml")
    results = run_recipe(
        ["--config", config, "--seeds", *map(str, args.seeds), "--n_columns", *map(str, args.n_columns)]
        + ["--families", *args.families, "--time_limits", *map(str, args.time_limits)]
        + (["--methods", *args.methods] if args.methods else [])
        + ["--output_dir", str(Path(args.output_dir) / "set_cover")]
    )
    summary = {"seeds": args.seeds, "time_limits_s": args.time_limits, "peak_rss_gib": results["peak_rss_gib"]}
    for key, value in results["summary"].items():
        summary[key] = (
            f"PI {value['primal_integral']:.3g} +- {value['primal_integral_std']:.2g}, "
            f"gap {value['gap']:.3g} +- {value['gap_std']:.2g}"
        )
    for family, n, limit in itertools.product(args.families, args.n_columns, args.time_limits):
        prefix = f"{family}/{n}/{limit:g}s"
        ran = {key.removeprefix(f"{prefix}/"): value for key, value in results["summary"].items()}
        if "random_lns" not in ran:
            continue
        for ours in {"glns", "glns_adaptive", "local_lns"} & ran.keys():
            value = ran[ours]["primal_integral"]
            random = ran["random_lns"]["primal_integral"]
            summary[f"{prefix}/{ours}_over_random_primal_integral"] = round(value / random, 3)
    summary["wall_seconds"] = round(time.perf_counter() - started, 1)
    save_json(args.output_dir, "set_cover", summary | {"summary": results["summary"]})
    emit(summary)


if __name__ == "__main__":
    main()
