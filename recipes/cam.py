"""CAM: discrete diffusion solvers for MIS and max-cut trained by combinatorial adjoint matching, vs REINFORCE.

    hf-ext run cam                       # shipped config, about 8 minutes on 2 busy CPU cores
    hf-ext run cam --config cam_quick    # seconds: the end-to-end check
    hf-ext run cam workers=2             # two jobs at a time, on local processes

Per seed, for MIS: trains :class:`hf_ext.companion.combinatorial.cam.FlipGNN` by CAM and by the REINFORCE baseline
for the same wall-clock time (``train_seconds``; the solver's settings are :class:`CAMConfig`'s own fields but
``problem``, ``method`` and ``seed``, which each run sets) on Erdos-Renyi graphs of ``train_nodes`` nodes (edge
probability ``edge_prob``), then evaluates both (best of ``eval_chains`` chains; as ``cam+ls`` and ``reinforce+ls``
with each chain's solution first improved by the local search) with min-degree greedy, 2-improvement local search
(from greedy, and ``multistart_ls``: the best of as many random starts as there are chains) and, on ER graphs of
``exact_nodes`` nodes, the exact MIS by HiGHS, on held-out ER graphs of the training sizes, on ``transfer_scales``
times larger ones (transfer), on the ``exact_nodes`` set and, where set, on ER graphs of ``large_nodes`` nodes
(reference: the best set found, with HiGHS and an iterated local search given ``large_time_limit`` seconds per
graph) and RB graphs of ``rb_vars`` variables (solved by HiGHS). For max-cut the same on Barabasi-Albert graphs
(one-flip local search; the reference is the best cut found). It also measures the variance of the two training
signals directly: gradients of independent rollouts at the same weights.

Writes ``runs.csv`` (one row per seed, problem, evaluation set and method: mean value, gap to the reference,
seconds), ``results.json`` (rows, summary, signal variances, training curves, the rollouts' chain diagnostics over
the last tenth of training), ``cam_gap.png`` and
``cam_training.png`` to ``output_dir``.

Each (problem, seed) job is stored in ``jobs/`` as it finishes, and a rerun into the same ``output_dir`` runs only
the missing ones, under the same settings (``settings.json``; ``problems``, ``seeds`` and ``output_dir`` only choose
which jobs are made and may change). With step budgets (``train_seconds: inf``, ``large_time_limit: 0``, and
``exact_time_limit`` long enough for HiGHS to prove its sets optimal) a job's numbers are a function of the
settings alone, so a run killed at any point and resumed reports what the uninterrupted one does, but for the
measured ``seconds``; a wall-clock budget makes them depend on the machine's speed.

The jobs run ``workers`` at a time on local processes, or on any ``concurrent.futures.Executor`` passed to
``main(argv, executor=...)`` (a Dask cluster, Ray: docs/cluster.md). Launched on several processes
(``accelerate launch``, ``torchrun``), the main one runs them and the others wait.
"""

import itertools
import statistics
import time
from concurrent.futures import Executor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from trl import TrlParser

from hf_ext._validation import check_finite_fields
from hf_ext.companion.combinatorial.cam import (
    CAMConfig,
    barabasi_albert,
    batch_graphs,
    erdos_renyi,
    initial_model,
    local_search_maxcut,
    local_search_mis,
    rb_graph,
    solve,
    train,
    training_signal_variance,
)
from hf_ext.companion.evaluation.combinatorial.cam import (
    cut_value,
    exact_mis,
    greedy_maxcut,
    greedy_mis,
    iterated_local_search_mis,
    multistart_local_search,
    redumis_mis,
)
from hf_ext.recipes._jobs import (
    check_job_settings,
    check_workers,
    on_main_process,
    run_all,
    stored_or_run,
    workers_field,
)
from hf_ext.recipes._plotting import plot_curves, plot_grouped_bars
from hf_ext.recipes._results import write_results, write_rows
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import run_config, set_per_run, settings_parser, shared_settings

PROBLEMS = ("mis", "maxcut")
# Arguments that choose which jobs are made or where they go, not what a job computes: they may change between
# reruns into the same output_dir (every other setting must not).
NOT_JOB_SETTINGS = ("problems", "seeds", "workers", "output_dir")


@dataclass
class CAMArguments:
    problems: list[str] = field(
        default_factory=lambda: ["mis", "maxcut"], metadata={"help": f"Any of {list(PROBLEMS)}."}
    )
    train_nodes: list[int] = field(
        default_factory=lambda: [100, 200], metadata={"help": "Node range [low, high] of the training graphs."}
    )
    edge_prob: float = field(default=0.15, metadata={"help": "Erdos-Renyi edge probability, in (0, 1]."})
    ba_edges: int = field(default=4, metadata={"help": "Barabasi-Albert edges per new node (>= 1), for max-cut."})
    train_graphs: int = field(default=64, metadata={"help": "Training graphs per problem (>= 1)."})
    eval_graphs: int = field(default=8, metadata={"help": "Held-out graphs per evaluation set (>= 1)."})
    eval_chains: int = field(
        default=32, metadata={"help": "Chains K per graph at evaluation, best of K, for CAM and REINFORCE (>= 1)."}
    )
    transfer_scales: list[float] = field(
        default_factory=lambda: [2.0], metadata={"help": "Evaluate also on graphs this many times larger (>= 1)."}
    )
    exact_nodes: int = field(
        default=100, metadata={"help": "Size of the ER graphs solved exactly by HiGHS (MIS; >= 1)."}
    )
    exact_time_limit: float = field(default=60.0, metadata={"help": "HiGHS time limit per graph, seconds (> 0)."})
    large_nodes: list[int] = field(
        default_factory=list,
        metadata={"help": "MIS only: also evaluate on ER graphs of [low, high] nodes (e.g. [700, 800]); [] skips."},
    )
    large_time_limit: float = field(
        default=0.0,
        metadata={
            "help": "MIS: seconds per large_nodes graph for the strong classical references there, HiGHS "
            "(time-limited), the iterated local search and, with kamis_redumis, KaMIS (>= 0; 0 skips them)."
        },
    )
    kamis_redumis: str = field(
        default="",
        metadata={
            "help": "Path of KaMIS's redumis binary (built from its C++ repository); when set, KaMIS is a third "
            "strong reference on the large_nodes graphs, with large_time_limit seconds each ('' skips it)."
        },
    )
    rb_vars: list[int] = field(
        default_factory=list,
        metadata={"help": "MIS only: also evaluate on RB graphs of [low, high] variables; [] skips."},
    )
    rb_domain: int = field(default=10, metadata={"help": "Values (clique size) per variable of the RB graphs (>= 2)."})
    variance_repeats: int = field(
        default=16, metadata={"help": "Independent rollouts per training-signal variance estimate (>= 2)."}
    )
    seeds: list[int] = field(default_factory=lambda: [0], metadata={"help": "Seeds (graphs, networks, chains)."})
    torch_threads: int = field(default=1, metadata={"help": "torch threads per process (>= 1)."})
    workers: int = workers_field()
    output_dir: str = field(default="outputs/cam", metadata={"help": "Where results go."})

    def __post_init__(self):
        check_finite_fields(self)
        owner = type(self).__name__
        check_workers(owner, self.workers)
        if not self.problems or set(self.problems) - set(PROBLEMS):
            raise ValueError(f"{owner}: `problems` must be a non-empty subset of {list(PROBLEMS)}, got {self.problems}")
        checks = {
            "train_nodes": (
                bool(self.train_nodes) and _range_or_empty(self.train_nodes, 2),
                "[low, high] with 2 <= low <= high",
            ),
            "edge_prob": (0 < self.edge_prob <= 1, "in (0, 1]"),
            "transfer_scales": (all(s >= 1 for s in self.transfer_scales), "a list of numbers >= 1"),
            "large_nodes": (_range_or_empty(self.large_nodes, 2), "[] or [low, high] with 2 <= low <= high"),
            "rb_vars": (_range_or_empty(self.rb_vars, 2), "[] or [low, high] with 2 <= low <= high"),
            "rb_domain": (self.rb_domain >= 2, ">= 2"),
            "variance_repeats": (self.variance_repeats >= 2, ">= 2"),
            "seeds": (bool(self.seeds), "a non-empty list"),
        }
        for name in ("ba_edges", "train_graphs", "eval_graphs", "eval_chains", "exact_nodes", "torch_threads"):
            checks[name] = (getattr(self, name) >= 1, ">= 1")
        checks["exact_time_limit"] = (self.exact_time_limit > 0, "> 0")
        checks["large_time_limit"] = (self.large_time_limit >= 0, ">= 0")
        checks["kamis_redumis"] = (not self.kamis_redumis or Path(self.kamis_redumis).is_file(), "'' or a file")
        for name, (ok, allowed) in checks.items():
            if not ok:
                raise ValueError(f"{owner}: `{name}` must be {allowed}, got {getattr(self, name)!r}")


@dataclass
class CAMSolverConfig(CAMConfig):
    """The solver's settings every run shares; ``problem``, ``method`` and ``seed`` are set for each run."""

    problem: str = set_per_run(CAMConfig, "problem", by="CAMArguments' `problems`")
    method: str = set_per_run(CAMConfig, "method", by="the recipe, which trains both cam and reinforce")
    seed: int = set_per_run(CAMConfig, "seed", by="CAMArguments' `seeds`")


def _range_or_empty(bounds: list[int], least: int) -> bool:
    return not bounds or (len(bounds) == 2 and least <= bounds[0] <= bounds[1])


def parser(argv: list[str] | None = None) -> TrlParser:
    """The parser ``main`` reads its settings with: the recipe's arguments and the solver's :class:`CAMConfig`."""
    return settings_parser(CAMArguments, CAMSolverConfig)


def instances(family: str, low: int, high: int, count: int, args: CAMArguments, seed: int) -> list:
    """``count`` graphs of a family (``er``, ``ba``, ``rb``) with sizes (RB: variables) uniform in [low, high]."""
    sizes = np.random.default_rng(seed).integers(low, high + 1, size=count)
    make = {
        "er": lambda n, s: erdos_renyi(n, args.edge_prob, s),
        "ba": lambda n, s: barabasi_albert(n, args.ba_edges, s),
        "rb": lambda n, s: rb_graph(n, args.rb_domain, s),
    }[family]
    return [make(int(n), seed * 100_003 + i) for i, n in enumerate(sizes)]


def classical(problem: str, starts: int, seed: int) -> dict:
    """Each classical reference as graph -> value: greedy, local search from greedy, and the best local search of
    ``starts`` random starts."""
    if problem == "mis":
        return {
            "greedy": lambda g: float(greedy_mis(g).sum()),
            "local_search": lambda g: float(local_search_mis(g, greedy_mis(g)).sum()),
            "multistart_ls": lambda g: float(multistart_local_search(problem, g, starts, seed).sum()),
        }
    return {
        "greedy": lambda g: cut_value(g, greedy_maxcut(g)),
        "local_search": lambda g: cut_value(g, local_search_maxcut(g, greedy_maxcut(g))),
        "multistart_ls": lambda g: cut_value(g, multistart_local_search(problem, g, starts, seed)),
    }


def evaluate(problem, name, graphs, models, config, args, seed, strong_time_limit: float = 0.0) -> list[dict]:
    """One row per method on one evaluation set: mean value and mean gap to the reference per graph; with
    ``strong_time_limit`` (MIS), also HiGHS, the iterated local search and (with ``kamis_redumis``) KaMIS for that
    many seconds per graph."""
    values, seconds = {}, {}
    batch = batch_graphs(graphs)
    for (method, model), local_search in itertools.product(models.items(), (False, True)):
        label, start = method + "+ls" * local_search, time.perf_counter()
        values[label] = solve(model, problem, batch, config.steps, args.eval_chains, seed, local_search)[0].tolist()
        seconds[label] = time.perf_counter() - start
    solvers = classical(problem, args.eval_chains, seed)
    if strong_time_limit > 0:
        solvers["ils"] = lambda g: float(
            iterated_local_search_mis(g, greedy_mis(g), strong_time_limit, seed=seed).sum()
        )
        solvers["highs"] = lambda g: float(exact_mis(g, strong_time_limit)[0].sum())
        if args.kamis_redumis:
            solvers["kamis"] = lambda g: float(redumis_mis(g, args.kamis_redumis, strong_time_limit, seed).sum())
    for method, solver in solvers.items():
        start = time.perf_counter()
        values[method], seconds[method] = [solver(g) for g in graphs], time.perf_counter() - start
    exact = problem == "mis" and name.startswith("exact")
    if exact:
        start = time.perf_counter()
        solved = [exact_mis(g, args.exact_time_limit) for g in graphs]
        values["exact"], seconds["exact"] = [float(s.sum()) for s, _ in solved], time.perf_counter() - start
        optimal = all(proven for _, proven in solved)
    reference = values["exact"] if exact else [max(v) for v in zip(*values.values(), strict=True)]
    return [
        {
            "seed": seed,
            "problem": problem,
            "eval_set": name,
            "method": method,
            "value": statistics.mean(v),
            "gap_percent": 100 * statistics.mean((r - x) / r for r, x in zip(reference, v, strict=True) if r > 0),
            "reference": "exact" if exact and optimal else ("exact_time_limited" if exact else "best_found"),
            "seconds": seconds[method],
        }
        for method, v in values.items()
    ]


def run_job(problem: str, seed: int, config: CAMSolverConfig, args: CAMArguments) -> dict:
    def solver(method: str) -> CAMConfig:
        return run_config(CAMConfig, config, problem=problem, method=method, seed=seed)

    low, high = args.train_nodes
    family = "er" if problem == "mis" else "ba"
    train_set = instances(family, low, high, args.train_graphs, args, seed)
    models, curves, diagnostics = {}, {}, {}
    for method in ("cam", "reinforce"):
        models[method], history = train(solver(method), train_set, progress=False)
        curves[method] = [(h["step"], h["energy_per_node"]) for h in history]
        diagnostics[method] = final_diagnostics(history)
    initial = initial_model(solver("cam"))
    probe = train_set[: config.graphs_per_step]
    variance = {
        f"{method}@{at}": training_signal_variance(weights, solver(method), probe, args.variance_repeats)
        for at, weights in (("init", initial), ("cam_trained", models["cam"]))
        for method in ("cam", "reinforce")
    }
    sets = {f"{family}{low}-{high}": (family, low, high)}
    sets |= {
        f"{family}{round(low * s)}-{round(high * s)}": (family, round(low * s), round(high * s))
        for s in args.transfer_scales
    }
    large = "er{}-{}".format(*args.large_nodes) if problem == "mis" and args.large_nodes else None
    if problem == "mis":
        sets[f"exact_er{args.exact_nodes}"] = ("er", args.exact_nodes, args.exact_nodes)
        if large:
            sets[large] = ("er", *args.large_nodes)
        if args.rb_vars:
            sets["exact_rb{}-{}x{}".format(*args.rb_vars, args.rb_domain)] = ("rb", *args.rb_vars)
    rows = []
    for i, (name, (graph_family, lo, hi)) in enumerate(sets.items()):
        graphs = instances(graph_family, lo, hi, args.eval_graphs, args, 10_000 + 97 * seed + i)
        rows += evaluate(problem, name, graphs, models, config, args, seed, args.large_time_limit * (name == large))
    return {
        "rows": rows,
        "variance": {"seed": seed, "problem": problem} | variance,
        "curves": {"seed": seed, "problem": problem} | curves,
        "diagnostics": {"seed": seed, "problem": problem} | diagnostics,
    }


def final_diagnostics(history: list[dict], fraction: float = 0.1) -> dict:
    """The rollouts' :func:`chain_diagnostics` at the end of training: their mean over the last ``fraction`` of the
    steps (per-step lists element by element)."""
    window = history[-max(1, round(fraction * len(history))) :]
    return {key: np.mean([h[key] for h in window], axis=0).tolist() for key in window[0] if key not in ("step", "loss")}


def summarize(rows: list[dict]) -> dict:
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(f"{row['problem']}/{row['eval_set']}/{row['method']}", []).append(row)
    return {
        key: {
            "value_mean": statistics.mean(r["value"] for r in group),
            "value_std": statistics.pstdev(r["value"] for r in group),
            "gap_percent_mean": statistics.mean(r["gap_percent"] for r in group),
            "gap_percent_std": statistics.pstdev(r["gap_percent"] for r in group),
            "seeds": len(group),
        }
        for key, group in groups.items()
    }


def job_settings(args: CAMArguments, config: CAMSolverConfig) -> dict:
    """What decides a job's numbers: every setting but ``NOT_JOB_SETTINGS`` (stored, and checked on a rerun)."""
    return {k: v for k, v in asdict(args).items() if k not in NOT_JOB_SETTINGS} | shared_settings(config)


@on_main_process
def main(argv: list[str] | None = None, executor: Executor | None = None) -> dict:
    """The recipe; its jobs run on ``executor`` when given (a Dask or Ray executor), else as ``workers`` says."""
    args, config = parser(argv).parse_args_and_config(argv)
    torch.set_num_threads(args.torch_threads)
    out = Path(args.output_dir)
    check_job_settings(out, job_settings(args, config), "cam")
    jobs = [(out, f"{p}_seed_{s}", run_job, p, s, config, args) for s in args.seeds for p in args.problems]
    done = run_all(stored_or_run, jobs, args.workers, "cam", executor, threads=args.torch_threads, unit="job")
    rows = [row for job in done for row in job["rows"]]
    results = {
        "summary": summarize(rows),
        "rows": rows,
        "signal_variance": [job["variance"] for job in done],
        "training_curves": [job["curves"] for job in done],
        "chain_diagnostics": [job["diagnostics"] for job in done],
        "args": asdict(args),
        "config": shared_settings(config),
    }
    write_results(out, results)
    write_rows(out / "runs.csv", rows)
    gaps: dict[str, dict[str, float]] = {}
    for key, entry in results["summary"].items():
        problem, eval_set, method = key.split("/")
        gaps.setdefault(method, {})[f"{problem}/{eval_set}"] = entry["gap_percent_mean"]
        print(
            f"{key}: value {entry['value_mean']:.2f} +- {entry['value_std']:.2f}, gap {entry['gap_percent_mean']:.2f}%"
        )
    plot_grouped_bars(
        gaps, out / "cam_gap.png", "gap to the reference (exact on exact_er*, else best found)", "gap (%)"
    )
    first = done[0]["curves"]
    plot_curves(
        {m: first[m] for m in ("cam", "reinforce")},
        out / "cam_training.png",
        f"{first['problem']}, seed {first['seed']}: rollout energy per node",
        "energy per node",
    )
    return results


if __name__ == "__main__":
    run_as_script(main)
