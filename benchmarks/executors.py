"""Companion loops on a cluster: wall-clock speed-up of batch and asynchronous BO and of one ES generation on a local
Dask cluster and a local Ray, and the regret that batch and asynchronous BO pay per evaluation.

    python benchmarks/executors.py [--seeds 0 1 2 3 4] [--workers 1 2 4 8] [--backends dask ray]
        [--evaluations 24] [--population 8] [--objectives branin] [--regret-evaluations 20] [--regret-q 4]
        [--parts speedup regret] [--cost sleep|train] [--train-steps 300]

Speed-up. The objective sleeps ``--sleep`` seconds (1) and returns Branin (BO) or the sphere (ES), so it needs no
core: what is measured is the executor and the loop's own work between evaluations. A fresh local cluster of w
single-threaded workers per backend and worker count (Dask ``LocalCluster``, ``ray.init(num_cpus=w)``), its
workers warmed up (torch and BoTorch imported) before any timing. Sequential BO (q = 1, one worker) is the
baseline of both BO rows: batch BO proposes q = w points per round and waits for them, asynchronous BO keeps w
in flight and proposes each new point with the others as X_pending; both run ``--evaluations`` evaluations (8 of
them Sobol). The ES row is one SepCMAES generation of ``--population`` candidates against the same generation on
one worker. Goal: speed-up >= 0.85 x workers. The BO loop fits its GP and optimises the acquisition in the driver
process (``driver_s``, the time spent there; ``driver_share`` of the wall-clock): a batch round waits for it before
its evaluations start, and an asynchronous run proposes one point per finished evaluation, so once w evaluations
finish faster than the driver proposes, the driver sets the pace. ``evaluation_speedup`` leaves the driver's time
out on both sides (batch only: an asynchronous run proposes while others evaluate): what the executor delivers.
``--cost train`` makes each evaluation CPU-bound instead: ``--train-steps`` Adam steps of a small MLP in one torch
thread (about 1 s on an idle core here), so the speed-up is capped by the cores the workers share.

Regret. GP with UCB (its batch form qUCB) on BoTorch's Branin (and Hartmann-6 with ``--objectives``), maximised,
``--regret-evaluations`` evaluations per run, sequential against batch (q = ``--regret-q``) and asynchronous
(``--regret-q`` in flight) over ``--seeds``: simple regret after the last evaluation and cumulative regret per
evaluation, mean and sample std. These runs use no sleep and go through ``run_jobs`` on ``--regret-workers`` local
processes; inside each run the evaluations are in-process, so an asynchronous run sees them finish in the order
they were proposed (each new point still proposed with the others pending), which makes it reproducible.

About 7 minutes on 2 busy CPU cores with the defaults. docs/cluster.md's numbers (about 20 minutes):

    python benchmarks/executors.py --evaluations 32 --population 16 --regret-evaluations 30

and Hartmann-6 too (about 40 minutes): add ``--objectives branin hartmann6 --regret-evaluations 40``.

Writes ``executors.json``, ``executors_speedup.png`` and ``executors_regret.png`` under ``--output-dir``; the last
line is JSON.
"""

import statistics
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from _harness import benchmark_parser, emit, save_json
from botorch.test_functions import Branin, Hartmann

from hf_ext.companion.bo import BayesianOptimization, BayesianOptimizationConfig
from hf_ext.companion.es import ESConfig, minimize
from hf_ext.companion.evaluation.bo import regret_curves
from hf_ext.executors import RayExecutor, local_executor, run_jobs
from hf_ext.recipes._plotting import plot_bands, plot_line_panels

OBJECTIVES = {"branin": lambda: Branin(negate=True), "hartmann6": lambda: Hartmann(dim=6, negate=True)}
BACKENDS = ("dask", "ray")
MODES = ("sequential", "batch", "async")
PARTS = ("speedup", "regret")
N_INITIAL = 8
GOAL = 0.85


class Sleeping:
    """``function(x)`` after ``seconds`` of sleep: an expensive black box that needs no core while it runs."""

    def __init__(self, function: Callable, seconds: float, dim: int):
        self.function, self.seconds, self.dim = function, seconds, dim

    def __call__(self, x):
        time.sleep(self.seconds)
        return self.function(x)


class Training:
    """``function(x)`` after ``steps`` Adam steps of a small MLP on fixed random data in one torch thread: an
    expensive black box that keeps a core busy while it runs (a training run in miniature)."""

    def __init__(self, function: Callable, steps: int, dim: int):
        self.function, self.steps, self.dim = function, steps, dim

    def __call__(self, x):
        torch.set_num_threads(1)
        generator = torch.Generator().manual_seed(0)
        inputs, targets = torch.randn(512, 64, generator=generator), torch.randn(512, 1, generator=generator)
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        for _ in range(self.steps):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(inputs), targets).backward()
            optimizer.step()
        return self.function(x)


def expensive(function: Callable, cost: str, amount: float, dim: int) -> Callable:
    """``function`` made expensive: ``amount`` seconds of sleep (``cost="sleep"``) or ``amount`` training steps."""
    return Sleeping(function, amount, dim) if cost == "sleep" else Training(function, int(amount), dim)


def sphere(x: np.ndarray) -> float:
    return float(np.sum(np.asarray(x) ** 2))


def _warm(seconds: float) -> None:
    """Import what an evaluation needs (torch, BoTorch) in a worker, holding it for ``seconds`` so that the
    concurrent warm-up calls land on different workers."""
    import hf_ext.companion.bo.loop  # noqa: F401

    time.sleep(seconds)


@contextmanager
def cluster(backend: str, size: int) -> Iterator[Executor]:
    """An executor on a fresh local cluster of ``size`` single-threaded workers, each warmed up.

    One cluster per worker count: limiting a bigger Ray instance by the CPUs each task reserves made Ray
    replace its idle workers between runs (their torch import, seconds each, landed inside the timings).
    """
    if backend == "dask":
        from distributed import Client, LocalCluster

        with (
            LocalCluster(n_workers=size, threads_per_worker=1, processes=True, dashboard_address=None) as local,
            Client(local) as client,
        ):
            client.run(_warm, 0.0)
            yield client.get_executor()
        return
    import ray

    ray.init(num_cpus=size, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        executor = RayExecutor(num_cpus=1)
        for future in [executor.submit(_warm, 2.0) for _ in range(size)]:
            future.result()
        yield executor
    finally:
        ray.shutdown()


class TimedBO(BayesianOptimization):
    """The BO loop, timing what the driver spends proposing (model fits and acquisition optimisation)."""

    driver_seconds = 0.0

    def suggest(self, count=1, X_pending=None):
        start = time.perf_counter()
        try:
            return super().suggest(count, X_pending)
        finally:
            self.driver_seconds += time.perf_counter() - start


def bo_seconds(executor: Executor, q: int, asynchronous: bool, evaluations: int, cost: tuple[str, float]) -> dict:
    """Wall-clock and driver seconds of one BO run of ``evaluations`` evaluations of the expensive Branin."""
    branin = Branin(negate=True)
    config = BayesianOptimizationConfig(
        model="gp", acquisition="ucb", n_initial=N_INITIAL, num_restarts=2, raw_samples=64, q=q,
        asynchronous=asynchronous,
    )  # fmt: skip
    loop = TimedBO(expensive(branin, *cost, 2), branin.bounds, config, executor=executor)
    start = time.perf_counter()
    history = loop.run(evaluations)
    if len(history) != evaluations or any(e.failed for e in history):
        raise RuntimeError(f"a BO run recorded {len(history)} evaluations, failed ones among them")
    return {"seconds": time.perf_counter() - start, "driver_s": loop.driver_seconds}


def es_seconds(executor: Executor, population: int, cost: tuple[str, float]) -> dict:
    """Wall-clock seconds of one SepCMAES generation of ``population`` expensive sphere evaluations."""
    config = ESConfig(sigma0=1.0, popsize=population, max_evaluations=population, seed=0)
    start = time.perf_counter()
    result = minimize(expensive(sphere, *cost, 4), np.ones(4), config, executor=executor)
    if result.evaluations != population or result.nan_values:
        raise RuntimeError(f"an ES generation made {result.evaluations} evaluations, {result.nan_values} lost")
    return {"seconds": time.perf_counter() - start}


def speedups(backend: str, workers: list[int], evaluations: int, population: int, cost: tuple[str, float]) -> dict:
    """Each mode's wall-clock seconds and speed-up over one worker, per number of workers, on ``backend``."""
    rows = {mode: {} for mode in ("batch", "async", "es")}
    for w in sorted({1, *workers}):
        with cluster(backend, w) as executor:
            measured = {
                "batch": bo_seconds(executor, w, False, evaluations, cost),  # q = 1 on one worker: sequential
                "async": bo_seconds(executor, w, True, evaluations, cost) if w > 1 else None,
                "es": es_seconds(executor, population, cost),
            }
        measured["async"] = measured["async"] or measured["batch"]
        for mode, run in measured.items():
            base = rows[mode][1] if w > 1 else run
            speedup = base["seconds"] / run["seconds"]
            rows[mode][w] = run | {"speedup": speedup, "efficiency": speedup / w}
            if mode == "batch":  # a batch round proposes, then waits: the evaluations' part alone
                waiting = (base["seconds"] - base["driver_s"]) / (run["seconds"] - run["driver_s"])
                rows[mode][w]["evaluation_speedup"] = waiting
            print(f"{backend} {mode} x{w}: {run['seconds']:.1f} s, speed-up {speedup:.2f}", flush=True)
    return {mode: {w: row for w, row in by_workers.items() if w in workers} for mode, by_workers in rows.items()}


def regret_run(objective: str, mode: str, seed: int, evaluations: int, q: int) -> dict:
    """One BO run's regret per evaluation (in the order the evaluations were recorded)."""
    function = OBJECTIVES[objective]()
    parallel = {"sequential": {}, "batch": {"q": q}, "async": {"q": q, "asynchronous": True}}[mode]
    config = BayesianOptimizationConfig(
        model="gp", acquisition="ucb", n_initial=2 * (function.dim + 1), seed=seed, num_restarts=2, raw_samples=64,
        **parallel,
    )  # fmt: skip
    history = BayesianOptimization(function, function.bounds, config).run(evaluations)
    curves = regret_curves(torch.tensor([e.true for e in history]), function.optimal_value)
    return {"simple": curves["simple"].tolist(), "cumulative": curves["cumulative"].tolist()}


def _mean_std(values: list[float]) -> dict:
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0}


def regrets(objectives: list[str], seeds: list[int], evaluations: int, q: int, workers: int) -> tuple[dict, dict]:
    """Per objective and mode: the summary over seeds, and the simple-regret curves (one per seed)."""
    jobs = [(o, m, s, evaluations, q) for o in objectives for m in MODES for s in seeds]
    executor = local_executor(workers, initializer=torch.set_num_threads, initargs=(1,))
    try:
        runs = run_jobs(executor, regret_run, jobs, on_result=lambda i, _: print(f"regret run {jobs[i][:3]} done"))
    finally:
        executor.shutdown()
    summary, curves = {}, {}
    for objective in objectives:
        for mode in MODES:
            mine = [run for job, run in zip(jobs, runs, strict=True) if job[:2] == (objective, mode)]
            summary[f"{objective}/{mode}"] = {
                "simple_regret": _mean_std([run["simple"][-1] for run in mine]),
                "regret_per_evaluation": _mean_std([run["cumulative"][-1] / evaluations for run in mine]),
            }
            curves.setdefault(objective, {})[mode] = [run["simple"] for run in mine]
    return summary, curves


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1, 2, 3, 4])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--sleep", type=float, default=1.0, help="seconds each evaluation sleeps")
    parser.add_argument(
        "--cost", choices=["sleep", "train"], default="sleep", help="what makes an evaluation expensive"
    )
    parser.add_argument("--train-steps", type=int, default=300, help="--cost train: Adam steps per evaluation")
    parser.add_argument("--evaluations", type=int, default=24, help="evaluations per timed BO run")
    parser.add_argument("--population", type=int, default=8, help="ES population (one generation is timed)")
    parser.add_argument("--objectives", nargs="+", choices=sorted(OBJECTIVES), default=["branin"])
    parser.add_argument("--regret-evaluations", type=int, default=20)
    parser.add_argument("--regret-q", type=int, default=4, help="batch size / evaluations in flight")
    parser.add_argument("--regret-workers", type=int, default=2, help="local processes for the regret runs")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="what to measure")
    args = parser.parse_args()
    if min(args.workers) < 1 or args.evaluations <= N_INITIAL or args.population < 2:
        parser.error("--workers must be >= 1, --evaluations > 8 and --population >= 2")
    workers = sorted(set(args.workers))
    timed, regret = {}, {}
    if "speedup" in args.parts:
        bo_seconds(local_executor(1), 2, False, N_INITIAL + 4, ("sleep", 0.0))  # the driver's first fits warm up
        cost = ("sleep", args.sleep) if args.cost == "sleep" else ("train", args.train_steps)
        timed = {b: speedups(b, workers, args.evaluations, args.population, cost) for b in args.backends}
    if "regret" in args.parts:
        regret, curves = regrets(
            args.objectives, args.seeds, args.regret_evaluations, args.regret_q, args.regret_workers
        )
    out = Path(args.output_dir)
    if timed:
        panels = {
            backend: {mode: [(w, row["speedup"]) for w, row in by_workers.items()] for mode, by_workers in rows.items()}
            | {f"goal ({GOAL} x workers)": [(w, GOAL * w) for w in workers]}
            for backend, rows in timed.items()
        }
        what = f"{args.sleep:g} s sleeping" if args.cost == "sleep" else f"{args.train_steps}-step training"
        title = f"wall-clock speed-up over one worker ({what} evaluations)"
        plot_line_panels(panels, out / "executors_speedup.png", title, "workers", "speed-up")
    if regret:
        title = f"simple regret, {len(args.seeds)} seeds, q = {args.regret_q}"
        plot_bands(curves, out / "executors_regret.png", title, "evaluation", "simple regret", log_y=True)
    summary = {"workers": workers, "cost": args.cost, "sleep_s": args.sleep, "train_steps": args.train_steps}
    summary |= {"evaluations": args.evaluations}
    summary |= {"population": args.population, "seeds": args.seeds, "regret_q": args.regret_q}
    summary |= {"regret_evaluations": args.regret_evaluations}
    for backend, rows in timed.items():
        for mode, by_workers in rows.items():
            for w, row in by_workers.items():
                summary[f"{backend}/{mode}/x{w}/speedup"] = round(row["speedup"], 3)
                if "driver_s" in row:
                    summary[f"{backend}/{mode}/x{w}/driver_share"] = round(row["driver_s"] / row["seconds"], 3)
                if "evaluation_speedup" in row:
                    summary[f"{backend}/{mode}/x{w}/evaluation_speedup"] = round(row["evaluation_speedup"], 3)
    for key, value in regret.items():
        for metric, stats in value.items():
            summary[f"{key}/{metric}"] = {name: round(number, 4) for name, number in stats.items()}
    save_json(args.output_dir, "executors", {"speedups": timed, "regret": regret, "summary": summary})
    emit(summary)


if __name__ == "__main__":
    main()
