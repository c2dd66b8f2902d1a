"""Robust BO under corruptions of unbounded magnitude: GP-UCB, RCGP-UCB, GP-TS, RCGP-TS on BoTorch test functions.

    hf-ext run bo_robust                                      # shipped config, ~15 min on 2 CPU cores
    hf-ext run bo_robust methods="rcgp_ucb_stable gp_ucb" objectives=branin seeds="0 1 2 3 4"
    hf-ext run bo_robust --config bo_robust_quick             # seconds: the end-to-end check

Runs every method x objective x corruption x seed for ``rounds`` evaluations (Sobol initial design
included); the loop's settings are ``BayesianOptimizationConfig``'s own, the method setting each run's
model and acquisition and the seed its seed. A corruption setting is ``none``, or a magnitude (``1e6``,
``inf``): an adversary then corrupts ``floor(rounds ** exponent)`` rounds (placed at random, or at new
incumbents with ``placement=best``) by that magnitude. Regret is measured on the true objective. Every
run appends its evaluations to ``histories/<objective>/<corruption>/<method>/seed_<s>.jsonl`` as they
happen and a rerun resumes from them, but only under the same settings: ``settings.json`` in
``output_dir`` holds the arguments that decide a run's evaluations (and each history has its own), and a
rerun with others is refused before any work. ``methods``, ``objectives``, ``corruptions`` and ``seeds``
only choose which runs are made, so they may change between reruns (add a seed to a finished study).
Writes ``regret.csv`` (one row per round), ``results.json`` (final cumulative regret per setting, mean
and standard deviation over seeds, the ratios the method is judged by, and how many gpytorch/BoTorch
warnings each run raised: they are counted, not shown, and kept beside each history in
``seed_<s>.warnings.jsonl``, so a resumed run counts its restored rounds' too) and ``regret.png``
(cumulative regret, mean +- one standard deviation) to ``output_dir``.
"""

import json
import math
import os
import queue
import statistics
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import partial
from multiprocessing import Manager
from pathlib import Path

import torch
from botorch.exceptions.warnings import BotorchWarning
from botorch.test_functions import Ackley, Branin, Hartmann
from botorch.test_functions.synthetic import SyntheticTestFunction
from gpytorch.utils.warnings import GPInputWarning, NumericalWarning
from matplotlib.figure import Figure
from tqdm.auto import tqdm
from trl import TrlParser

from hf_ext._settings import check_and_store_settings
from hf_ext._validation import check_finite_fields
from hf_ext.companion.bo import BayesianOptimization, BayesianOptimizationConfig, ClippedGPFactory
from hf_ext.companion.bo.history import read_json_lines
from hf_ext.companion.evaluation.bo import PLACEMENTS, FrequencyLimitedAdversary, regret_curves
from hf_ext.executors import local_executor, run_jobs
from hf_ext.recipes._jobs import check_workers, on_main_process, workers_field
from hf_ext.recipes._plotting import plot_bands
from hf_ext.recipes._results import write_results, write_rows
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import run_config, set_per_run, settings_parser, shared_settings

# method name -> the BayesianOptimizationConfig fields it sets (the stable RCGPs keep the configured `c`)
METHODS = {
    "gp_ucb": {"model": "gp", "acquisition": "ucb"},
    "rcgp_ucb_stable": {"model": "rcgp", "acquisition": "ucb"},
    "rcgp_ucb_adaptive": {"model": "rcgp", "acquisition": "ucb", "c": None},
    "gp_ts": {"model": "gp", "acquisition": "ts"},
    "rcgp_ts": {"model": "rcgp", "acquisition": "ts"},
    "relevance_pursuit_ucb": {"model": "relevance_pursuit", "acquisition": "ucb"},
}


class QuadraticBowl(SyntheticTestFunction):
    """``sum x_i^2`` on ``[-2, 2]^3``: as smooth and clean as an objective gets, where robustness should cost nothing
    (RCGP-UCB once stalled on it at its initial design, issue 72)."""

    dim = 3
    continuous_inds = list(range(dim))
    _bounds = [(-2.0, 2.0)] * dim
    _optimal_value = 0.0
    _optimizers = [(0.0,) * dim]

    def _evaluate_true(self, X: torch.Tensor) -> torch.Tensor:
        return X.pow(2).sum(-1)


OBJECTIVES = {
    "branin": lambda: Branin(negate=True),
    "hartmann6": lambda: Hartmann(dim=6, negate=True),
    "ackley5": lambda: Ackley(dim=5, negate=True),
    "bowl3": lambda: QuadraticBowl(negate=True),
}
# Arguments that choose which runs are made or how their results are summarised, not what a run evaluates:
# they may change between reruns into the same output_dir (every other argument must not).
NOT_RUN_SETTINGS = (
    "methods",
    "objectives",
    "corruptions",
    "seeds",
    "lenient_tolerance",
    "workers",
    "output_dir",
)
# Warnings of the model-fitting stack (ill-conditioned kernels, jitter, restarts that did not converge): one
# per fit would bury the output, so each run counts them by category into results.json instead.
MODEL_WARNINGS = (NumericalWarning, GPInputWarning, BotorchWarning)


@dataclass
class BORobustArguments:
    methods: list[str] = field(
        default_factory=lambda: ["gp_ucb", "rcgp_ucb_stable", "rcgp_ucb_adaptive", "gp_ts", "rcgp_ts"],
        metadata={"help": f"Any of {list(METHODS)}."},
    )
    objectives: list[str] = field(
        default_factory=lambda: ["branin", "hartmann6", "ackley5"],
        metadata={"help": f"Any of {list(OBJECTIVES)} (maximised)."},
    )
    corruptions: list[str] = field(
        default_factory=lambda: ["none", "1e6", "inf"], metadata={"help": "'none' or a corruption magnitude."}
    )
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2], metadata={"help": "One run per seed and setting."})
    rounds: int = field(default=60, metadata={"help": "Evaluations per run, initial design included (T)."})
    exponent: float = field(default=0.25, metadata={"help": "The adversary corrupts floor(T ** exponent) rounds."})
    placement: str = field(default="random", metadata={"help": f"Where corruptions go, one of {list(PLACEMENTS)}."})
    direction: int = field(default=1, metadata={"help": "+1 adds the magnitude (a fake optimum), -1 subtracts it."})
    lenient_tolerance: float = field(default=0.1, metadata={"help": "Lenient regret counts gaps above this."})
    workers: int = workers_field()
    output_dir: str = field(default="outputs/bo_robust", metadata={"help": "Where the CSV, JSON and PNG go."})

    def __post_init__(self):
        check_finite_fields(self)
        for name, chosen, allowed in (("methods", self.methods, METHODS), ("objectives", self.objectives, OBJECTIVES)):
            unknown = [value for value in chosen if value not in allowed]
            if unknown or not chosen:
                raise ValueError(f"`{name}` must be a non-empty list from {list(allowed)}, got {chosen}")
        for corruption in self.corruptions:
            if corruption != "none" and not _magnitude(corruption) > 0:
                raise ValueError(f"`corruptions` must be 'none' or positive magnitudes, got {corruption!r}")
        if not self.seeds or self.rounds < 2:
            raise ValueError(f"`seeds` must not be empty and `rounds` must be >= 2, got {self.seeds}, {self.rounds}")
        # The adversary's own checks (`exponent`, `placement`, `direction`, each seed) and the workers', here: a value
        # refused once the runs start would leave its settings.json behind, and the corrected rerun refused as a
        # changed one.
        for seed in self.seeds:
            FrequencyLimitedAdversary(self.rounds, 1.0, self.exponent, self.placement, self.direction, seed)
        check_workers("BORobustArguments", self.workers)


@dataclass
class BORobustLoopConfig(BayesianOptimizationConfig):
    """The BO loop's settings shared by every run; each run's method sets ``model`` and ``acquisition`` (and
    ``c=None`` for the adaptive RCGP), and its seed ``seed``."""

    model: str = set_per_run(BayesianOptimizationConfig, "model", by="BORobustArguments' `methods`")
    acquisition: str = set_per_run(BayesianOptimizationConfig, "acquisition", by="BORobustArguments' `methods`")
    seed: int = set_per_run(BayesianOptimizationConfig, "seed", by="BORobustArguments' `seeds`")


def objective_and_optimum(name: str):
    """The maximised BoTorch test function and its maximum (``optimal_value`` already accounts for ``negate``)."""
    objective = OBJECTIVES[name]()
    return objective, objective.optimal_value


def _magnitude(corruption: str) -> float:
    try:
        return float(corruption)
    except ValueError:
        return math.nan


def method_settings(method: str, corruption: str) -> dict:
    """The config fields ``method`` sets for runs under ``corruption``: under infinite corruptions the standard GP,
    which refuses ``+-inf``, sees it as ``+-1e10`` (:class:`ClippedGPFactory`), the wrecked baseline measured here."""
    settings = METHODS[method]
    if settings["model"] == "gp" and math.isinf(_magnitude(corruption)):
        return settings | {"model": ClippedGPFactory()}
    return settings


def _proposing(loop: BayesianOptimization) -> int:
    """The query ``loop`` proposes next: one past every query in its history or pending."""
    return 1 + max([*(e.query for e in loop.history), *loop.pending], default=-1)


@contextmanager
def counted_model_warnings(path: Path, loop: BayesianOptimization) -> Iterator[Counter]:
    """Count ``loop``'s model-fitting warnings by category instead of showing them (others show as usual), each
    appended to ``path`` the moment it is raised with the query the loop is proposing (whose fit raised it).

    A run killed and resumed fits again for the query it was proposing, not for those it had proposed (in its
    history or pending): so the warnings logged from that query on are dropped on resume, and the counts are the
    uninterrupted run's, its restored rounds' included.
    """
    kept = []
    for number, record in read_json_lines(path):
        if not isinstance(record, dict) or set(record) != {"query", "category"}:
            raise ValueError(f"{path}, line {number}: expected a JSON object with keys query and category")
        if record["query"] < _proposing(loop):
            kept.append(record)
    partial = path.with_name(path.name + ".partial")
    partial.write_text("".join(json.dumps(record) + "\n" for record in kept))
    os.replace(partial, path)  # a killed writer leaves the old file or the new one
    counts = Counter(record["category"] for record in kept)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        show = warnings.showwarning

        def count(message, category, filename, lineno, file=None, line=None):  # warnings.showwarning's signature
            if not issubclass(category, MODEL_WARNINGS):
                return show(message, category, filename, lineno, file, line)
            counts[category.__name__] += 1
            with path.open("a") as handle:
                handle.write(json.dumps({"query": _proposing(loop), "category": category.__name__}) + "\n")

        warnings.showwarning = count
        yield counts


def run_one(
    args: BORobustArguments,
    loop_config: BORobustLoopConfig,
    objective_name: str,
    corruption: str,
    method: str,
    seed: int,
    report_rounds: Callable[[int], None] | None = None,
) -> dict:
    """One BO run (resumed from its history file if there is one): its per-round values and warning counts.

    ``report_rounds(n)`` is told of rounds as they are done (a resumed run's first report is its history).
    """
    objective, optimum = objective_and_optimum(objective_name)
    adversary = None
    if corruption != "none":
        adversary = FrequencyLimitedAdversary(
            args.rounds, _magnitude(corruption), args.exponent, args.placement, args.direction, seed=seed
        )
    config = run_config(BayesianOptimizationConfig, loop_config, seed=seed, **method_settings(method, corruption))
    history_file = Path(args.output_dir) / "histories" / objective_name / corruption / method / f"seed_{seed}.jsonl"
    loop = BayesianOptimization(objective, objective.bounds, config, adversary=adversary, history_file=history_file)
    report_rounds = report_rounds or (lambda rounds: None)
    report_rounds(len(loop.history))
    with counted_model_warnings(history_file.with_name(f"seed_{seed}.warnings.jsonl"), loop) as model_warnings:
        history = loop.run(args.rounds, callback=lambda evaluation: report_rounds(1))
    key = {"objective": objective_name, "corruption": corruption, "method": method, "seed": seed}
    return key | {
        "true": [e.true for e in history],
        "observed": [e.observed for e in history],
        "corrupted": [e.corrupted for e in history],
        "optimum": optimum,
        "warnings": dict(model_warnings),
    }


def _rows(run: dict, tolerance: float) -> list[dict]:
    curves = regret_curves(torch.tensor(run["true"]), run["optimum"], tolerance)
    keys = {k: run[k] for k in ("objective", "corruption", "method", "seed")}
    return [
        keys
        | {
            "round": t,
            "true": run["true"][t],
            "observed": run["observed"][t],
            "corrupted": run["corrupted"][t],
            **{f"{name}_regret": curve[t].item() for name, curve in curves.items()},
        }
        for t in range(len(run["true"]))
    ]


def _runs_by_setting(rows: list[dict]) -> dict[tuple[str, str, str], dict[int, list[dict]]]:
    """Rows grouped by (objective, corruption, method), then by seed, in round order."""
    grouped: dict[tuple[str, str, str], dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        grouped[row["objective"], row["corruption"], row["method"]][row["seed"]].append(row)
    return grouped


def summarize(rows: list[dict], args: BORobustArguments) -> dict:
    """Final regrets per (objective, corruption, method): mean and std over seeds, and the judged ratios."""
    summary = {}
    for (objective, corruption, method), runs in _runs_by_setting(rows).items():
        for regret in ("cumulative", "simple", "lenient"):
            values = [run[-1][f"{regret}_regret"] for run in runs.values()]
            name = f"{objective}/{corruption}/{method}/{regret}"
            summary[name] = statistics.fmean(values)
            summary[f"{name}_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
    for objective in args.objectives:
        for method in args.methods:
            clean = summary.get(f"{objective}/none/{method}/cumulative")
            for corruption in args.corruptions:
                if corruption != "none" and clean:
                    corrupted = summary[f"{objective}/{corruption}/{method}/cumulative"]
                    summary[f"{objective}/{corruption}/{method}/over_clean"] = corrupted / clean
        gp_ucb = summary.get(f"{objective}/none/gp_ucb/cumulative")
        for method in ("rcgp_ucb_stable", "rcgp_ucb_adaptive"):
            if gp_ucb and f"{objective}/none/{method}/cumulative" in summary:
                summary[f"{objective}/none/{method}/over_gp_ucb"] = (
                    summary[f"{objective}/none/{method}/cumulative"] / gp_ucb
                )
    return summary


def plot_regret(rows: list[dict], args: BORobustArguments, path: Path) -> Figure:
    """One panel per (objective, corruption): each method's cumulative regret, mean +- std over seeds."""
    panels: dict[str, dict[str, list[list[float]]]] = defaultdict(dict)
    for (objective, corruption, method), runs in _runs_by_setting(rows).items():
        curves = [[row["cumulative_regret"] for row in run] for run in runs.values()]
        panels[f"{objective}, corruption {corruption}"][method] = curves
    title = "Cumulative regret (mean +- std over seeds)"
    return plot_bands(panels, path, title, "round", "cumulative regret", ncols=len(args.corruptions))


def parser(argv: list[str] | None = None) -> TrlParser:
    """The parser ``main`` reads its settings with (the same for every ``argv``)."""
    return settings_parser(BORobustArguments, BORobustLoopConfig)


def check_resumable(args: BORobustArguments, loop_config: BORobustLoopConfig) -> None:
    """Refuse to resume the runs in ``output_dir`` under other settings (see the module docstring); store them."""
    out = Path(args.output_dir)
    run_settings = {name: value for name, value in asdict(args).items() if name not in NOT_RUN_SETTINGS}
    check_and_store_settings(
        out / "settings.json",
        run_settings | shared_settings(loop_config),
        resuming=any((out / "histories").rglob("*.jsonl")),
        run=f"the BO runs in {out}",
        start_fresh=f"pass another output_dir, or delete {out}",
    )


def _drain(rounds_done, bar: tqdm) -> None:
    while True:
        try:
            bar.update(rounds_done.get_nowait())
        except queue.Empty:
            return


def _report_from_worker(rounds_done, recipe_pid: int, rounds: int) -> None:
    """Tell the recipe's process of ``rounds`` done; end this worker if that process is gone (SIGKILLed, out of
    memory). An orphaned worker would go on appending to histories that a rerun resumes: two writers, one file."""
    if os.getppid() != recipe_pid:
        os._exit(1)  # not an exception: the worker would take the next queued run
    rounds_done.put(rounds)


def run_all(jobs: list[tuple], args: BORobustArguments, executor: Executor | None = None) -> list[dict]:
    """Every run, on ``executor`` when given (a Dask or Ray executor: the bar then counts whole runs' rounds) or
    ``args.workers`` at a time, under one progress bar of the rounds done across all of them.

    A run whose worker process dies is run again (it resumes from its history); the first run that raises stops
    the runs not yet started and its error is raised.
    """
    with tqdm(total=len(jobs) * args.rounds, desc="bo_robust", unit="round") as bar:
        if executor is not None:
            return run_jobs(executor, run_one, jobs, on_result=lambda index, run: bar.update(args.rounds))
        if args.workers == 1:
            return run_jobs(None, run_one, [(*job, bar.update) for job in jobs])
        # One thread per process: the matrices are small, and threads would only contend for the cores.
        executor = local_executor(args.workers, initializer=torch.set_num_threads, initargs=(1,))
        try:
            with Manager() as manager:
                rounds_done = manager.Queue()
                report = partial(_report_from_worker, rounds_done, os.getpid())
                jobs = [(*job, report) for job in jobs]
                return run_jobs(executor, run_one, jobs, poll=lambda: _drain(rounds_done, bar))
        finally:
            executor.shutdown()


def count_warnings(runs: list[dict]) -> dict:
    """Model-fitting warnings by category: in total, and for each run that raised any (restored rounds included)."""
    total: Counter = Counter()
    by_run = {}
    for run in runs:
        if run["warnings"]:
            by_run[f"{run['objective']}/{run['corruption']}/{run['method']}/seed_{run['seed']}"] = run["warnings"]
            total.update(run["warnings"])
    return {"total": dict(sorted(total.items())), "runs": by_run}


@on_main_process
def main(argv: list[str] | None = None, executor: Executor | None = None) -> dict:
    """The recipe; its runs go to ``executor`` when given (a Dask or Ray executor), else as ``workers`` says."""
    args, loop_config = parser(argv).parse_args_and_config(argv)
    check_resumable(args, loop_config)
    jobs = [
        (args, loop_config, objective, corruption, method, seed)
        for objective in args.objectives
        for corruption in args.corruptions
        for method in args.methods
        for seed in args.seeds
    ]
    runs = run_all(jobs, args, executor)
    rows = [row for run in runs for row in _rows(run, args.lenient_tolerance)]
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_rows(out / "regret.csv", rows)
    results = {
        "summary": summarize(rows, args),
        "args": asdict(args),
        "loop": shared_settings(loop_config),
        "warnings": count_warnings(runs),
    }
    write_results(out, results)
    plot_regret(rows, args, out / "regret.png")
    for objective in args.objectives:
        for corruption in args.corruptions:
            line = ", ".join(
                f"{m} {results['summary'][f'{objective}/{corruption}/{m}/cumulative']:.1f}" for m in args.methods
            )
            print(f"{objective} / corruption {corruption}: final cumulative regret {line}")
    counted = results["warnings"]
    if counted["total"]:
        kinds = ", ".join(f"{count} {name}" for name, count in counted["total"].items())
        runs_warned = f"{len(counted['runs'])} of {len(runs)} runs"
        print(f"gpytorch/BoTorch warnings in {runs_warned}: {kinds} (counted in results.json, not shown)")
    print(f"wrote {out / 'regret.csv'}, {out / 'results.json'} and {out / 'regret.png'}")
    return results


if __name__ == "__main__":
    run_as_script(main)
