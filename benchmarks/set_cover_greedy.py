"""The greedy start against OR-Tools' C++ greedy: seconds to a first cover, and its cost.

    python benchmarks/set_cover_greedy.py [--families beasley rail correlated rail_wide] [--seeds 3 4 5]
        [--n-columns 1000000] [--repeats 5]

At a million columns the first cover is most of a 10 s primal integral (the gap counts 1 until it exists), and every
LNS here starts from ``greedy`` (Chvatal's rule, then redundancy removal). For each family and seed
(``cost_regime_instance``), the median over ``--repeats`` of ``greedy``'s seconds, and of OR-Tools' seconds to its
greedy cover timed as the benchmark harness times it (``GreedySolutionGenerator`` on a fresh ``SetCoverInvariant``;
the model and the invariant are built before the clock starts, the invariant's seconds reported apart), their ratio,
and both covers' costs (OR-Tools' before its steepest descent). Mean +- std over seeds; JSON on the last line.
"""

import statistics
import time

from _harness import benchmark_parser, emit, save_json

from hf_ext.companion.combinatorial.set_cover import COST_REGIMES, cost_regime_instance, greedy
from hf_ext.companion.evaluation.combinatorial.set_cover import ortools_model


def _seconds(fn, repeats: int) -> tuple[float, object]:
    """Median seconds of ``fn()`` over ``repeats`` calls, and the last call's result."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def ortools_greedy(model, repeats: int) -> tuple[float, float, float]:
    """Median seconds of OR-Tools' greedy on a fresh invariant, median seconds of building that invariant, and the
    cover's cost."""
    from ortools.set_cover.python import set_cover

    greedy_times, invariant_times = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        invariant = set_cover.SetCoverInvariant(model)
        invariant_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        set_cover.GreedySolutionGenerator(invariant).next_solution()
        greedy_times.append(time.perf_counter() - start)
    return statistics.median(greedy_times), statistics.median(invariant_times), float(invariant.cost())


def _mean_std(values: list[float]) -> str:
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.3g} +- {spread:.2g}"


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[3, 4, 5], output_dir="outputs/set_cover_greedy")
    parser.add_argument("--families", nargs="+", default=list(COST_REGIMES), choices=list(COST_REGIMES))
    parser.add_argument("--n-columns", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    runs, summary = [], {}
    for family in args.families:
        for seed in args.seeds:
            instance = cost_regime_instance(family, args.n_columns, seed)
            ours_s, cover = _seconds(lambda instance=instance: greedy(instance), args.repeats)
            theirs_s, invariant_s, theirs_cost = ortools_greedy(ortools_model(instance), args.repeats)
            run = {
                "family": family,
                "seed": seed,
                "greedy_s": ours_s,
                "ortools_greedy_s": theirs_s,
                "ortools_invariant_s": invariant_s,
                "ratio": ours_s / theirs_s,
                "greedy_cost": instance.objective(cover),
                "ortools_cost": theirs_cost,
            }
            runs.append(run)
            print(
                f"{family} seed {seed}: greedy {ours_s:.3f} s (cost {run['greedy_cost']:.0f}), OR-Tools "
                f"{theirs_s:.3f} s (+ {invariant_s:.3f} s invariant; cost {theirs_cost:.0f})",
                flush=True,
            )
        mine = [r for r in runs if r["family"] == family]
        summary[family] = {
            key: _mean_std([r[key] for r in mine]) for key in ("greedy_s", "ortools_greedy_s", "ratio")
        } | {"cost_ratio": _mean_std([r["greedy_cost"] / r["ortools_cost"] for r in mine])}
    save_json(args.output_dir, "set_cover_greedy", {"args": vars(args), "runs": runs, "summary": summary})
    emit({"n_columns": args.n_columns, "seeds": args.seeds, "repeats": args.repeats, **summary})


if __name__ == "__main__":
    main()
