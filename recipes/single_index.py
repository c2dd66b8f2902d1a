"""Single-index models: overlap trajectories of joint learning per information exponent, dimension and sample size.

    hf-ext run single_index                                       # shipped config, ~10 min on 2 busy CPU cores
    hf-ext run single_index links="he2 he3" dims="64 128"
    hf-ext run single_index --config single_index_quick           # seconds: the end-to-end check

For every link (Hermite polynomials of information exponent 1 to 4, and mixtures), dimension ``d``,
sample size ``n = ratio * d``, starting direction (random, or at a given overlap ``<w0, w*>``, negative
included) and seed, the recipe draws ``x ~ N(0, I_d)``, ``y = phi*(<w*, x>) + noise`` and fits
:class:`hf_ext.companion.single_index.SingleIndexRegressor` three ways from the same start: ``joint``
(direction and link learned), ``oracle`` (the true link, only the direction learned) and ``relu_link``
(the direction learned under a fixed standardised ReLU, a single neuron's activation). At the dimensions
of ``baseline_dims`` it also trains the structure-free regressors a user would reach for: ``two_layer_sgd``, a
two-layer ReLU network by mini-batch SGD at equal compute (``max_iter`` passes over the data, as many
per-sample gradients as ``max_iter`` full-batch steps), and ``gradient_boosting``, scikit-learn's
``HistGradientBoostingRegressor`` with its defaults.
It records the overlap ``m_t = <w_t, w*>`` at every iteration, the iterations until ``|m_t| >= 0.9`` and
the test mean squared error on fresh data. ``(w, phi)`` and ``(-w, phi(-.))`` are the same predictor, so a
joint fit from a negative start may end at ``m = -1``: ``|m|`` is what is identified. The runs go ``workers``
at a time to local processes, or to any ``concurrent.futures.Executor`` passed to ``main(argv, executor=...)``
(Dask, Ray: docs/cluster.md); launched on several processes, the main one runs them and the others wait.

Writes ``runs.csv`` (one row per run), ``results.json`` (the rows, every trajectory and a summary per
link, dimension, ratio, start and method), ``single_index_overlap.png`` (``|m_t|`` of joint learning per
link and start, one curve per dimension) and ``single_index_time_to_overlap.png`` (iterations to
``|m| >= 0.9`` against ``d``, log-log) to ``output_dir``.
"""

import dataclasses
import math
import statistics
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from sklearn.ensemble import HistGradientBoostingRegressor
from trl import TrlParser

from hf_ext._validation import check_finite_fields
from hf_ext.companion.evaluation.single_index import fit_two_layer_network
from hf_ext.companion.single_index import (
    LINKS,
    SingleIndexRegressor,
    direction_with_overlap,
    gaussian_single_index,
    information_exponent,
    link_coefficients,
)
from hf_ext.recipes._jobs import check_workers, on_main_process, run_all, workers_field
from hf_ext.recipes._plotting import plot_bands, plot_log_sweeps
from hf_ext.recipes._results import write_results, write_rows
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import estimator_field, settings_parser

METHODS = ("joint", "oracle", "relu_link", "two_layer_sgd", "gradient_boosting")
STRUCTURE_FREE = ("two_layer_sgd", "gradient_boosting")  # no direction, no start: once per data set
THRESHOLD = 0.9


@dataclass
class SingleIndexArguments:
    links: list[str] = field(
        default_factory=lambda: ["he1", "he2", "he3", "he4", "he2+he3"],
        metadata={"help": f"Target links, any of {list(LINKS)} (hN: the N-th normalised Hermite polynomial)."},
    )
    dims: list[int] = field(default_factory=lambda: [32, 64, 128, 256, 512], metadata={"help": "Dimensions d."})
    sample_ratios: list[float] = field(
        default_factory=lambda: [8.0, 32.0], metadata={"help": "Training sample sizes as n = ratio * d (ratio >= 1)."}
    )
    init_overlaps: list[float] = field(
        default_factory=lambda: [-0.3, 0.0],
        metadata={"help": "Starting overlaps <w0, w*> in [-1, 1], besides the random start (overlap ~ d^-1/2)."},
    )
    random_init: bool = field(default=True, metadata={"help": "Also start from a uniformly random direction."})
    methods: list[str] = field(default_factory=lambda: list(METHODS), metadata={"help": f"Any of {list(METHODS)}."})
    seeds: list[int] = field(default_factory=lambda: [0, 1], metadata={"help": "Seeds: w*, the data and the start."})
    noise: float = field(default=0.1, metadata={"help": "Standard deviation of the label noise (>= 0)."})
    max_iter: int = estimator_field(SingleIndexRegressor, "max_iter")
    learning_rate: float = estimator_field(SingleIndexRegressor, "learning_rate")
    link_step: float = estimator_field(SingleIndexRegressor, "link_step")
    max_degree: int = estimator_field(SingleIndexRegressor, "max_degree")
    baseline_dims: list[int] = field(
        default_factory=lambda: [128],
        metadata={"help": "Dimensions (of `dims`) where the two-layer network and gradient boosting run."},
    )
    net_width: int = field(default=64, metadata={"help": "Hidden ReLU units of the two-layer network."})
    net_lr: float = field(default=0.05, metadata={"help": "SGD step of the two-layer network."})
    net_batch_size: int = field(default=64, metadata={"help": "Mini-batch of the two-layer network."})
    n_test: int = field(default=4000, metadata={"help": "Fresh test samples per data set."})
    torch_threads: int = field(
        default=1, metadata={"help": "torch threads per process (>= 1): fits this small ran 10x slower on 2 than on 1."}
    )
    workers: int = workers_field()
    output_dir: str = field(default="outputs/single_index", metadata={"help": "Where results go."})

    def __post_init__(self):
        check_finite_fields(self)
        owner = type(self).__name__
        check_workers(owner, self.workers)
        for name, allowed in (("links", LINKS), ("methods", METHODS)):
            chosen = getattr(self, name)
            if not chosen or set(chosen) - set(allowed):
                raise ValueError(f"{owner}: `{name}` must be a non-empty subset of {list(allowed)}, got {chosen}")
        checks = {
            "dims": (bool(self.dims) and min(self.dims) >= 1, "a non-empty list of integers >= 1"),
            "sample_ratios": (bool(self.sample_ratios) and min(self.sample_ratios) >= 1, "a non-empty list of >= 1"),
            "init_overlaps": (all(-1 <= m <= 1 for m in self.init_overlaps), "overlaps in [-1, 1]"),
            "seeds": (bool(self.seeds), "a non-empty list"),
            "noise": (self.noise >= 0, ">= 0"),
            "baseline_dims": (set(self.baseline_dims) <= set(self.dims), "a subset of `dims`"),
        }
        for name in ("torch_threads", "net_width", "net_batch_size", "n_test", "net_lr"):
            checks[name] = (getattr(self, name) > 0, "> 0")
        for name, (ok, allowed) in checks.items():
            if not ok:
                raise ValueError(f"{owner}: `{name}` must be {allowed}, got {getattr(self, name)!r}")
        if not self.init_overlaps and not self.random_init:
            raise ValueError(f"{owner}: give `init_overlaps` or set `random_init`: there is no start to run from")
        # the estimator's own checks of its settings (scikit-learn's convention keeps them out of __init__, in fit)
        self.regressor(fixed_link=None, random_state=0)._check_params()

    def regressor(self, fixed_link, random_state: int) -> SingleIndexRegressor:
        """The estimator with these settings, learning the direction under ``fixed_link`` (None: the link too)."""
        return SingleIndexRegressor(
            max_degree=self.max_degree,
            learning_rate=self.learning_rate,
            link_step=self.link_step,
            max_iter=self.max_iter,
            fixed_link=fixed_link,
            random_state=random_state,
        )

    def starts(self) -> list[str]:
        """The starting directions: ``"random"`` and each overlap of ``init_overlaps``, as text."""
        return (["random"] if self.random_init else []) + [f"{m:g}" for m in self.init_overlaps]


def parser(argv: list[str] | None = None) -> TrlParser:
    """The parser ``main`` reads its settings with (the same for every ``argv``)."""
    return settings_parser(SingleIndexArguments)


def jobs(args: SingleIndexArguments) -> list[tuple]:
    """(link, d, ratio, start, method, seed) of every run; the structure-free baselines run once per data set."""
    data = [
        (link, d, r, seed) for link in args.links for d in args.dims for r in args.sample_ratios for seed in args.seeds
    ]
    found = []
    for link, d, ratio, seed in data:
        found += [(link, d, ratio, s, m, seed) for s in args.starts() for m in args.methods if m not in STRUCTURE_FREE]
        if d in args.baseline_dims:
            found += [(link, d, ratio, "-", m, seed) for m in args.methods if m in STRUCTURE_FREE]
    return found


def iterations_to(overlaps, threshold: float = THRESHOLD) -> float:
    """The first iteration with ``|m_t| >= threshold`` (``inf`` if never)."""
    return next((float(t) for t, m in enumerate(overlaps) if abs(m) >= threshold), math.inf)


def run_one(link: str, d: int, ratio: float, start: str, method: str, seed: int, args: SingleIndexArguments) -> dict:
    """One fit; returns its row (with the overlap trajectory under ``"overlaps"``)."""
    n = math.ceil(ratio * d)
    X, y, w_star = gaussian_single_index(n, d, link, args.noise, seed)
    X_test, y_test, _ = gaussian_single_index(args.n_test, d, link, args.noise, seed + 10_000, w_star=w_star)
    began = time.perf_counter()
    overlaps = []
    if method == "two_layer_sgd":
        predict = fit_two_layer_network(
            X, y, width=args.net_width, epochs=args.max_iter, batch_size=args.net_batch_size, lr=args.net_lr, seed=seed
        )
    elif method == "gradient_boosting":
        predict = HistGradientBoostingRegressor(random_state=seed).fit(X, y).predict
    else:
        fixed = {"joint": None, "oracle": link_coefficients(link, 4), "relu_link": link_coefficients("relu", 6)}
        model = args.regressor(fixed[method], seed)
        w_init = None if start == "random" else direction_with_overlap(w_star, float(start), seed + 1)
        model.fit(X, y, w_init=w_init, w_star=w_star)
        predict, overlaps = model.predict, model.overlap_history_.tolist()
    seconds = time.perf_counter() - began
    return {
        "link": link,
        "exponent": information_exponent(link_coefficients(link, 4)),
        "d": d,
        "n": n,
        "start": start,
        "method": method,
        "seed": seed,
        "final_overlap": overlaps[-1] if overlaps else math.nan,
        "final_abs_overlap": abs(overlaps[-1]) if overlaps else math.nan,
        "iterations_to_0.9": iterations_to(overlaps) if overlaps else math.nan,
        "test_mse": float(np.mean((predict(X_test) - y_test) ** 2)),
        "seconds": seconds,
        "overlaps": overlaps,
    }


def summarize(rows: list[dict]) -> dict:
    """Per (link, d, n, start, method): mean and std over seeds of |m_T|, iterations to 0.9 and test MSE."""
    groups = {}
    for row in rows:
        key = f"{row['link']}/d={row['d']}/n={row['n']}/start={row['start']}/{row['method']}"
        groups.setdefault(key, []).append(row)
    summary = {}
    for key, group in groups.items():
        entry = {"runs": len(group)}
        for name in ("final_abs_overlap", "iterations_to_0.9", "test_mse", "seconds"):
            values = [r[name] for r in group]
            if all(math.isnan(v) for v in values):  # the network has no direction
                continue
            finite = [v for v in values if math.isfinite(v)]
            entry[f"{name}_mean"] = statistics.fmean(values) if len(finite) == len(values) else math.inf
            entry[f"{name}_std"] = statistics.stdev(values) if len(finite) == len(values) > 1 else 0.0
            entry[f"{name}_reached"] = len(finite)
        summary[key] = entry
    return summary


def _padded(overlaps: list[float], length: int) -> list[float]:
    """``|m_t|`` over ``length`` iterations; a fit that stopped early (tol) keeps its last value."""
    values = [abs(m) for m in overlaps]
    return values + values[-1:] * (length - len(values))


def plot(rows: list[dict], args: SingleIndexArguments, out: Path) -> None:
    """Joint learning's |m_t| per link and start (one curve per d, largest sample ratio), and iterations to 0.9 vs d
    (not drawn when no run reached 0.9)."""
    ratio = max(args.sample_ratios)
    joint = {
        (r["link"], r["start"], r["d"], r["seed"]): r
        for r in rows
        if r["method"] == "joint" and r["n"] == math.ceil(ratio * r["d"])
    }
    length = args.max_iter + 1
    panels = {
        f"{link}, start {start}": {
            f"d={d}": [_padded(joint[link, start, d, seed]["overlaps"], length) for seed in args.seeds]
            for d in args.dims
        }
        for link in args.links
        for start in args.starts()
    }
    plot_bands(
        panels,
        out / "single_index_overlap.png",
        f"Joint learning: |<w_t, w*>| per iteration, n = {ratio:g} d, mean +- std over {len(args.seeds)} seed(s)",
        "iteration",
        "|overlap|",
        ncols=len(args.starts()),
    )
    sweeps = {
        f"start {start}": {
            link: [[joint[link, start, d, seed]["iterations_to_0.9"] for d in args.dims] for seed in args.seeds]
            for link in args.links
        }
        for start in args.starts()
    }
    if not any(math.isfinite(r["iterations_to_0.9"]) for r in joint.values()):
        return  # nothing reached the threshold: a log axis of no points cannot be drawn
    plot_log_sweeps(
        sweeps,
        args.dims,
        out / "single_index_time_to_overlap.png",
        f"Joint learning: iterations to |overlap| >= {THRESHOLD}, n = {ratio:g} d (never reached: not drawn)",
        "dimension d",
        {panel: "iterations" for panel in sweeps},
        ncols=len(sweeps),
    )


def _line(entry: dict) -> str:
    overlap = ""
    if "final_abs_overlap_mean" in entry:
        reached = f"{entry['iterations_to_0.9_reached']}/{entry['runs']}"
        overlap = (
            f"|m| {entry['final_abs_overlap_mean']:.3f}, iterations to {THRESHOLD} "
            f"{entry['iterations_to_0.9_mean']:.0f} ({reached} reached), "
        )
    return f"{overlap}test MSE {entry['test_mse_mean']:.4f}"


@on_main_process
def main(argv: list[str] | None = None, executor: Executor | None = None) -> dict:
    """The recipe; its fits run on ``executor`` when given (a Dask or Ray executor), else as ``workers`` says."""
    (args,) = parser(argv).parse_args_and_config(argv)
    # No TrainingArguments here to set up CPU processes: without a GPU, ask for them (gloo) directly,
    torch.set_num_threads(args.torch_threads)
    fits = [(*job, args) for job in jobs(args)]
    rows = run_all(run_one, fits, args.workers, "single_index", executor, threads=args.torch_threads, unit="fit")
    results = {"summary": summarize(rows), "runs": rows, "args": dataclasses.asdict(args)}
    out = Path(args.output_dir)
    write_results(out, results)
    write_rows(out / "runs.csv", rows, [k for k in rows[0] if k != "overlaps"])
    if "joint" in args.methods:
        plot(rows, args, out)
    for key, entry in results["summary"].items():
        print(f"{key}: {_line(entry)}")
    # Leave together: a rank that exits while another still holds the gloo group can abort.
    return results


if __name__ == "__main__":
    run_as_script(main)
