"""Where progressive binarization beats binarizing at step 0: held-out perplexity over budgets and seeds.

    python benchmarks/binarization.py [--seeds 0 1 2] [--budgets 3 6 12 30 100] [--workers 2] [--cached-only]

SmolLM2-135M-Instruct, every decoder linear layer binarized, trained by logit distillation from its
full-precision self on standard-library source; the seed draws the corpus split (which files are
trained on, which are held out), the data order and the run. Per seed and distillation budget ``N``
(optimizer steps):

- ``progressive``: rank-1 ``|W|`` init, ``lambda`` 0 -> 1 over ``round(ramp_fraction * N)`` steps, then binary;
- ``progressive_mean_abs``: the same from the one-shot per-row mean-``|W|`` scales (what the rank-1 init buys);
- ``step0_binary``: rank-1 init, binary (``lambda`` 1) from step 0 for all ``N`` steps: one run for the largest
  budget, read off at every budget (constant learning rate, no schedule: its first ``N`` steps are the ``N``-step run);
- ``ramp_on_top``: the ramp of ``progressive`` added before ``N`` binary steps, so that it has as many
  fully-binary steps as ``step0_binary``: the schedule's effect apart from the binary steps it costs;

and, without training, ``one_shot`` (sign with mean-``|W|`` scales), ``rank_one_init`` and the full-precision
model. Reports mean, std, median, geometric mean and std of log10 over seeds per (budget, variant), writes the
runs to ``--output-dir`` and ``binarization_map.png`` (log10 perplexity vs budget, one line per variant, +-1 std
bands). Each finished cell is appended to ``binarization_cells.jsonl`` and not run again with the same settings;
``--cached-only`` summarises what is there. The last line is JSON.
"""

import argparse
import copy
import json
import math
import statistics
import sys
import tempfile
import time
from functools import cache
from pathlib import Path

import torch
from _harness import benchmark_parser, emit, save_json
from transformers import TrainerCallback

from hf_ext.data import stdlib_corpus
from hf_ext.evaluation import perplexity
from hf_ext.executors import local_executor, run_jobs
from hf_ext.models import CAUSAL_LMS, load_causal_lm
from hf_ext.quant import (
    LogitDistillationConfig,
    LogitDistillationTrainer,
    ProgressiveBinarizationCallback,
    binarize_model,
    ramp_length,
    set_binarization_mix,
)
from hf_ext.recipes._plotting import plot_seed_curves

TRAINED = ("progressive", "progressive_mean_abs", "step0_binary", "ramp_on_top")
UNTRAINED = ("full_precision", "one_shot", "rank_one_init")


@cache
def _teacher(model_name: str):
    return load_causal_lm(model_name)


@cache
def _blocks(model_name: str, block_size: int, max_files: int, eval_blocks: int, seed: int):
    """The training blocks and the held-out blocks of one seed's corpus split (built once per worker)."""
    corpus = stdlib_corpus(_teacher(model_name)[1], block_size, max_files=max_files, seed=seed)
    return corpus["train"], corpus["validation"].select(range(min(eval_blocks, len(corpus["validation"]))))


@cache
def _binarized(model_name: str, init: str):
    """The teacher binarized with ``init`` scales, and its mean init error (the rank-1 init takes minutes on a
    busy core: done once per worker, copied per cell)."""
    student = copy.deepcopy(_teacher(model_name)[0])
    errors = binarize_model(student, init=init)
    return student, statistics.mean(errors.values())


class _HeldOutAt(TrainerCallback):
    """Held-out perplexity at the end of each of ``steps`` (a binary run's shorter budgets, read off one long run)."""

    def __init__(self, steps, held_out):
        self.steps, self.held_out = set(steps), held_out
        self.perplexity, self.seconds, self._start, self._eval_seconds = {}, {}, time.perf_counter(), 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step in self.steps:
            start = time.perf_counter()
            set_binarization_mix(model, 1.0)  # the binary model is what is measured (already so after the ramp)
            self.perplexity[state.global_step] = perplexity(model, self.held_out)
            self.seconds[state.global_step] = start - self._start - self._eval_seconds
            self._eval_seconds += time.perf_counter() - start


def run_job(args: argparse.Namespace, seed: int, variant: str, budgets: tuple[int, ...]) -> dict[int, dict]:
    """Held-out perplexity of the binary model (or an untrained baseline) of one seed and variant, per budget.

    ``step0_binary`` trains once, for the largest budget, and is read off at every budget: with a constant
    learning rate, no schedule and the same seed, the first ``N`` steps of a longer run are the ``N``-step
    run (same data order, same updates). The progressive variants' ramp depends on ``N``: one run per budget.
    """
    torch.set_num_threads(args.threads)
    teacher = _teacher(args.model)[0]
    train, held_out = _blocks(args.model, args.block_size, args.max_files, args.eval_blocks, seed)
    if variant == "full_precision":
        return {0: {"perplexity": perplexity(teacher, held_out)}}
    init = "mean_abs" if variant in ("one_shot", "progressive_mean_abs") else "svid"
    binarized, init_error = _binarized(args.model, init)
    student = copy.deepcopy(binarized)
    result = {"init_error": init_error}
    set_binarization_mix(student, 1.0)
    if variant in UNTRAINED:
        return {0: result | {"perplexity": perplexity(student, held_out)}}
    budget = max(budgets)
    ramp = 0 if variant == "step0_binary" else ramp_length(budget, args.ramp_fraction)
    steps = budget + ramp if variant == "ramp_on_top" else budget
    points = {n: n for n in budgets} if variant == "step0_binary" else {budget: steps}  # budget -> step measured
    held_out_at = _HeldOutAt(points.values(), held_out)
    callbacks = [held_out_at] + ([ProgressiveBinarizationCallback(end=ramp)] if ramp else [])
    with tempfile.TemporaryDirectory() as output_dir:
        config = LogitDistillationConfig(
            output_dir=output_dir,
            max_steps=steps,
            per_device_train_batch_size=args.batch_size,
            learning_rate=args.learning_rate,
            lr_scheduler_type="constant",
            seed=seed,
            save_strategy="no",
            report_to="none",
            logging_steps=max(1, steps // 5),
            disable_tqdm=True,
            dataloader_pin_memory=False,
            use_cpu=not torch.cuda.is_available(),
        )
        LogitDistillationTrainer(student, teacher, config, train_dataset=train, callbacks=callbacks).train()
    result |= {"ramp": ramp}
    return {
        n: result | {"perplexity": held_out_at.perplexity[at], "seconds": held_out_at.seconds[at], "steps": at}
        for n, at in points.items()
    }


def _run_job(job):
    args, seed, variant, budgets = job
    return [((seed, variant, budget), cell) for budget, cell in run_job(args, seed, variant, budgets).items()]


def _cached_cells(path: Path, settings: dict) -> dict:
    """Cells of an earlier (interrupted) run with the same settings, from its append-only ``cells.jsonl``."""
    if not path.is_file():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {tuple(row["key"]): row["cell"] for row in rows if row["settings"] == settings}


def _summary(values: list[float]) -> dict[str, float]:
    """Mean and std, and since perplexities of a few short runs span orders of magnitude, the median and the
    geometric mean with the std of log10 (the spread the plot shows)."""
    logs = [math.log10(value) for value in values]
    spread = statistics.stdev if len(values) > 1 else lambda _: 0.0
    return {
        "mean": statistics.mean(values),
        "std": spread(values),
        "median": statistics.median(values),
        "geo_mean": 10 ** statistics.mean(logs),
        "std_log10": spread(logs),
    }


def _plot_map(args, budgets: list[int], runs: dict, baselines: dict, path: Path) -> None:
    """log10 perplexity vs budget (log axis), mean +-1 std over seeds: each variant at the budgets all its seeds
    reached, the untrained one-shot and full-precision models as flat lines."""
    log10 = {
        variant: {int(b): {run["seed"]: math.log10(run["perplexity"]) for run in cell} for b, cell in by_budget.items()}
        for variant, by_budget in runs.items()
    }
    curves = {}
    for variant, by_budget in log10.items():
        complete = [b for b in budgets if len(by_budget[b]) == len(args.seeds)]
        if complete:
            curves[variant] = [[(b, by_budget[b][seed]) for b in complete] for seed in args.seeds]
    for variant in UNTRAINED[:2]:
        curves[variant] = [[(b, math.log10(run["perplexity"])) for b in budgets] for run in baselines[variant]]
    figure = plot_seed_curves(
        curves,
        path,
        f"Binarizing {args.model}: {len(args.seeds)} seeds, mean +-1 std of log10",
        "log10 held-out perplexity",
    )
    axis = figure.axes[0]
    axis.set_xscale("log")
    axis.set_xticks(budgets, [str(b) for b in budgets])
    axis.set_xlabel("distillation steps (budget N)")
    axis.set_ylim(0, min(axis.get_ylim()[1], 12))  # a few 3-step runs reach 1e40: the rest would be flat lines
    figure.savefig(path, dpi=figure.dpi)


def main() -> None:
    parser = benchmark_parser(__doc__, seeds=[0, 1, 2])
    parser.add_argument("--budgets", type=int, nargs="+", default=[3, 6, 12, 30, 100], help="distillation steps")
    parser.add_argument("--variants", nargs="*", choices=TRAINED, default=list(TRAINED), help="none: untrained only")
    parser.add_argument("--ramp-fraction", type=float, default=0.5, help="ramp of the progressive variants")
    parser.add_argument("--model", choices=sorted(CAUSAL_LMS), default="smollm2")
    parser.add_argument("--block-size", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--max-files", type=int, default=200)
    parser.add_argument("--eval-blocks", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--workers", type=int, default=2, help="processes running cells side by side")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    parser.add_argument(
        "--cached-only",
        action="store_true",
        help="summarise the cells already measured; run nothing, leave out the rest",
    )
    args = parser.parse_args()
    budgets = sorted(set(args.budgets))
    settings = {name: value for name, value in vars(args).items() if name not in ("seeds", "budgets", "variants")}
    settings = {
        name: value
        for name, value in settings.items()
        if name not in ("workers", "threads", "output_dir", "cached_only")
    }
    cells_path = Path(args.output_dir) / "binarization_cells.jsonl"
    cells = _cached_cells(cells_path, settings)
    jobs = []
    for seed in args.seeds:
        for variant in (*UNTRAINED, *args.variants):
            todo = [b for b in ((0,) if variant in UNTRAINED else budgets) if (seed, variant, b) not in cells]
            if variant == "step0_binary" and todo:  # one run, read off at every budget up to the longest missing
                jobs.append((args, seed, variant, tuple(b for b in budgets if b <= max(todo))))
            else:
                jobs += [(args, seed, variant, (b,)) for b in todo]
    jobs = [] if args.cached_only else jobs
    jobs.sort(key=lambda job: -max(job[3]) * (1 + args.ramp_fraction * (job[2] == "ramp_on_top")))  # longest first
    print(f"{len(cells)} cells from {cells_path}, {len(jobs)} to run", flush=True)
    cells_path.parent.mkdir(parents=True, exist_ok=True)
    start, done = time.perf_counter(), []
    executor = local_executor(args.workers)
    with cells_path.open("a") as log:

        def record(index: int, job_cells: list) -> None:  # as each job finishes: an interrupted run keeps its cells
            done.append(index)
            minutes = (time.perf_counter() - start) / 60
            for key, cell in job_cells:
                earlier = f" (earlier run: {cells[key]['perplexity']})" if key in cells else ""
                cells[key] = cell
                log.write(json.dumps({"settings": settings, "key": key, "cell": cell}) + "\n")
                print(f"[{len(done)}/{len(jobs)} {minutes:.1f} min] seed, variant, budget {key}: {cell}{earlier}")
            log.flush()
            sys.stdout.flush()

        try:
            run_jobs(executor, _run_job, [(job,) for job in jobs], on_result=record)
        finally:
            executor.shutdown()
    # Cells not measured (``--cached-only``, or a seed cut for time) are left out; ``n`` counts the seeds per cell.
    runs = {
        variant: {
            str(budget): [
                cells[key] | {"seed": seed} for seed in args.seeds if (key := (seed, variant, budget)) in cells
            ]
            for budget in budgets
        }
        for variant in args.variants
    }
    baselines = {variant: [cells[seed, variant, 0] | {"seed": seed} for seed in args.seeds] for variant in UNTRAINED}
    perplexity_map = {
        variant: {
            budget: _summary([run["perplexity"] for run in cell]) | {"n": len(cell)}
            for budget, cell in by_budget.items()
            if cell
        }
        for variant, by_budget in runs.items()
    }
    wins = {}
    if {"progressive", "step0_binary"} <= runs.keys():
        for budget, progressive_runs in runs["progressive"].items():
            step0 = {run["seed"]: run["perplexity"] for run in runs["step0_binary"][budget]}
            pairs = [(run["perplexity"], step0[run["seed"]]) for run in progressive_runs if run["seed"] in step0]
            wins[budget] = f"{sum(p < s for p, s in pairs)} of {len(pairs)}"
    summary = {
        "model": args.model,
        "seeds": args.seeds,
        "budgets": budgets,
        "ramp_fraction": args.ramp_fraction,
        "perplexity": perplexity_map,
        **{f"perplexity_{name}": _summary([run["perplexity"] for run in baselines[name]]) for name in UNTRAINED},
        "init_error_one_shot": statistics.mean(run["init_error"] for run in baselines["one_shot"]),
        "init_error_rank_one": statistics.mean(run["init_error"] for run in baselines["rank_one_init"]),
        "progressive_wins_over_step0": wins,
        "wall_seconds": time.perf_counter() - start,
    }
    out = Path(args.output_dir)
    save_json(args.output_dir, "binarization", summary | {"runs": runs, "baselines": baselines})
    _plot_map(args, budgets, runs, baselines, out / "binarization_map.png")
    emit(summary)


if __name__ == "__main__":
    main()
