"""Weighted set cover: primal integral and final gap of GLNS, local-LNS and random-LNS against HiGHS alone,
OR-Tools' set-cover heuristics (greedy + steepest search, guided local search) and greedy, at equal wall-clock.

    python benchmarks/set_cover.py [--seeds 0 1 2] [--n-columns 50000] [--time-limit 10]

Runs the ``set_cover`` recipe on Beasley-style (costs 1-100) and rail-like (costs 1-2) instances, one instance per
seed and family, and reports per (family, size) each method's mean +- std over seeds of the primal integral
(gap-seconds over the budget, lower is better) and the final primal gap to the best objective any method found;
also the ratios of GLNS's and local-LNS's primal integral to random-LNS's (the paper's goal: GLNS <= 0.8x) and the
peak resident memory. JSON on the last line. About 10 minutes on 2 CPU cores at the defaults, two of them training
GLNS's denoiser the first time (then cached).
"""

import argparse
import time
from pathlib import Path

from _harness import emit, save_json

from hf_ext.recipes.set_cover import main as run_recipe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--n-columns", type=int, nargs="+", default=[50000])
    parser.add_argument("--families", nargs="+", default=["beasley", "rail"])
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--output-dir", default="outputs/benchmarks")
    args = parser.parse_args()
    started = time.perf_counter()
    config = str(Path(__file__).resolve().parents[1] / "recipes" / "configs" / "set_cover.yaml")
    results = run_recipe(
        ["--config", config, "--seeds", *map(str, args.seeds), "--n_columns", *map(str, args.n_columns)]
        + ["--families", *args.families, "--time_limits", str(args.time_limit)]
        + ["--output_dir", str(Path(args.output_dir) / "set_cover")]
    )
    summary = {"seeds": args.seeds, "time_limit_s": args.time_limit, "peak_rss_gib": results["peak_rss_gib"]}
    for key, value in results["summary"].items():
        summary[key] = (
            f"PI {value['primal_integral']:.3g} +- {value['primal_integral_std']:.2g}, "
            f"gap {value['gap']:.3g} +- {value['gap_std']:.2g}"
        )
    for family in args.families:
        for n in args.n_columns:
            prefix = f"{family}/{n}/{args.time_limit:g}s"
            random = results["summary"][f"{prefix}/random_lns"]["primal_integral"]
            for ours in ("glns", "local_lns"):
                value = results["summary"][f"{prefix}/{ours}"]["primal_integral"]
                summary[f"{prefix}/{ours}_over_random_primal_integral"] = round(value / random, 3)
    summary["wall_seconds"] = round(time.perf_counter() - started, 1)
    save_json(args.output_dir, "set_cover", summary | {"summary": results["summary"]})
    emit(summary)


if __name__ == "__main__":
    main()
