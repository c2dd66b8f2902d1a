"""Where GLNS's time goes, and whether its instability score picks better neighbourhoods than chance at equal size.

    python benchmarks/set_cover_neighbourhoods.py [--seeds 0 1] [--n-columns 50000] [--iterations 12]

From the greedy cover of a Beasley-style and a rail-like instance (the denoiser's training regimes, seeds 100+),
runs a fixed number of LNS iterations per policy, all freeing ``--size`` columns and repaired by HiGHS with the same
per-subproblem limit, and reports per policy the mean seconds spent choosing the neighbourhood (for GLNS: the
denoising trajectory) and repairing it, and the mean objective decrease per iteration and per second. The policy
``glns_chance`` is GLNS with the instability scores replaced by random ones (same region, same connected growth),
so GLNS minus it isolates what the score adds. Mean +- std over seeds; JSON on the last line.
"""

import statistics
import time

import numpy as np
import torch
from _harness import benchmark_parser, emit, save_json

from hf_ext.companion.combinatorial.set_cover import (
    GenerativeNeighbourhood,
    beasley,
    default_denoiser,
    greedy,
    local_neighbourhood,
    rail_like,
    random_neighbourhood,
    repair,
)


class ChanceScores(GenerativeNeighbourhood):
    """GLNS's region and growth with random scores in place of the trajectory's instability."""

    def scores(self, region) -> np.ndarray:
        return torch.rand(len(region.columns), generator=self.generator).numpy()


def run(instance, choose, iterations: int, size: int, sub_time_limit: float, seed: int) -> dict:
    rng, incumbent = np.random.default_rng(seed), greedy(instance)
    best, choose_s, repair_s, gains = instance.objective(incumbent), [], [], []
    for _ in range(iterations):
        started = time.perf_counter()
        free = choose(instance, incumbent, size, rng)
        chosen = time.perf_counter()
        candidate, _ = repair(instance, incumbent, free, sub_time_limit)
        choose_s.append(chosen - started)
        repair_s.append(time.perf_counter() - chosen)
        value = instance.objective(candidate)
        gains.append(max(0.0, best - value))
        if value < best:
            incumbent, best = candidate, value
    return {
        "choose_s": statistics.fmean(choose_s),
        "repair_s": statistics.fmean(repair_s),
        "gain_per_iteration": statistics.fmean(gains),
        "gain_per_second": sum(gains) / (sum(choose_s) + sum(repair_s)),
        "relative_gain": (instance.objective(greedy(instance)) - best) / instance.objective(greedy(instance)),
    }


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1])
    parser.add_argument("--n-columns", type=int, default=50000)
    parser.add_argument("--iterations", type=int, default=12)
    parser.add_argument("--size", type=int, default=2000)
    parser.add_argument("--sub-time-limit", type=float, default=1.0)
    args = parser.parse_args()
    started, model = time.perf_counter(), default_denoiser()
    n, rows = args.n_columns, args.n_columns // 20
    families = {
        "beasley": lambda s: beasley(rows, n, 5 / rows, seed=100 + s),
        "rail": lambda s: rail_like(rows, n, seed=100 + s),
    }
    measured = {}
    for family, make in families.items():
        for seed in args.seeds:
            instance = make(seed)
            policies = {
                "random_lns": random_neighbourhood,
                "local_lns": local_neighbourhood,
                "glns": GenerativeNeighbourhood(model, seed=seed),
                "glns_chance": ChanceScores(model, seed=seed),
            }
            for name, choose in policies.items():
                result = run(instance, choose, args.iterations, args.size, args.sub_time_limit, seed)
                for key, value in result.items():
                    measured.setdefault(f"{family}/{name}/{key}", []).append(value)
                print(family, seed, name, {k: round(v, 4) for k, v in result.items()}, flush=True)
    summary = {"seeds": args.seeds, "n_columns": n, "iterations": args.iterations, "size": args.size}
    for key, values in measured.items():
        spread = statistics.stdev(values) if len(values) > 1 else 0.0
        summary[key] = f"{statistics.fmean(values):.4g} +- {spread:.2g}"
    summary["wall_seconds"] = round(time.perf_counter() - started, 1)
    save_json(args.output_dir, "set_cover_neighbourhoods", summary | {"raw": measured})
    emit(summary)


if __name__ == "__main__":
    main()
