"""Run the ES methods on COCO's bbob-noisy (f101-f130) through ``cocoex``, writing COCO's standard result folders.

``<result_folder>/exdata/`` holds one folder per algorithm, ``<method>_<k>D`` (the method at budget k D), and
nothing else, so that ``python -m cocopp <result_folder>/exdata/*`` compares the algorithms (cocopp names each
after its folder, and pools everything under one folder into one algorithm). Inside it, each (function,
instance, dimension) run has its own observer folder ``f<fff>_i<ii>_d<D>/`` (runs are made in parallel, on any
executor, and an observer writes to a folder of its own); cocopp reads them recursively as one algorithm.
Beside ``exdata/``, ``index.jsonl`` lists each run once complete: a rerun skips the runs listed there whose
folder is present and redoes the others (a cut-off run's folder is removed first, since cocoex would otherwise
write to a renamed copy). ``settings.json`` holds the seed, the population size and the re-evaluation cap, and a
rerun with another is refused: cocopp would read two seeds of one instance as two trials, or two population sizes
(or caps) as one algorithm.
Each (function, instance, dimension) draws its own random stream from the seed (``problem_seed``), the same for
every method: the problems of one seed are independent trials and the methods' runs on one problem are paired.
"""

import json
import logging
import shutil
import threading
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from hf_ext._settings import check_and_store_settings
from hf_ext._validation import check_count, check_finite_fields, check_list
from hf_ext.companion.es.config import MAX_UNBIASED_REEVALUATIONS, ESConfig, check_popsize, default_popsize
from hf_ext.executors import local_executor, run_jobs

from .harness import METHODS, OURS, solve
from .misranking import misranking_by_generation

logger = logging.getLogger(__name__)

DIMENSIONS = (2, 3, 5, 10, 20, 40)
FUNCTIONS = tuple(range(101, 131))
INSTANCES = tuple(range(1, 16))
INDEX = "index.jsonl"
SETTINGS = "settings.json"
EXDATA = "exdata"  # COCO's name for the folder of algorithm folders
SEEDING = "per problem"  # stored with the seed: folders made when one stream served every problem are refused
# bbob-noisy draws its noise from one generator per process and pycma seeds numpy's global one, so two runs in
# threads of one process would draw each other's numbers: they take turns (a thread pool gives the same results
# as processes, one run at a time).
_ONE_RUN_PER_PROCESS = threading.Lock()


@dataclass
class CocoConfig:
    """Which bbob-noisy runs :func:`run_coco` makes, and where it writes them."""

    methods: list[str] = field(
        default_factory=lambda: ["rb_pem", "sep_cma"], metadata={"help": f"Any of {list(METHODS)}."}
    )
    functions: list[int] = field(
        default_factory=lambda: list(FUNCTIONS), metadata={"help": "bbob-noisy functions, 101-130."}
    )
    instances: list[int] = field(default_factory=lambda: [1, 2, 3], metadata={"help": "Instances, 1-15."})
    dimension: int = field(default=10, metadata={"help": f"Search-space dimension D, one of {list(DIMENSIONS)}."})
    budget_multipliers: list[int] = field(
        default_factory=lambda: [100], metadata={"help": "Budgets in evaluations per dimension (k D each, k >= 1)."}
    )
    seed: int = field(
        default=0,
        metadata={"help": "Seeds the methods: each problem draws its own stream from it, the same for every method."},
    )
    popsize: int | None = field(
        default=None,
        metadata={
            "help": "Population size of our ES methods and pycma's (>= 2; None: CMA-ES's default 4 + floor(3 ln D)). "
            "RB-PEM's weights differ from the hard ones only when popsize > D + 1."
        },
    )
    max_reevaluations: int | None = field(
        default=None,
        metadata={
            "help": "Cap on the re-evaluations per generation of rb_pem, unbiased_pem and probe_switch (>= 0; at most "
            f"{MAX_UNBIASED_REEVALUATIONS} with unbiased_pem; None: ESConfig's default, 2)."
        },
    )
    result_folder: str = field(
        default="outputs/pem/coco",
        metadata={"help": "Where COCO's folders (exdata/<method>_<k>D/), the index and the settings go."},
    )
    workers: int = field(
        default=2,
        metadata={"help": "Runs in parallel (local processes, >= 1) when run_coco is given no executor."},
    )

    def __post_init__(self):
        check_finite_fields(self)
        owner = type(self).__name__
        check_list(owner, "methods", self.methods)
        for name in ("functions", "instances", "budget_multipliers"):
            check_list(owner, name, getattr(self, name), int)
        check_count(owner, "seed", self.seed)  # numpy's SeedSequence would refuse it once the runs start
        for name, allowed in (("methods", METHODS), ("functions", FUNCTIONS), ("instances", INSTANCES)):
            chosen = getattr(self, name)
            if not chosen or any(value not in allowed for value in chosen):
                shown = list(allowed) if name == "methods" else f"{allowed[0]}..{allowed[-1]}"
                raise ValueError(f"{owner}: `{name}` must be a non-empty list from {shown}, got {chosen}")
        if self.dimension not in DIMENSIONS:
            raise ValueError(
                f"{owner}: `dimension` must be one of {list(DIMENSIONS)} (bbob-noisy's), got {self.dimension}"
            )
        if not self.budget_multipliers or any(not isinstance(k, int) or k < 1 for k in self.budget_multipliers):
            raise ValueError(
                f"{owner}: `budget_multipliers` must be a non-empty list of integers >= 1 (budget = k D evaluations), "
                f"got {self.budget_multipliers}"
            )
        check_popsize(owner, self.popsize)
        cap = self.max_reevaluations
        if cap is not None and (not isinstance(cap, int) or cap < 0):
            raise ValueError(f"{owner}: `max_reevaluations` must be None (the default) or an integer >= 0, got {cap!r}")
        if cap is not None:
            for method in OURS.keys() & set(self.methods):
                ESConfig(**OURS[method], max_reevaluations=cap)  # each method's own limits on the cap, before any run
        check_count(owner, "workers", self.workers, least=1)


def run_key(record: dict) -> tuple:
    """What names one run in the index: (method, budget multiplier, function, instance, dimension, seed)."""
    return tuple(record[name] for name in ("method", "budget_multiplier", "function", "instance", "dimension", "seed"))


def read_index(result_folder: str | Path) -> list[dict]:
    """The completed runs listed in ``index.jsonl`` (a torn last line, from a killed run, is dropped with a warning)."""
    path = Path(result_folder) / INDEX
    if not path.exists():
        return []
    records = []
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines, 1):
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number < len(lines):
                raise ValueError(f"{path}: line {number} is not JSON; the index is corrupt") from None
            logger.warning("%s: dropped its torn last line (a run cut off while writing)", path)
    return records


def algorithm_name(method: str, budget_multiplier: int) -> str:
    """What cocopp calls ``method`` at budget ``budget_multiplier`` D: its folder's name, also the ``algId``."""
    return f"{method}_{budget_multiplier}D"


def algorithm_folders(result_folder: str | Path) -> list[Path]:
    """The algorithm folders under ``<result_folder>/exdata/``: the arguments to give ``cocopp``."""
    return sorted(path for path in (Path(result_folder) / EXDATA).glob("*") if path.is_dir())


def run_folder(
    result_folder: str | Path, method: str, budget_multiplier: int, function: int, instance: int, dimension: int
) -> Path:
    """The observer folder of one run."""
    algorithm = Path(result_folder) / EXDATA / algorithm_name(method, budget_multiplier)
    return algorithm / f"f{function}_i{instance:02d}_d{dimension}"


def read_trajectory(folder: Path) -> list[list]:
    """(evaluations, best noise-free f - f_opt so far) from the run's COCO ``.dat`` file, in order."""
    (dat,) = folder.rglob("*.dat")
    rows = [line.split() for line in dat.read_text().splitlines() if line and not line.startswith("%")]
    return [[int(row[0]), float(row[2])] for row in rows]


def noise_free_values(function: int, instance: int, points: np.ndarray) -> np.ndarray:
    """The noise-free values of bbob-noisy ``function``, ``instance`` at ``points`` (one per row).

    cocoex returns only the noisy value; pycma's port of the BBOB functions (``cma.bbobbenchmarks``) computes
    both, and its noise-free values are the ones COCO's observer logs (checked against the observer's files in
    ``tests/companion/evaluation/es/test_coco.py``). It draws its noise from numpy's global generator, restored here.
    """
    from cma import bbobbenchmarks

    benchmark, _ = bbobbenchmarks.instantiate(function, iinstance=instance)
    state = np.random.get_state()
    try:
        _, true = benchmark._evalfull(np.atleast_2d(np.asarray(points, dtype=float)))
    finally:
        np.random.set_state(state)
    return np.asarray(true, dtype=float).reshape(-1)


def generation_length(popsize: int | None, dimension: int) -> int:
    """The block of evaluations misranking is measured on: the configured population, or CMA-ES's default."""
    return popsize or default_popsize(dimension)


class _Recorded:
    """``problem``, keeping every point it evaluates and the (noisy) value it returned."""

    def __init__(self, problem):
        self.problem, self.points, self.values = problem, [], []

    def __call__(self, x) -> float:
        value = self.problem(x)
        self.points.append(np.array(x, dtype=float))
        self.values.append(value)
        return value


def problem_seed(seed: int, function: int, instance: int, dimension: int) -> int:
    """The seed of every method's run on one problem: a stream of its own drawn from ``seed``. One stream for all
    problems made a seed's problems correlated trials, and a sign test over them over-confident (docs/results/pem.md,
    *Independent random streams per problem*)."""
    return int(np.random.SeedSequence([seed, function, instance, dimension]).generate_state(1)[0])


def run_one(
    method: str,
    budget_multiplier: int,
    function: int,
    instance: int,
    dimension: int,
    seed: int,
    result_folder: str,
    popsize: int | None = None,
    max_reevaluations: int | None = None,
) -> dict:
    """One observed run; returns its index record: the trajectory of the best noise-free value, and the pair
    misranking of each block of ``generation_length(popsize, dimension)`` evaluations (the method's generations
    for our ES without re-evaluations; ``None`` for a block whose true values are all equal)."""
    import cocoex

    with _ONE_RUN_PER_PROCESS:
        cocoex.log_level("warning")
        folder = run_folder(result_folder, method, budget_multiplier, function, instance, dimension)
        shutil.rmtree(folder, ignore_errors=True)
        folder.parent.mkdir(parents=True, exist_ok=True)
        suite = cocoex.Suite("bbob-noisy", "", "")  # kept referenced while its problem is in use
        problem = suite.get_problem_by_function_dimension_instance(function, dimension, instance)
        observer = cocoex.Observer(
            "bbob-noisy",
            f"result_folder: {folder.name} outer_folder: {folder.parent} "
            f"algorithm_name: {algorithm_name(method, budget_multiplier)}",
        )
        problem.observe_with(observer)
        budget = budget_multiplier * dimension
        lower, upper = float(problem.lower_bounds[0]), float(problem.upper_bounds[0])
        recorded = _Recorded(problem)
        stream = problem_seed(seed, function, instance, dimension)
        x0 = problem.initial_solution
        cap = {} if max_reevaluations is None else {"max_reevaluations": max_reevaluations}
        evaluations = solve(method, recorded, x0, budget, lower, upper, stream, popsize, **cap).evaluations
        problem.free()
        del observer, suite
        trajectory = read_trajectory(folder)
        true = noise_free_values(function, instance, np.array(recorded.points)) if recorded.points else np.empty(0)
        misranking = misranking_by_generation(recorded.values, true, generation_length(popsize, dimension))
    return {
        "method": method,
        "budget_multiplier": budget_multiplier,
        "function": function,
        "instance": instance,
        "dimension": dimension,
        "seed": seed,
        "evaluations": evaluations,
        "final": trajectory[-1][1],
        "trajectory": trajectory,
        "misranking": [None if np.isnan(value) else round(float(value), 4) for value in misranking],
    }


def run_coco(config: CocoConfig, executor: Executor | None = None) -> list[dict]:
    """Every (method, budget, function, instance) run not yet in the index, on ``executor``.

    ``executor``: any ``concurrent.futures.Executor`` whose workers share ``result_folder`` (a local pool, Dask,
    Ray on a shared file system); default: ``config.workers`` local processes. Each run is indexed as it finishes.
    Returns the records of all the configured runs, the ones done before included. Refuses, before any run,
    a ``result_folder`` whose runs were made with another seed, popsize or cap (see the module docstring).
    """
    out = Path(config.result_folder)
    listed = read_index(out)
    check_and_store_settings(
        out / SETTINGS,
        # popsize and the cap only when set, so that folders made before they were settings resume at the defaults
        {"seed": config.seed, "seeding": SEEDING}
        | ({"popsize": config.popsize} if config.popsize else {})
        | ({"max_reevaluations": config.max_reevaluations} if config.max_reevaluations is not None else {}),
        resuming=bool(listed) or (out / EXDATA).is_dir(),
        run=f"the bbob-noisy runs in {out}",
        start_fresh=f"pass another result_folder (the pem recipe: output_dir), or delete {out}",
    )
    done = {
        run_key(record): record
        for record in listed
        if run_folder(out, *run_key(record)[:5]).is_dir()  # a listed run whose folder is gone is redone
    }
    (out / INDEX).write_text("".join(json.dumps(record) + "\n" for record in done.values()))  # without a torn line
    wanted = [
        (method, k, function, instance, config.dimension, config.seed)
        for method in config.methods
        for k in config.budget_multipliers
        for function in config.functions
        for instance in config.instances
    ]
    todo = [job for job in wanted if job not in done]
    own = executor is None
    executor = local_executor(config.workers) if own else executor
    with tqdm(total=len(wanted), initial=len(wanted) - len(todo), desc="bbob-noisy", unit="run") as bar:
        with (out / INDEX).open("a") as index:

            def indexed(_, record: dict) -> None:
                index.write(json.dumps(record) + "\n")
                index.flush()
                done[run_key(record)] = record
                bar.update()

            try:
                settings = (str(out), config.popsize, config.max_reevaluations)
                run_jobs(executor, run_one, [(*job, *settings) for job in todo], on_result=indexed)
            finally:
                if own:
                    executor.shutdown()
    return [done[job] for job in wanted]
