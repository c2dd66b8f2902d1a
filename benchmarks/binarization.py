"""Where progressive binarization beats binarizing at step 0: held-out perplexity over budgets and seeds.

    python benchmarks/binarization.py [--seeds 0 1 2] [--budgets 3 6 12] [--workers 2]

SmolLM2-135M-Instruct, every decoder linear layer binarized, trained by logit distillation from its
full-precision self on standard-library source; the seed draws the corpus split (which files are
trained on, which are held out), the data order and the run. Per seed and distillation budget ``N``
(optimizer steps):

- ``progressive``: rank-1 ``|W|`` init, ``lambda`` 0 -> 1 over ``round(ramp_fraction * N)`` steps, then binary;
- ``progressive_mean_abs``: the same from the one-shot per-row mean-``|W|`` scales (what the rank-1 init buys);
- ``step0_binary``: rank-1 init, binary (``lambda`` 1) from step 0 for all ``N`` steps;
- ``ramp_on_top``: the ramp of ``progressive`` added before ``N`` binary steps, so that it has as many
  fully-binary steps as ``step0_binary``: the schedule's effect apart from the binary steps it costs;

and, without training, ``one_shot`` (sign with mean-``|W|`` scales), ``rank_one_init`` and the full-precision
model. Reports mean and std over seeds per (budget, variant), writes the runs to ``--output-dir`` and
``binarization_map.png`` (log10 perplexity vs budget, one line per variant, +-1 std bands). The last line is JSON.
"""

import argparse
import copy
import json
import math
import multiprocessing
import statistics
import tempfile
import time
from functools import cache
from pathlib import Path

import torch
from _harness import emit, save_json

from hf_ext.data import stdlib_corpus
from hf_ext.evaluation import perplexity
from hf_ext.models import CAUSAL_LMS, load_causal_lm
from hf_ext.plotting import plot_seed_curves
from hf_ext.quant import (
    LogitDistillationConfig,
    LogitDistillationTrainer,
    ProgressiveBinarizationCallback,
    binarize_model,
    ramp_length,
    set_binarization_mix,
)

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


def run_job(args: argparse.Namespace, seed: int, variant: str, budget: int) -> dict:
    """One (seed, variant, budget) cell: held-out perplexity of the binary model (or an untrained baseline)."""
    torch.set_num_threads(args.threads)
    teacher = _teacher(args.model)[0]
    train, held_out = _blocks(args.model, args.block_size, args.max_files, args.eval_blocks, seed)
    if variant == "full_precision":
        return {"perplexity": perplexity(teacher, held_out)}
    init = "mean_abs" if variant in ("one_shot", "progressive_mean_abs") else "svid"
    binarized, init_error = _binarized(args.model, init)
    student = copy.deepcopy(binarized)
    result = {"init_error": init_error}
    set_binarization_mix(student, 1.0)
    if variant in UNTRAINED:
        return result | {"perplexity": perplexity(student, held_out)}
    ramp = ramp_length(budget, args.ramp_fraction)
    steps = budget + ramp if variant == "ramp_on_top" else budget
    callbacks = [] if variant == "step0_binary" else [ProgressiveBinarizationCallback(end=ramp)]
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
        trainer = LogitDistillationTrainer(student, teacher, config, train_dataset=train, callbacks=callbacks)
        start = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - start
    set_binarization_mix(student, 1.0)
    return result | {"perplexity": perplexity(student, held_out), "steps": steps, "ramp": ramp, "seconds": seconds}


def _run_job(job):
    args, seed, variant, budget = job
    return (seed, variant, budget), run_job(args, seed, variant, budget)


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budgets", type=int, nargs="+", default=[3, 6, 12], help="distillation steps")
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
    parser.add_argument("--output-dir", default="outputs/benchmarks")
    args = parser.parse_args()
    budgets = sorted(set(args.budgets))
    jobs = [(args, seed, variant, 0) for seed in args.seeds for variant in UNTRAINED]
    jobs += [(args, seed, variant, budget) for seed in args.seeds for variant in args.variants for budget in budgets]
    jobs.sort(key=lambda job: -job[3] * (1 + args.ramp_fraction * (job[2] == "ramp_on_top")))  # longest first
    settings = {name: value for name, value in vars(args).items() if name not in ("seeds", "budgets", "variants")}
    settings = {name: value for name, value in settings.items() if name not in ("workers", "threads", "output_dir")}
    cells_path = Path(args.output_dir) / "binarization_cells.jsonl"
    cells = _cached_cells(cells_path, settings)
    jobs = [job for job in jobs if job[1:] not in cells]
    print(f"{len(cells)} cells from {cells_path}, {len(jobs)} to run", flush=True)
    cells_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(args.workers) as pool, cells_path.open("a") as log:
        for done, (key, cell) in enumerate(pool.imap_unordered(_run_job, jobs), 1):
            cells[key] = cell
            log.write(json.dumps({"settings": settings, "key": key, "cell": cell}) + "\n")
            log.flush()
            minutes = (time.perf_counter() - start) / 60
            print(f"[{done}/{len(jobs)} {minutes:.1f} min] seed, variant, budget {key}: {cell}", flush=True)
    runs = {
        variant: {str(budget): [cells[seed, variant, budget] for seed in args.seeds] for budget in budgets}
        for variant in args.variants
    }
    baselines = {variant: [cells[seed, variant, 0] for seed in args.seeds] for variant in UNTRAINED}
    perplexity_map = {
        variant: {budget: _summary([run["perplexity"] for run in cell]) for budget, cell in by_budget.items()}
        for variant, by_budget in runs.items()
    }
    summary = {
        "model": args.model,
        "seeds": args.seeds,
        "budgets": budgets,
        "ramp_fraction": args.ramp_fraction,
        "perplexity": perplexity_map,
        **{f"perplexity_{name}": _summary([run["perplexity"] for run in baselines[name]]) for name in UNTRAINED},
        "init_error_one_shot": statistics.mean(run["init_error"] for run in baselines["one_shot"]),
        "init_error_rank_one": statistics.mean(run["init_error"] for run in baselines["rank_one_init"]),
        "progressive_wins_over_step0": {
            budget: sum(
                p["perplexity"] < s["perplexity"]
                for p, s in zip(runs["progressive"][budget], runs["step0_binary"][budget], strict=True)
            )
            for budget in runs.get("progressive", {})
            if "step0_binary" in runs
        },
        "wall_seconds": time.perf_counter() - start,
    }
    out = Path(args.output_dir)
    save_json(args.output_dir, "binarization", summary | {"runs": runs, "baselines": baselines})
    flat = {
        variant: [[(b, math.log10(run["perplexity"])) for b in budgets] for run in baselines[variant]]
        for variant in UNTRAINED[:2]
    }
    trained = {
        variant: [
            [(b, math.log10(by_budget[str(b)][i]["perplexity"])) for b in budgets] for i in range(len(args.seeds))
        ]
        for variant, by_budget in runs.items()
    }
    plot_seed_curves(
        trained | flat,
        out / "binarization_map.png",
        f"Binarizing {args.model}: {len(args.seeds)} seeds, mean +-1 std of log10",
        ylabel="log10 held-out perplexity",
    )
    emit(summary)


if __name__ == "__main__":
    main()
