"""Weighted set cover at scale: GLNS and LNS with HiGHS repair against HiGHS alone, OR-Tools' heuristics, greedy.

    hf-ext run set_cover                                  # shipped config (the benchmark's settings)
    hf-ext run set_cover n_columns="50000 1000000" time_limits="10 60"
    hf-ext run set_cover --config set_cover_quick         # seconds: the end-to-end check

Generates Beasley-style (costs 1-100) and rail-like (costs 1-2) instances per seed, runs every method once for the
largest budget in ``time_limits`` (the anytime curve of that run gives every smaller budget), and scores each by its
final primal gap and primal integral against the best objective any method found on that instance. Writes
``runs.csv``, ``results.json`` and ``gap_vs_time.png`` (primal gap against wall-clock seconds, log-log, a gap of 0
drawn at 1e-4) to ``output_dir``. GLNS's denoiser is trained on small instances once and cached before its clock
starts (``default_denoiser``; about two minutes on 2 CPU cores the first time). The LNS settings are
:class:`LNSConfig`'s own fields but three, which each run sets: ``policy`` (the LNS method's), ``time_limit`` (the
largest of ``time_limits``) and ``seed`` (the instance's).

Each instance's runs are stored in ``jobs/`` as they finish, and a rerun into the same ``output_dir`` runs only the
missing instances, under the same settings (``settings.json``; ``families``, ``n_columns``, ``seeds`` and
``output_dir`` only choose which instances are run and may change). The methods race the clock, so their objectives
depend on the machine's speed, except under step budgets: greedy, ``ortools_greedy`` and the LNS methods with
``max_iterations`` set and ``time_limits`` and ``sub_time_limit`` long enough never to stop a search or a HiGHS
subproblem give the same objectives in every run, so that a run killed at any point and resumed ends with the
uninterrupted one's objectives and gaps (its times, primal integrals and plot are measured anew).
"""

import resource
import statistics
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from tqdm.auto import tqdm
from trl import TrlParser

from hf_ext._validation import check_finite_fields
from hf_ext.companion.combinatorial.set_cover import (
    COST_REGIMES,
    GenerativeNeighbourhood,
    LNSConfig,
    cost_regime_instance,
    load_denoiser,
)
from hf_ext.companion.combinatorial.set_cover.diffusion import check_steps
from hf_ext.companion.evaluation.combinatorial.set_cover import (
    LNS_METHODS,
    METHODS,
    primal_gap,
    primal_integral,
    run_method,
    time_to_target,
)
from hf_ext.recipes._jobs import check_job_settings, on_main_process, stored_or_run
from hf_ext.recipes._plotting import plot_log_sweeps
from hf_ext.recipes._results import write_results, write_rows
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import estimator_field, run_config, set_per_run, settings_parser, shared_settings

GAP_FLOOR = 1e-4  # a gap of 0 (the best run) is drawn at this floor on the log axis
# Arguments that choose which instances are run or where they go, not what an instance's runs compute: they may
# change between reruns into the same output_dir (every other setting must not).
NOT_JOB_SETTINGS = ("families", "n_columns", "seeds", "output_dir")


@dataclass
class SetCoverArguments:
    methods: list[str] = field(default_factory=lambda: list(METHODS), metadata={"help": f"Any of {list(METHODS)}."})
    families: list[str] = field(
        default_factory=lambda: list(COST_REGIMES),
        metadata={"help": f"Any of {COST_REGIMES}: beasley and rail are the denoiser's training regimes."},
    )
    n_columns: list[int] = field(default_factory=lambda: [50000], metadata={"help": "Instance sizes in columns."})
    columns_per_row: int = field(default=20, metadata={"help": "Rows = n_columns // columns_per_row (>= 1)."})
    beasley_rows_per_column: float = field(default=5.0, metadata={"help": "Mean rows a Beasley column covers."})
    time_limits: list[float] = field(
        default_factory=lambda: [10.0],
        metadata={"help": "Wall-clock budgets, s: every method runs for the largest, and is scored at each."},
    )
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2], metadata={"help": "Instance and search seeds."})
    glns_steps: int = estimator_field(GenerativeNeighbourhood, "steps")
    denoiser: str = field(
        default="", metadata={"help": "GLNS's checkpoint (hf-ext run set_cover_denoiser); empty: the cached default."}
    )
    output_dir: str = field(default="outputs/set_cover", metadata={"help": "Where the CSV, JSON and PNG go."})

    def __post_init__(self):
        check_finite_fields(self)
        for name, allowed in (("methods", METHODS), ("families", COST_REGIMES)):
            if not getattr(self, name) or any(v not in allowed for v in getattr(self, name)):
                raise ValueError(f"SetCoverArguments: `{name}` must be a non-empty list from {list(allowed)}")
        if not self.n_columns or min(self.n_columns) < 10 or self.columns_per_row < 1:
            raise ValueError("SetCoverArguments: `n_columns` must be integers >= 10 and `columns_per_row` >= 1")
        if not self.time_limits or min(self.time_limits) <= 0:
            raise ValueError(f"SetCoverArguments: `time_limits` must be seconds > 0, got {self.time_limits}")
        if not self.beasley_rows_per_column > 0:
            raise ValueError("SetCoverArguments: `beasley_rows_per_column` must be > 0")
        check_steps("SetCoverArguments", "glns_steps", self.glns_steps)  # before any instance is generated


@dataclass
class SetCoverLNSConfig(LNSConfig):
    """The LNS settings every LNS method (GLNS, local, random) shares; ``policy``, ``time_limit`` and ``seed`` are
    set for each run by :func:`lns_config`."""

    policy: str = set_per_run(LNSConfig, "policy", by="the method (local_lns, random_lns)")
    time_limit: float = set_per_run(LNSConfig, "time_limit", by="SetCoverArguments' `time_limits` (the largest)")
    seed: int = set_per_run(LNSConfig, "seed", by="SetCoverArguments' `seeds` (the instance's)")


def lns_config(method: str, seed: int, args: SetCoverArguments, lns: SetCoverLNSConfig) -> LNSConfig:
    """One run's LNS settings: the shared ones, ``method``'s policy (the default where the method has none), the
    largest budget and the instance's seed."""
    policy = LNS_METHODS.get(method, LNSConfig.policy)
    return run_config(LNSConfig, lns, policy=policy, time_limit=max(args.time_limits), seed=seed)


def parser(argv: list[str] | None = None) -> TrlParser:
    """The parser ``main`` reads its settings with (the same for every ``argv``)."""
    return settings_parser(SetCoverArguments, SetCoverLNSConfig)


def score(curve: dict, best: float, budget: float) -> dict:
    """Final gap, primal integral, time to 1% of the best known and time to the first solution, of one anytime
    curve cut at ``budget``. The LNS methods share their greedy start, so the time to the first solution (the same
    code in each) is what their primal integrals do not owe to the neighbourhoods."""
    kept = [(t, v) for t, v in zip(curve["times"], curve["values"], strict=True) if t <= budget]
    times, values = [t for t, _ in kept], [v for _, v in kept]
    final = values[-1] if values else float("inf")
    return {
        "final": final,
        "gap": primal_gap(final, best),
        "primal_integral": primal_integral(times, values, best, budget),
        "time_to_1pct": time_to_target(times, values, 1.01 * best),
        "first_solution_seconds": times[0] if times else float("inf"),
    }


def gap_curve(curve: dict, best: float, grid: np.ndarray) -> list[float]:
    """The incumbent's primal gap at each time of ``grid`` (1 before the first solution), floored for the log axis."""
    gaps = []
    for t in grid:
        seen = [v for s, v in zip(curve["times"], curve["values"], strict=True) if s <= t]
        gaps.append(max(primal_gap(seen[-1], best) if seen else 1.0, GAP_FLOOR))
    return gaps


def run_instance(family: str, n_columns: int, seed: int, args: SetCoverArguments, lns: SetCoverLNSConfig, denoiser):
    """Every method on one instance: each method's anytime curve (without its cover), the best objective any found,
    the seconds the instance took to generate and the process's peak memory so far."""
    started = time.perf_counter()
    instance = cost_regime_instance(family, n_columns, seed, args.columns_per_row, args.beasley_rows_per_column)
    generate_seconds = time.perf_counter() - started
    curves = {}
    for method in args.methods:
        curve = run_method(method, instance, lns_config(method, seed, args, lns), denoiser, args.glns_steps)
        curves[method] = {"times": curve["times"], "values": curve["values"]}
    return {
        "curves": curves,
        "best": min(min(c["values"], default=np.inf) for c in curves.values()),
        "generate_seconds": round(generate_seconds, 2),
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,  # ru_maxrss is in KiB
    }


def plot_gaps(panels: dict, grid: np.ndarray, path: Path) -> Figure:
    """Each instance family's gap curves (:func:`gap_curve`) on log-log axes, whose y label says where gap 0 is."""
    return plot_log_sweeps(
        {panel: dict(series) for panel, series in panels.items()},
        grid,
        path,
        "weighted set cover: primal gap to the best known vs wall-clock",
        "seconds",
        {panel: f"primal gap (0 drawn at {GAP_FLOOR:g})" for panel in panels},
    )


def job_settings(args: SetCoverArguments, lns: SetCoverLNSConfig) -> dict:
    """What decides an instance's runs: every setting but ``NOT_JOB_SETTINGS`` (stored, and checked on a rerun)."""
    return {k: v for k, v in asdict(args).items() if k not in NOT_JOB_SETTINGS} | shared_settings(lns)


@on_main_process
def main(argv: list[str] | None = None) -> dict:
    args, lns = parser(argv).parse_args_and_config(argv)
    out = Path(args.output_dir)
    check_job_settings(out, job_settings(args, lns), "set_cover")
    uses_denoiser = {"glns", "glns_adaptive"} & set(args.methods)
    denoiser = load_denoiser(args.denoiser) if args.denoiser and uses_denoiser else None
    budget = max(args.time_limits)
    grid = np.geomspace(budget / 200, budget, 40)
    rows, panels, memory = [], defaultdict(lambda: defaultdict(list)), {}
    jobs = [(f, n, s) for n in args.n_columns for f in args.families for s in args.seeds]
    for family, n_columns, seed in tqdm(jobs, desc="set_cover instances"):
        name = f"{family}_{n_columns}_seed_{seed}"
        job = stored_or_run(out, name, run_instance, family, n_columns, seed, args, lns, denoiser)
        best = job["best"]
        memory[f"{family}_{n_columns}"] = max(memory.get(f"{family}_{n_columns}", 0.0), job["peak_rss_gib"])
        for method, curve in job["curves"].items():
            for limit in args.time_limits:
                rows.append(
                    {"family": family, "n_columns": n_columns, "seed": seed, "method": method, "budget": limit}
                    | score(curve, best, limit)
                    | {"best_known": best, "generate_seconds": job["generate_seconds"]}
                )
            panels[f"{family}, {n_columns} columns"][method].append(gap_curve(curve, best, grid))
    out.mkdir(parents=True, exist_ok=True)
    write_rows(out / "runs.csv", rows)
    summary = summarize(rows)
    plot_gaps(panels, grid, out / "gap_vs_time.png")
    results = {"summary": summary, "peak_rss_gib": memory, "args": asdict(args), "lns": shared_settings(lns)}
    write_results(out, results)
    for key, value in summary.items():
        print(
            f"{key}: primal integral {value['primal_integral']:.3g} +- {value['primal_integral_std']:.2g}, "
            f"final gap {value['gap']:.3g} +- {value['gap_std']:.2g}"
        )
    print(f"wrote {out / 'runs.csv'}, {out / 'results.json'}, {out / 'gap_vs_time.png'}")
    return results


def summarize(rows: list[dict]) -> dict:
    """Mean and std over seeds of the primal integral and final gap, per (family, size, budget, method)."""
    grouped = defaultdict(list)
    for row in rows:
        grouped[f"{row['family']}/{row['n_columns']}/{row['budget']:g}s/{row['method']}"].append(row)
    summary = {}
    for key, group in grouped.items():
        entry = {}
        for metric in ("primal_integral", "gap"):
            values = [r[metric] for r in group]
            entry[metric] = statistics.fmean(values)
            entry[f"{metric}_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
        summary[key] = entry
    return summary


if __name__ == "__main__":
    run_as_script(main)
