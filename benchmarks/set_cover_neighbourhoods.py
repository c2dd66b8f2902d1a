"""Where GLNS's time goes, whether its instability score picks better neighbourhoods than chance at equal size, and
whether it points at the columns a solver changes.

    python benchmarks/set_cover_neighbourhoods.py [--seeds 0 1] [--families beasley rail] [--n-columns 50000]
        [--iterations 12] [--score-check]

From the greedy cover of an instance of each family (``cost_regime_instance``: ``beasley`` and ``rail`` are the
denoiser's training regimes, ``correlated`` and ``rail_wide`` held out; seeds 100+, which no other benchmark uses),
runs a fixed number of LNS iterations per policy, all freeing ``--size`` columns and repaired by HiGHS with the same
per-subproblem limit, and reports per policy the mean seconds spent choosing the neighbourhood (for GLNS: the
denoising trajectory) and repairing it, the mean objective decrease per iteration and per second, the share of
subproblems HiGHS proved optimal and the median gap it left on the others, the share of freed columns whose bit the
repair changed, and how many columns the policy freed and what share of the incumbent's columns were among them
(a neighbourhood that frees few incumbent columns leaves the repair almost nothing to change). The policy
``glns_chance`` is GLNS with the instability scores replaced by random ones (same region, same connected growth),
so GLNS minus it isolates what the score adds.

``--score-check`` follows GLNS's own search for ``--iterations`` steps and, before each repair, also solves GLNS's
whole region (twice the neighbourhood) with ``--region-time-limit``: the columns whose bit that solution changes
are what a solver would move. Reported: the share of regions with any improvement, the region's gain against the
neighbourhood's, the AUC of the instability score for "changed", and the share of changed columns the score-grown
neighbourhood holds against one grown from random scores in the same region. Mean +- std over seeds; JSON on the
last line.
"""

import statistics
import time

import numpy as np
import torch
from _harness import benchmark_parser, emit, save_json
from scipy.stats import rankdata

from hf_ext.companion.combinatorial.set_cover import (
    COST_REGIMES,
    GenerativeNeighbourhood,
    cost_regime_instance,
    default_denoiser,
    greedy,
    grow_in_region,
    local_neighbourhood,
    random_neighbourhood,
    repair,
)


class ChanceScores(GenerativeNeighbourhood):
    """GLNS's region and growth with random scores in place of the trajectory's instability."""

    def scores(self, region) -> np.ndarray:
        return torch.rand(len(region.columns), generator=self.generator).numpy()


def run(instance, choose, iterations: int, size: int, sub_time_limit: float, seed: int) -> dict:
    rng, incumbent = np.random.default_rng(seed), greedy(instance)
    best, choose_s, repair_s, gains, proved, gaps, changed = instance.objective(incumbent), [], [], [], [], [], []
    freed, incumbent_freed = [], []
    for _ in range(iterations):
        started = time.perf_counter()
        free = choose(instance, incumbent, size, rng)
        chosen = time.perf_counter()
        freed.append(len(free))
        incumbent_freed.append(incumbent[free].sum() / incumbent.sum())
        candidate, optimal, gap = repair(instance, incumbent, free, sub_time_limit)
        choose_s.append(chosen - started)
        repair_s.append(time.perf_counter() - chosen)
        proved.append(float(optimal))
        gaps += [] if optimal else [gap]
        changed.append(float((candidate[free] != incumbent[free]).mean()))
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
        "proved_optimal": statistics.fmean(proved),
        "median_gap_unproved": statistics.median(gaps) if gaps else 0.0,
        "changed_per_freed": statistics.fmean(changed),
        "freed_columns": statistics.fmean(freed),
        "incumbent_share_freed": statistics.fmean(incumbent_freed),
    }


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """The probability that a changed column scores above an unchanged one (ties count half); NaN without both."""
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if not n_pos or not n_neg:
        return float("nan")
    return float((rankdata(scores)[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def score_check(instance, policy, iterations, size, sub_time_limit, region_time_limit, seed) -> dict:
    """GLNS's search, measuring before each repair what solving its whole region would change (module docstring)."""
    rng, incumbent = np.random.default_rng(seed), greedy(instance)
    best, rows = instance.objective(incumbent), []
    for _ in range(iterations):
        region, scores, free = policy.choose(instance, incumbent, size, rng)
        solved = repair(instance, incumbent, region, region_time_limit)
        changed = solved.selected[region] != incumbent[region]
        chance = grow_in_region(instance, region, rng.random(len(region)), size)
        candidate = repair(instance, incumbent, free, sub_time_limit).selected
        value = instance.objective(candidate)
        moved = set(region[changed].tolist())
        rows.append(
            {
                "region_improves": float(instance.objective(solved.selected) < best),
                "region_gain": best - instance.objective(solved.selected),
                "neighbourhood_gain": max(0.0, best - value),
                "region_proved": float(solved.optimal),
                "changed_in_region": float(changed.mean()),
                "auc": auc(scores, changed),
                "recall_score": len(moved & set(free.tolist())) / len(moved) if moved else float("nan"),
                "recall_chance": len(moved & set(chance.tolist())) / len(moved) if moved else float("nan"),
            }
        )
        if value < best:
            incumbent, best = candidate, value
    finite = {key: [row[key] for row in rows if not np.isnan(row[key])] for key in rows[0]}
    return {key: statistics.fmean(values) if values else float("nan") for key, values in finite.items()}


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1])
    parser.add_argument("--families", nargs="+", choices=COST_REGIMES, default=["beasley", "rail"])
    parser.add_argument("--n-columns", type=int, default=50000)
    parser.add_argument("--iterations", type=int, default=12)
    parser.add_argument("--size", type=int, default=2000)
    parser.add_argument("--sub-time-limit", type=float, default=1.0)
    parser.add_argument("--score-check", action="store_true", help="also measure the score against a region solve")
    parser.add_argument("--region-time-limit", type=float, default=5.0)
    args = parser.parse_args()
    started, model = time.perf_counter(), default_denoiser()
    measured = {}
    for family in args.families:
        for seed in args.seeds:
            instance = cost_regime_instance(family, args.n_columns, 100 + seed)
            policies = {
                "random_lns": random_neighbourhood,
                "local_lns": local_neighbourhood,
                "glns": GenerativeNeighbourhood(model, seed=seed),
                "glns_chance": ChanceScores(model, seed=seed),
            }
            results = {
                name: run(instance, choose, args.iterations, args.size, args.sub_time_limit, seed)
                for name, choose in policies.items()
            }
            if args.score_check:
                policy = GenerativeNeighbourhood(model, seed=seed)
                limits = args.sub_time_limit, args.region_time_limit
                results["score_check"] = score_check(instance, policy, args.iterations, args.size, *limits, seed)
            for name, result in results.items():
                for key, value in result.items():
                    measured.setdefault(f"{family}/{name}/{key}", []).append(value)
                print(family, seed, name, {k: round(v, 4) for k, v in result.items()}, flush=True)
    summary = {"seeds": args.seeds, "n_columns": args.n_columns, "iterations": args.iterations, "size": args.size}
    for key, values in measured.items():  # NaN (a region where nothing changed has no AUC) left out
        finite = [value for value in values if not np.isnan(value)]
        spread = statistics.stdev(finite) if len(finite) > 1 else 0.0
        summary[key] = f"{statistics.fmean(finite):.4g} +- {spread:.2g} (n={len(finite)})" if finite else "nan"
    summary["wall_seconds"] = round(time.perf_counter() - started, 1)
    save_json(args.output_dir, "set_cover_neighbourhoods", summary | {"raw": measured})
    emit(summary)


if __name__ == "__main__":
    main()
