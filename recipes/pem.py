"""PEM on COCO bbob-noisy: RB-PEM and probe-and-switch against sep-CMA-ES, resampling and pycma (UH-CMA-ES).

    hf-ext run pem                                   # shipped config (the benchmark's settings)
    hf-ext run pem functions="101 107 125" instances="1 2"
    hf-ext run pem --config pem_quick                # seconds: the end-to-end check (its fields can be overridden)

Runs every method on every (function, instance) of bbob-noisy at ``dimension`` for each budget (k D evaluations,
re-evaluations included), through ``cocoex``'s observer: COCO's result folders go to
``output_dir/coco/exdata/<method>_<k>D/``, one per algorithm, so that ``python -m cocopp output_dir/coco/exdata/*``
compares them. A rerun into the same ``output_dir`` skips the runs already listed in
``output_dir/coco/index.jsonl``; ``methods``, ``functions``, ``instances``, ``dimension`` and ``budget_multipliers``
only choose which runs are made and may change between reruns, but a rerun with another ``seed``, ``popsize`` or
``max_reevaluations`` is refused before any work (``output_dir/coco/settings.json``; cocopp would pool them). Then
each method on the external noisy tasks (a scikit-learn hyperparameter search and a cart-pole policy), one run per
task seed, judged at the method's final mean. Writes ``runs.csv`` (final best noise-free f - f_opt per run, with its
per-generation misranking in the index), ``winloss.csv`` (wins/losses/ties, the sign-test and Wilcoxon signed-rank
p-values of each challenger against each other method, per budget), ``slices.csv`` (the same inside and outside the
high-misranking slice, per function group; needs ``sep_cma``, whose run measures each problem's misranking),
``tasks.csv``, ``results.json``, ``ecdf.png`` (fraction of COCO's 51 targets reached against evaluations / D),
``winloss.png`` and ``winrate_misranking.png`` (RB-PEM's win rate against each method by misranking bin) to
``output_dir``, for the runs of this invocation's settings.

    hf-ext run pem --config pem_suite dimension=2    # the whole suite, budgets 100 D and 1000 D, every method
"""

import statistics
from collections import defaultdict
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from trl import TrlParser

from hf_ext.companion.evaluation.es import CocoConfig, run_coco
from hf_ext.companion.evaluation.es.coco import EXDATA
from hf_ext.companion.evaluation.es.compare import (
    ecdf,
    run_misranking,
    slice_tests,
    win_rate_by_misranking,
    wins_losses,
)
from hf_ext.companion.evaluation.es.tasks import TASKS, run_task
from hf_ext.executors import local_executor, run_jobs
from hf_ext.recipes._jobs import on_main_process
from hf_ext.recipes._plotting import plot_bands, plot_grouped_bars, plot_line_panels
from hf_ext.recipes._results import write_results, write_rows
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import run_config, set_per_run, settings_parser, shared_settings

CHALLENGERS = ("rb_pem", "unbiased_pem", "probe_switch")
REFERENCE = "sep_cma"  # its run's misranking places a problem in or out of the high-misranking slice
MISRANKING_BINS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5)


@dataclass
class PemArguments(CocoConfig):
    """CocoConfig (which runs, at which dimension and budgets, seed, workers) and the recipe's own settings: the
    external tasks and the misranking slice. ``rb_pem``, ``unbiased_pem`` and ``probe_switch`` among ``methods``
    are compared with every other method; COCO's folders go to ``output_dir/coco``."""

    result_folder: str = set_per_run(CocoConfig, "result_folder", by="`output_dir` (its coco/ folder)")
    tasks: list[str] = field(default_factory=lambda: list(TASKS), metadata={"help": f"Any of {list(TASKS)}."})
    task_seeds: list[int] = field(default_factory=lambda: [0, 1, 2], metadata={"help": "One task run per seed."})
    task_budget_multiplier: int = field(default=100, metadata={"help": "Task budget in evaluations per dimension."})
    task_repeats: int = field(default=30, metadata={"help": "Fresh evaluations that judge a task's result (>= 1)."})
    misranking_threshold: float = field(
        default=0.25,
        metadata={
            "help": "The high-misranking slice: problems whose sep-CMA-ES run reverses at least this fraction of "
            "its candidate pairs on average (in [0, 0.5]; 0.25 is Kendall's tau <= 0.5 between noisy and true values)."
        },
    )
    output_dir: str = field(default="outputs/pem", metadata={"help": "Where COCO's folders, CSV, JSON and PNG go."})

    def __post_init__(self):
        super().__post_init__()
        unknown = [task for task in self.tasks if task not in TASKS]
        if unknown:
            raise ValueError(f"PemArguments: `tasks` must be from {list(TASKS)}, got {self.tasks}")
        if not 0 <= self.misranking_threshold <= 0.5:
            raise ValueError(
                f"PemArguments: `misranking_threshold` must be in [0, 0.5], got {self.misranking_threshold}"
            )
        for name in ("task_budget_multiplier", "task_repeats"):
            if getattr(self, name) < 1:
                raise ValueError(f"PemArguments: `{name}` must be an integer >= 1, got {getattr(self, name)}")

    def coco_config(self) -> CocoConfig:
        return run_config(CocoConfig, self, result_folder=str(Path(self.output_dir) / "coco"))


def parser(argv: list[str] | None = None) -> TrlParser:
    """The parser ``main`` reads its settings with (the same for every ``argv``)."""
    return settings_parser(PemArguments)


def parse_args(argv: list[str] | None) -> PemArguments:
    (args,) = parser(argv).parse_args_and_config(argv)
    return args


def win_loss_table(records: list[dict], args: PemArguments) -> list[dict]:
    """Each challenger against every other configured method, per budget."""
    return [
        {"challenger": ours, "baseline": other, "budget": f"{k}D"} | wins_losses(records, ours, other, k)
        for k in args.budget_multipliers
        for ours in CHALLENGERS
        if ours in args.methods
        for other in args.methods
        if other != ours
    ]


def misranking_slices(records: list[dict], args: PemArguments) -> list[dict]:
    """Each challenger against every other method, per budget, inside and outside the high-misranking slice, per
    function group (empty without the reference method's runs, which measure each problem's misranking)."""
    if REFERENCE not in args.methods:
        return []
    return [
        row
        for ours in CHALLENGERS
        if ours in args.methods
        for other in args.methods
        if other != ours
        for row in slice_tests(records, ours, other, args.misranking_threshold, REFERENCE)
    ]


def plot_win_rate(records: list[dict], args: PemArguments, path: Path) -> None:
    """One panel per budget: RB-PEM's win rate against each other method over bins of the problems' misranking."""
    panels = {
        f"budget {k}D, D = {args.dimension}": {
            f"vs {other}": [
                ((b["low"] + b["high"]) / 2, b["win_rate"])
                for b in win_rate_by_misranking(records, "rb_pem", other, k, MISRANKING_BINS, REFERENCE)
            ]
            for other in args.methods
            if other != "rb_pem"
        }
        for k in args.budget_multipliers
    }
    title = "RB-PEM's win rate against the pair misranking of sep-CMA-ES's run"
    plot_line_panels(panels, path, title, "misranking (mean over generations)", "wins / (wins + losses)")


def run_tasks(args: PemArguments, executor: Executor) -> list[dict]:
    jobs = [
        (task, method, args.task_budget_multiplier, seed, args.task_repeats)
        for task in args.tasks
        for method in args.methods
        for seed in args.task_seeds
    ]
    return run_jobs(executor, run_task, jobs)


def summarize_tasks(task_runs: list[dict]) -> dict:
    """Mean and std over seeds of each (task, method)'s expected value at its mean, and the mean at its xbest."""
    grouped = defaultdict(list)
    for run in task_runs:
        grouped[f"{run['task']}/{run['method']}"].append(run)
    return {
        name: {
            "mean": statistics.fmean(run["expected"] for run in runs),
            "std": statistics.stdev(run["expected"] for run in runs) if len(runs) > 1 else 0.0,
            "mean_at_xbest": statistics.fmean(run["expected_xbest"] for run in runs),
        }
        for name, runs in grouped.items()
    }


def plot_ecdf(records: list[dict], args: PemArguments, path: Path) -> None:
    """One panel per budget: each method's fraction of (run, target) pairs reached by j D evaluations."""
    panels = {}
    for k in args.budget_multipliers:
        curves = ecdf([r for r in records if r["budget_multiplier"] == k], np.arange(1, k + 1) * args.dimension)
        panels[f"budget {k}D, D = {args.dimension}"] = {m: [curves[m, k].tolist()] for m in args.methods}
    title = "bbob-noisy: fraction of targets 1e2..1e-8 reached"
    plot_bands(panels, path, title, "evaluations / D", "fraction of (run, target)", ncols=len(panels))


@on_main_process
def main(argv: list[str] | None = None, executor: Executor | None = None) -> dict:
    """The recipe; its runs go to ``executor`` when given (a Dask or Ray executor), else to ``workers`` local
    processes."""
    args = parse_args(argv)
    out = Path(args.output_dir)
    coco = args.coco_config()
    pool = local_executor(args.workers) if executor is None else None
    try:
        records = run_coco(coco, executor or pool)
        task_runs = run_tasks(args, executor or pool) if args.tasks else []
    finally:
        if pool is not None:
            pool.shutdown()
    table = win_loss_table(records, args)
    out.mkdir(parents=True, exist_ok=True)
    write_rows(
        out / "runs.csv",
        [
            {k: v for k, v in r.items() if k not in ("trajectory", "misranking")} | {"misranking": run_misranking(r)}
            for r in records
        ],
    )
    if table:
        write_rows(out / "winloss.csv", table)
        bars = {
            kind: {f"{r['challenger']} vs {r['baseline']} {r['budget']}": r[kind] for r in table}
            for kind in ("wins", "losses")
        }
        plot_grouped_bars(bars, out / "winloss.png", "bbob-noisy (function, instance) pairs", "pairs")
    slices = misranking_slices(records, args)
    if slices:
        write_rows(out / "slices.csv", slices)
        if "rb_pem" in args.methods:
            plot_win_rate(records, args, out / "winrate_misranking.png")
    if task_runs:
        write_rows(out / "tasks.csv", task_runs)
    plot_ecdf(records, args, out / "ecdf.png")
    results = {"winloss": table, "slices": slices, "tasks": summarize_tasks(task_runs), "args": shared_settings(args)}
    write_results(out, results)
    for row in table:
        print(
            f"{row['challenger']} vs {row['baseline']} at {row['budget']}: {row['wins']} wins / {row['losses']} losses "
            f"/ {row['ties']} ties, sign-test p = {row['p_value']:.3g}"
        )
    for name, value in results["tasks"].items():
        print(f"{name}: {value['mean']:.4g} +- {value['std']:.2g}")
    print(f"wrote {out / 'runs.csv'}, {out / 'winloss.csv'}, {out / 'results.json'}, {out / 'ecdf.png'}")
    print(f"COCO's post-processing: python -m cocopp -o {out / 'ppdata'} {Path(coco.result_folder) / EXDATA}/*")
    return results


if __name__ == "__main__":
    run_as_script(main)
