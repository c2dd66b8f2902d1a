"""Step-size sensitivity sweep: SGD, SGD+momentum, AdamW, SPS, NGN, NGN-M over a log grid of step sizes.

    hf-ext run stepsize_sensitivity                                    # shipped config, ~15 min on 2 busy CPU cores
    hf-ext run stepsize_sensitivity problems="digits_mlp" seeds="0"
    hf-ext run stepsize_sensitivity --config stepsize_sensitivity_quick  # seconds: the end-to-end check

Every method runs at every step size of the grid (``lr`` of SGD/AdamW, the cap ``gamma_b`` of
SPS, ``sigma`` of NGN) from the same initialisation and the same mini-batches per seed, on
(a) convex problems: L2-regularised logistic regression on scikit-learn's breast-cancer and
digits data (standardised features), whose optimum ``f*`` is found by L-BFGS in float64; (b)
non-convex ones: an MLP on digits and a small Llama pretrained from scratch on standard-library
source. The final training loss (full data set; 64 fixed blocks for the LM) is compared: the
suboptimality ``f - f*`` on the convex problems, the loss on the others. Per method and problem
the recipe reports the width in decades of the step-size range within 10% of the method's best
(:func:`hf_ext.optim.near_best_width`), the ratio at 10x the best step size, and the median
seconds per step over SGD's: of the runs themselves, or with ``timing_rounds`` > 0 of every
method's step on a fixed batch timed in interleaved rounds, so that a change in the machine's load
reaches every method alike. Runs that diverge count as infinite loss. The runs go ``workers`` at
a time to local processes (one torch thread each), or to any ``concurrent.futures.Executor`` passed
to ``main(argv, executor=...)`` (Dask, Ray: docs/cluster.md); launched on several processes, the
main one runs them and the others wait.

Writes ``runs.csv`` (one row per run), ``results.json`` (per problem and method: the curve and
the numbers above) and ``stepsize_sensitivity.png`` (final loss against step size, one panel per
problem) to ``output_dir``.
"""

import dataclasses
import math
import statistics
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path

import torch
from sklearn.datasets import load_breast_cancer, load_digits
from torch import nn
from torch.nn import functional as F
from trl import TrlParser

from hf_ext._validation import check_finite_fields
from hf_ext.data import stdlib_bpe_tokenizer, stdlib_corpus
from hf_ext.models import llama_from_scratch
from hf_ext.optim import near_best_width, ratio_at_multiple, reference_optimum
from hf_ext.recipes._jobs import check_workers, on_main_process, run_all, workers_field
from hf_ext.recipes._optimizers import build_optimizer
from hf_ext.recipes._plotting import plot_log_sweeps
from hf_ext.recipes._results import write_results, write_rows
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import settings_parser

METHODS = ("sgd", "sgd_momentum", "adamw", "sps", "ngn", "ngn_m")
PROBLEMS = ("breast_cancer_logreg", "digits_logreg", "digits_mlp", "llama_lm")
LM_EVAL_BLOCKS = 64


@dataclass
class StepSizeSensitivityArguments:
    methods: list[str] = field(default_factory=lambda: list(METHODS), metadata={"help": f"Any of {list(METHODS)}."})
    problems: list[str] = field(default_factory=lambda: list(PROBLEMS), metadata={"help": f"Any of {list(PROBLEMS)}."})
    seeds: list[int] = field(
        default_factory=lambda: [0, 1, 2], metadata={"help": "Seeds: initialisation and mini-batch order."}
    )
    step_size_min: float = field(default=1e-4, metadata={"help": "Smallest step size of the log grid."})
    step_size_max: float = field(default=1e2, metadata={"help": "Largest step size of the log grid."})
    num_step_sizes: int = field(default=13, metadata={"help": "Step sizes in the log grid (ends included)."})
    steps: int = field(default=300, metadata={"help": "Steps per run on the scikit-learn problems."})
    batch_size: int = field(default=32, metadata={"help": "Mini-batch size on the scikit-learn problems."})
    l2: float = field(default=1e-3, metadata={"help": "L2 coefficient of the logistic regressions (l2/2 ||w||^2)."})
    mlp_hidden_size: int = field(default=64, metadata={"help": "Hidden units of the digits MLP (one ReLU layer)."})
    lm_steps: int = field(default=100, metadata={"help": "Steps per run on the language model."})
    lm_batch_size: int = field(default=8, metadata={"help": "Blocks per language-model step."})
    lm_block_size: int = field(default=64, metadata={"help": "Tokens per block."})
    lm_hidden_size: int = field(default=32, metadata={"help": "Width of the Llama (MLP 4x)."})
    lm_layers: int = field(default=2, metadata={"help": "Decoder layers of the Llama."})
    lm_vocab_size: int = field(default=512, metadata={"help": "BPE vocabulary trained on standard-library source."})
    lm_corpus_files: int = field(default=30, metadata={"help": "Standard-library files in the corpus."})
    momentum: float = field(default=0.9, metadata={"help": "Momentum of SGD+momentum and NGN-M."})
    sps_c: float = field(default=0.5, metadata={"help": "SPS's constant c."})
    tolerance: float = field(default=0.1, metadata={"help": "Near best: within this fraction of the best value."})
    timing_rounds: int = field(
        default=0,
        metadata={
            "help": "Interleaved rounds timing every method's step (step size 1e-3, a fixed batch) for the step "
            "times over SGD's; 0 = the sweep's own median step times (noisier on a loaded machine)."
        },
    )
    timing_steps: int = field(default=50, metadata={"help": "Timed steps per method and round (after 3 untimed)."})
    workers: int = workers_field()
    output_dir: str = field(default="outputs/stepsize_sensitivity", metadata={"help": "Where results go."})

    def __post_init__(self):
        check_finite_fields(self)
        check_workers(type(self).__name__, self.workers)
        for name, allowed in (("methods", METHODS), ("problems", PROBLEMS)):
            chosen = getattr(self, name)
            if not chosen or set(chosen) - set(allowed):
                raise ValueError(f"`{name}` must be a non-empty subset of {list(allowed)}, got {chosen}")
        if not 0 < self.step_size_min < self.step_size_max:
            raise ValueError(
                f"`step_size_min` and `step_size_max` must satisfy 0 < min < max, got "
                f"{self.step_size_min} and {self.step_size_max}"
            )
        positive = ("num_step_sizes", "steps", "batch_size", "lm_steps", "lm_batch_size", "sps_c", "tolerance")
        positive += ("timing_steps",)
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"`{name}` must be > 0, got {getattr(self, name)}")
        if not 0 <= self.momentum < 1:
            raise ValueError(f"`momentum` must be in [0, 1), got {self.momentum}")
        if self.timing_rounds < 0:
            raise ValueError(f"`timing_rounds` must be >= 0 (0 = no separate timing), got {self.timing_rounds}")

    def grid(self) -> list[float]:
        """The step sizes: ``num_step_sizes`` points evenly spaced in log scale from min to max."""
        low, high = math.log10(self.step_size_min), math.log10(self.step_size_max)
        count = self.num_step_sizes
        return [10 ** (low + (high - low) * i / max(1, count - 1)) for i in range(count)]


def parser(argv: list[str] | None = None) -> TrlParser:
    """The parser ``main`` reads its settings with (the same for every ``argv``)."""
    return settings_parser(StepSizeSensitivityArguments)


@dataclass
class Problem:
    """A training problem: ``loss(model, index)`` on rows of ``inputs``, ``full_loss`` on the fixed evaluation rows."""

    name: str
    convex: bool
    inputs: torch.Tensor
    loss: Callable[[nn.Module, torch.Tensor], torch.Tensor]
    build: Callable[[int], nn.Module]
    steps: int
    batch_size: int
    eval_rows: int

    @torch.no_grad()
    def full_loss(self, model: nn.Module) -> float:
        index = torch.arange(self.eval_rows)
        value = sum(self.loss(model, chunk).item() * len(chunk) for chunk in index.split(256)) / self.eval_rows
        return value if math.isfinite(value) else math.inf


def _standardised(features) -> torch.Tensor:
    x = torch.tensor(features, dtype=torch.float32)
    return (x - x.mean(0)) / x.std(0).clamp_min(1e-6)


def _classification(name, data, model_fn, args, convex: bool) -> Problem:
    x, y = _standardised(data.data), torch.tensor(data.target)
    l2 = args.l2 if convex else 0.0

    def loss(model, index):
        model_dtype = next(model.parameters()).dtype
        value = F.cross_entropy(model(x[index].to(model_dtype)), y[index])
        return value + l2 / 2 * sum(p.square().sum() for p in model.parameters()) if l2 else value

    def build(seed):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return model_fn(x.shape[1], int(y.max()) + 1)

    return Problem(name, convex, x, loss, build, args.steps, args.batch_size, len(x))


def _logistic(features: int, classes: int) -> nn.Module:
    model = nn.Linear(features, classes)
    nn.init.zeros_(model.weight)
    nn.init.zeros_(model.bias)
    return model


def _language_model(args) -> Problem:
    tokenizer = stdlib_bpe_tokenizer(args.lm_vocab_size)
    corpus = stdlib_corpus(tokenizer, args.lm_block_size, max_files=args.lm_corpus_files, seed=0)
    blocks = torch.tensor(corpus["train"]["input_ids"])

    def loss(model, index):
        return model(input_ids=blocks[index], labels=blocks[index]).loss

    def build(seed):
        return llama_from_scratch(
            tokenizer, args.lm_hidden_size, args.lm_layers, num_heads=2, max_positions=args.lm_block_size, seed=seed
        )

    return Problem("llama_lm", False, blocks, loss, build, args.lm_steps, args.lm_batch_size, LM_EVAL_BLOCKS)


def build_problem(name: str, args: StepSizeSensitivityArguments) -> Problem:
    if name == "llama_lm":
        return _language_model(args)
    if name == "breast_cancer_logreg":
        return _classification(name, load_breast_cancer(), _logistic, args, convex=True)
    if name == "digits_logreg":
        return _classification(name, load_digits(), _logistic, args, convex=True)

    def mlp(features, classes):
        return nn.Sequential(
            nn.Linear(features, args.mlp_hidden_size), nn.ReLU(), nn.Linear(args.mlp_hidden_size, classes)
        )

    return _classification(name, load_digits(), mlp, args, convex=False)


_BUILT: dict[tuple[str, str], Problem] = {}


def problem_named(name: str, args: StepSizeSensitivityArguments) -> Problem:
    """``build_problem(name, args)``, built once per process: a Problem holds closures, so jobs carry its name."""
    key = (name, repr(args))
    if key not in _BUILT:
        _BUILT[key] = build_problem(name, args)
    return _BUILT[key]


def run_named(name: str, method: str, step_size: float, seed: int, args: StepSizeSensitivityArguments) -> dict:
    """:func:`run_one` on the problem ``name`` (a job that any executor's worker can run)."""
    return run_one(problem_named(name, args), method, step_size, seed, args)


def optimum(problem: Problem) -> float:
    """The convex problem's minimum ``f*``: its loss at the L-BFGS reference optimum, from the zero start."""
    every_row = torch.arange(len(problem.inputs))
    return problem.full_loss(reference_optimum(problem.build(0), lambda model: problem.loss(model, every_row)))


def method_optimizer(method: str, model: nn.Module, step_size: float, args: StepSizeSensitivityArguments):
    """``method`` at ``step_size`` with this sweep's momentum and SPS constant."""
    return build_optimizer(method, model, step_size, momentum=args.momentum, sps_c=args.sps_c)


def run_one(problem: Problem, method: str, step_size: float, seed: int, args) -> dict:
    """One training run; the final loss is ``inf`` once the training loss stops being finite."""
    model = problem.build(seed)
    optimizer = method_optimizer(method, model, step_size, args)
    generator = torch.Generator().manual_seed(seed)
    seconds, diverged = [], False
    for _ in range(problem.steps):
        index = torch.randint(len(problem.inputs), (problem.batch_size,), generator=generator)

        def closure(index=index):
            optimizer.zero_grad()
            loss = problem.loss(model, index)
            loss.backward()
            return loss

        start = time.perf_counter()
        try:
            loss = optimizer.step(closure)
        except FloatingPointError:  # SPS and NGN refuse a non-finite loss before touching the weights
            diverged = True
            break
        seconds.append(time.perf_counter() - start)
        if not math.isfinite(loss.item()):
            diverged = True
            break
    return {
        "problem": problem.name,
        "method": method,
        "step_size": step_size,
        "seed": seed,
        "final_loss": math.inf if diverged else problem.full_loss(model),
        "seconds_per_step": statistics.median(seconds) if seconds else math.nan,
    }


def _fixed_batch_step(problem: Problem, method: str, args: StepSizeSensitivityArguments) -> Callable[[], object]:
    """One training step (forward, backward, optimizer) of ``method`` at step size 1e-3 on a fixed batch."""
    model = problem.build(0)
    optimizer = method_optimizer(method, model, 1e-3, args)
    index = torch.arange(problem.batch_size)

    def closure():
        optimizer.zero_grad()
        loss = problem.loss(model, index)
        loss.backward()
        return loss

    return lambda: optimizer.step(closure)


def interleaved_step_seconds(problem: Problem, args: StepSizeSensitivityArguments) -> dict[str, float]:
    """Each method's median seconds per step over ``timing_rounds`` rounds, every method timed in each round."""
    steps = {method: _fixed_batch_step(problem, method, args) for method in args.methods}
    samples: dict[str, list[float]] = {method: [] for method in steps}
    for _ in range(args.timing_rounds):
        for method, step in steps.items():
            for _ in range(3):
                step()
            times = []
            for _ in range(args.timing_steps):
                start = time.perf_counter()
                step()
                times.append(time.perf_counter() - start)
            samples[method].append(statistics.median(times))
    return {method: statistics.median(values) for method, values in samples.items()}


def summarize(
    rows: list[dict],
    optima: dict[str, float],
    args: StepSizeSensitivityArguments,
    timed: dict[str, dict[str, float]] | None = None,
) -> dict:
    """Per problem and method: the compared values per step size (per seed and their mean) and the sensitivity numbers.

    The values are the final loss, minus the optimum on a convex problem; the width and the 10x ratio read the
    mean over seeds, and the width is also given per seed (its spread). The seconds per step are ``timed``'s
    (problem -> method -> seconds, :func:`interleaved_step_seconds`) when given, else the runs' medians.
    """
    grid = args.grid()
    summary = {}
    for problem in args.problems:
        runs = [r for r in rows if r["problem"] == problem]
        seconds = (timed or {}).get(problem) or {
            method: statistics.median(
                r["seconds_per_step"] for r in runs if r["method"] == method and math.isfinite(r["seconds_per_step"])
            )
            for method in args.methods
        }
        for method in args.methods:
            final = {(r["seed"], r["step_size"]): r["final_loss"] for r in runs if r["method"] == method}
            per_seed = [[final[seed, s] - optima.get(problem, 0.0) for s in grid] for seed in args.seeds]
            values = [statistics.fmean(column) for column in zip(*per_seed, strict=True)]
            width, censored = near_best_width(grid, values, args.tolerance)
            finite = [v for v in values if math.isfinite(v)]
            summary[f"{problem}/{method}"] = {
                "convex": problem in optima,
                "values": values,
                "per_seed_values": per_seed,
                "best_step_size": grid[values.index(min(finite))] if finite else None,
                "best_value": min(finite) if finite else None,
                "width_decades": width,
                "width_decades_per_seed": [near_best_width(grid, curve, args.tolerance)[0] for curve in per_seed],
                "width_reaches_grid_end": censored,
                "ratio_at_10x_best": ratio_at_multiple(grid, values),
                "seconds_per_step": seconds[method],
                "step_time_vs_sgd": seconds[method] / seconds["sgd"] if "sgd" in seconds else None,
            }
    return summary


def plot(summary: dict, args: StepSizeSensitivityArguments, path: Path):
    """Final loss (convex: minus the optimum) against step size, one panel per problem, mean +- std over seeds."""
    panels = {p: {m: summary[f"{p}/{m}"]["per_seed_values"] for m in args.methods} for p in args.problems}
    ylabels = {
        p: "final loss - optimum" if summary[f"{p}/{args.methods[0]}"]["convex"] else "final training loss"
        for p in args.problems
    }
    title = f"Final loss vs step size, mean +- std over {len(args.seeds)} seed(s); diverged points not drawn"
    return plot_log_sweeps(panels, args.grid(), path, title, "step size (lr, gamma_b, sigma)", ylabels)


def _line(entry: dict) -> str:
    ratio, time_ratio, best = entry["ratio_at_10x_best"], entry["step_time_vs_sgd"], entry["best_step_size"]
    width = f"{entry['width_decades']:.2f} decades{'+' if entry['width_reaches_grid_end'] else ''}"
    best = "none (all diverged)" if best is None else f"{best:.3g}"
    ratio = "off grid" if ratio is None else f"{ratio:.3g}"
    time_ratio = "-" if time_ratio is None else f"{time_ratio:.3f}"
    return f"width {width}, best step size {best}, 10x-best ratio {ratio}, step time vs SGD {time_ratio}"


@on_main_process
def main(argv: list[str] | None = None, executor: Executor | None = None) -> dict:
    """The recipe; its runs go to ``executor`` when given (a Dask or Ray executor), else as ``workers`` says."""
    (args,) = parser(argv).parse_args_and_config(argv)
    # No TrainingArguments here to set up CPU processes: without a GPU, ask for them (gloo) directly,
    problems = {name: problem_named(name, args) for name in args.problems}
    optima = {name: optimum(problem) for name, problem in problems.items() if problem.convex}
    grid = args.grid()
    jobs = [(p, m, s, seed, args) for p in args.problems for m in args.methods for s in grid for seed in args.seeds]
    rows = run_all(run_named, jobs, args.workers, "stepsize_sensitivity", executor)
    timed = None
    if args.timing_rounds:  # after the sweep: the workers are idle by then
        timed = {name: interleaved_step_seconds(problem, args) for name, problem in problems.items()}
    results = {
        "summary": summarize(rows, optima, args, timed),
        "optima": optima,
        "grid": args.grid(),
        "args": dataclasses.asdict(args),
    }
    out = Path(args.output_dir)
    write_results(out, results)
    write_rows(out / "runs.csv", rows)
    plot(results["summary"], args, out / "stepsize_sensitivity.png")
    for key, entry in results["summary"].items():
        print(f"{key}: {_line(entry)}")
    # Leave together: a rank that exits while another still holds the gloo group can abort
    # ("terminate called without an active exception", seen in 1 of 4 two-process runs).
    return results


if __name__ == "__main__":
    run_as_script(main)
