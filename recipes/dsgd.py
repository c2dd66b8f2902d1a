"""Decentralized SGD on N CPU processes: error vs iterations and consensus per gossip topology, with a DDP baseline.

    torchrun --nproc_per_node=4 recipes/dsgd.py --config recipes/configs/dsgd.yaml   # 4 workers
    hf-ext run dsgd problem=mlp                                                      # 1 worker
    hf-ext run dsgd --config dsgd_quick                                              # seconds: the check

Each process is one worker holding one shard of the data (``split="sorted"``: sorted by label, so the
workers' objectives differ, the hard case for gossip). Problems: ``logreg``, L2-regularised logistic
regression on scikit-learn's breast-cancer data (strongly convex; error ``||x_bar - x*||^2`` against the
exact minimiser from Newton's method); ``mlp``, a one-hidden-layer MLP on scikit-learn's digits (error:
training loss at ``x_bar``, plus held-out accuracy); ``lm``, a small Llama pretrained on standard-library
source through :class:`~hf_ext.optim.DecentralizedTrainer` (error: validation loss at ``x_bar``). Every
topology runs every seed with the same initial point, data and step-size schedule ``lr * t0 / (t + t0)``;
``compare_ddp`` adds plain SGD under ``DistributedDataParallel`` (all-reduce) on the same processes.

Writes ``results.json`` (per topology: quantiles of the final error over seeds, consensus distance,
spectral gap, seconds and bytes per step), ``curves.csv`` (every evaluation of every run) and
``error.png`` (error vs step, mean and spread over seeds) to ``output_dir``.
"""

import csv
import dataclasses
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from accelerate import PartialState
from sklearn.datasets import load_breast_cancer
from torch import nn
from torch.nn import functional as F
from tqdm.auto import tqdm
from transformers import Trainer, TrainingArguments
from trl import TrlParser

from hf_ext._validation import check_finite_fields
from hf_ext.data import digits, stdlib_bpe_tokenizer, stdlib_corpus
from hf_ext.models import digits_mlp, llama_from_scratch
from hf_ext.optim import (
    TOPOLOGIES,
    DecentralizedMetricsCallback,
    DecentralizedSGD,
    DecentralizedTrainer,
    Topology,
    WorkerProblem,
    ring_allreduce_bytes,
    train_decentralized,
)
from hf_ext.plotting import DPI
from hf_ext.recipes._plotting import plot_seed_curves
from hf_ext.recipes._results import write_results
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import run_config, set_per_run, settings_parser
from hf_ext.recipes._training import train_resumable

PROBLEMS = ("logreg", "mlp", "lm")
SPLITS = ("sorted", "iid")
ORDERS = ("atc", "cta")
QUANTILES = (0.5, 0.9, 0.95)
ERROR_LABELS = {
    "logreg": "||x_bar - x*||^2",
    "mlp": "training loss at x_bar",
    "lm": "validation loss at x_bar",
}


@dataclass
class DSGDArguments:
    problem: str = field(default="logreg", metadata={"help": f"One of {list(PROBLEMS)}."})
    topologies: list[str] = field(
        default_factory=lambda: list(TOPOLOGIES),
        metadata={
            "help": f"Gossip topologies, any of {list(TOPOLOGIES)}; those that need other world sizes "
            "(a torus on 2 processes) are skipped and listed in results.json."
        },
    )
    seeds: list[int] = field(default_factory=lambda: list(range(20)), metadata={"help": "One run per seed."})
    order: str = field(default="atc", metadata={"help": f"Gossip order, one of {list(ORDERS)}."})
    lr_decay_steps: int = field(
        default=50, metadata={"help": "t0 of the step size lr * t0 / (t + t0) (the 1/t schedule of the analysis)."}
    )
    eval_every: int = field(default=20, metadata={"help": "Steps between evaluations of the averaged model."})
    split: str = field(default="sorted", metadata={"help": f"Data across workers, one of {list(SPLITS)}."})
    l2: float = field(default=0.1, metadata={"help": "L2 coefficient of the logistic regression (strong convexity)."})
    hidden_size: int = field(default=32, metadata={"help": "MLP hidden width; the Llama's width for `lm`."})
    num_layers: int = field(default=2, metadata={"help": "Decoder layers of the `lm` problem's Llama."})
    block_size: int = field(default=64, metadata={"help": "Tokens per block for `lm`."})
    corpus_files: int = field(default=40, metadata={"help": "Standard-library files in the `lm` corpus."})
    compare_ddp: bool = field(default=True, metadata={"help": "Also run plain SGD under DDP (all-reduce)."})

    def __post_init__(self):
        check_finite_fields(self)
        for name, allowed in (("problem", PROBLEMS), ("order", ORDERS), ("split", SPLITS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"DSGDArguments: `{name}` must be one of {list(allowed)}, got {getattr(self, name)!r}")
        unknown = sorted(set(self.topologies) - set(TOPOLOGIES))
        if unknown or not self.topologies:
            raise ValueError(
                f"DSGDArguments: `topologies` must be a non-empty subset of {list(TOPOLOGIES)}, got {self.topologies}"
            )
        if not self.seeds:
            raise ValueError("DSGDArguments: `seeds` must list at least one seed")
        for name in ("lr_decay_steps", "eval_every", "hidden_size", "num_layers", "block_size", "corpus_files"):
            if getattr(self, name) < 1:
                raise ValueError(f"DSGDArguments: `{name}` must be >= 1, got {getattr(self, name)}")
        if self.l2 <= 0:
            raise ValueError(f"DSGDArguments: `l2` must be > 0 (strong convexity), got {self.l2}")


@dataclass
class DSGDTrainingArguments(TrainingArguments):
    """TrainingArguments (lr, steps, batch, output_dir) less what each run of the ``lm`` problem sets: its seed
    (one of ``seeds``) and logging every ``eval_every`` steps."""

    seed: int = set_per_run(TrainingArguments, "seed", by="DSGDArguments' `seeds`")
    logging_steps: float = set_per_run(TrainingArguments, "logging_steps", by="DSGDArguments' `eval_every`")

    def __post_init__(self):
        check_finite_fields(self)
        super().__post_init__()


def parser(argv: list[str] | None = None) -> TrlParser:
    """The recipe's parser: :class:`DSGDArguments` and :class:`DSGDTrainingArguments`."""
    return settings_parser(DSGDArguments, DSGDTrainingArguments)


def _shards(targets: np.ndarray, features: np.ndarray, world: int, split: str) -> np.ndarray:
    """Row indices in worker order, equal shards (the tail that does not divide is dropped)."""
    if split == "sorted":
        order = np.lexsort((features[:, 0], targets))
    else:
        order = np.random.default_rng(0).permutation(len(targets))
    return order[: len(order) - len(order) % world]


def logistic_problem(rank: int, world: int, args: DSGDArguments) -> WorkerProblem:
    data = load_breast_cancer()
    keep = _shards(data.target, data.data, world, args.split)
    x = torch.tensor(data.data[keep], dtype=torch.float64)
    x = torch.cat([(x - x.mean(0)) / x.std(0), torch.ones(len(x), 1, dtype=torch.float64)], dim=1)
    y = torch.tensor(2.0 * data.target[keep] - 1, dtype=torch.float64)

    def objective(w: torch.Tensor, rows=slice(None)) -> torch.Tensor:
        return F.softplus(-y[rows] * (x[rows] @ w)).mean() + 0.5 * args.l2 * w.square().sum()

    optimum = torch.zeros(x.shape[1], dtype=torch.float64)
    for _ in range(30):  # Newton's method: the exact minimiser of the strongly convex objective
        gradient = torch.func.grad(objective)(optimum)
        optimum = optimum - torch.linalg.solve(torch.func.hessian(objective)(optimum), gradient)
    minimum = float(objective(optimum))
    shard = slice(rank * len(x) // world, (rank + 1) * len(x) // world)

    def make_model(seed: int) -> nn.Module:
        model = nn.Linear(x.shape[1], 1, bias=False, dtype=torch.float64)
        nn.init.zeros_(model.weight)  # the same starting point for every run
        return model

    def loss(model: nn.Module, features: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        penalty = sum(p.square().sum() for p in model.parameters())  # through DDP too
        return F.softplus(-targets * model(features)[:, 0]).mean() + 0.5 * args.l2 * penalty

    def evaluate(model: nn.Module) -> dict[str, float]:
        w = model.weight[0].detach()
        return {"error": float((w - optimum).square().sum()), "suboptimality": float(objective(w)) - minimum}

    return WorkerProblem(x[shard], y[shard], make_model, loss, evaluate)


def mlp_problem(rank: int, world: int, args: DSGDArguments) -> WorkerProblem:
    x_all, y_all = digits()
    test = np.random.default_rng(0).permutation(len(y_all))[: len(y_all) // 5]
    train = np.setdiff1d(np.arange(len(y_all)), test)
    train = train[_shards(y_all.numpy()[train], x_all.numpy()[train], world, args.split)]
    x, y = x_all[train], y_all[train]
    shard = slice(rank * len(x) // world, (rank + 1) * len(x) // world)

    def make_model(seed: int) -> nn.Module:
        return digits_mlp(args.hidden_size, seed)

    def loss(model: nn.Module, features: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(model(features), targets)

    @torch.no_grad()
    def evaluate(model: nn.Module) -> dict[str, float]:
        accuracy = (model(x_all[test]).argmax(1) == y_all[test]).float().mean()
        return {"error": float(loss(model, x, y)), "test_accuracy": float(accuracy)}

    return WorkerProblem(x[shard], y[shard], make_model, loss, evaluate)


def loop_run(problem: WorkerProblem, topology: str, seed: int, args: DSGDArguments, training_args) -> dict:
    """One run of the plain loop (``topology="ddp"``: SGD under DistributedDataParallel, the baseline)."""
    return train_decentralized(
        problem,
        topology,
        seed,
        lr=training_args.learning_rate,
        steps=training_args.max_steps,
        batch_size=training_args.per_device_train_batch_size,
        lr_decay_steps=args.lr_decay_steps,
        eval_every=args.eval_every,
        order=args.order,
    )


def lm_run(topology: str, seed: int, args: DSGDArguments, training_args, data) -> dict:
    """One run of the ``lm`` problem through DecentralizedTrainer (DDP: the stock Trainer)."""
    tokenizer, corpus = data
    model = llama_from_scratch(tokenizer, args.hidden_size, args.num_layers, max_positions=args.block_size, seed=seed)
    run_args = run_config(TrainingArguments, training_args, seed=seed, logging_steps=args.eval_every)
    validation = corpus["validation"].select(range(min(16, len(corpus["validation"]))))
    loss_inputs = {key: torch.tensor(validation[key]) for key in ("input_ids", "attention_mask", "labels")}
    sgd = torch.optim.SGD(model.parameters(), lr=training_args.learning_rate)
    if topology == "ddp":
        trainer = Trainer(model=model, args=run_args, train_dataset=corpus["train"], optimizers=(sgd, None))
    else:
        trainer = DecentralizedTrainer(
            model=model,
            args=run_args,
            train_dataset=corpus["train"],
            optimizers=(DecentralizedSGD(sgd, topology, args.order), None),
            callbacks=[DecentralizedMetricsCallback(every=args.eval_every, loss_inputs=loss_inputs)],
        )
    start = time.perf_counter()
    train_resumable(trainer, several_runs=True)
    seconds = (time.perf_counter() - start) / training_args.max_steps
    curve = [
        {"step": entry["step"], "consensus_distance": entry["dsgd/consensus_distance"], "error": entry[key]}
        for entry in trainer.state.log_history
        if (key := "dsgd/averaged_loss") in entry
    ]
    if not curve or curve[-1]["step"] != training_args.max_steps:  # DDP: its one model, at the end
        model.eval()
        with torch.no_grad():
            loss = float(model(**loss_inputs).loss)
        curve.append({"step": training_args.max_steps, "consensus_distance": 0.0, "error": loss})
    bytes_per_step = ring_allreduce_bytes(model, trainer.accelerator.num_processes)
    if topology != "ddp":
        bytes_per_step = trainer.optimizer.optimizer.communicator.bytes_sent / training_args.max_steps
    return {"curve": curve, "seconds_per_step": seconds, "bytes_per_step": bytes_per_step}


def summarize(runs: list[dict], topology: str, world: int) -> dict:
    """Quantiles of the final error over seeds, consensus, spectral gap, time and bytes per step."""
    final = [run["curve"][-1]["error"] for run in runs]
    summary = {f"error_q{round(100 * q)}": float(np.quantile(final, q)) for q in QUANTILES}
    summary |= {
        "error_mean": statistics.fmean(final),
        "error_std": statistics.stdev(final) if len(final) > 1 else 0.0,
        "final_errors": final,
        "consensus_distance_mean": statistics.fmean(
            statistics.fmean(point["consensus_distance"] for point in run["curve"][1:] or run["curve"]) for run in runs
        ),
        "spectral_gap": None if topology == "ddp" else Topology(topology, world).spectral_gap(),
        "seconds_per_step": statistics.median(run["seconds_per_step"] for run in runs),
        "bytes_per_step": statistics.fmean(run["bytes_per_step"] for run in runs),
    }
    extra = [key for key in runs[0]["curve"][-1] if key not in ("step", "error", "consensus_distance")]
    for key in extra:
        summary[f"{key}_mean"] = statistics.fmean(run["curve"][-1][key] for run in runs)
    return summary


def write_outputs(out: Path, results: dict, curves: dict[str, list[dict]]) -> None:
    write_results(out, results)
    with (out / "curves.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["problem", "processes", "topology", "seed", "step", "error", "consensus_distance"])
        for topology, runs in curves.items():
            for seed, run in zip(results["seeds"], runs, strict=True):
                for point in run["curve"]:
                    writer.writerow(
                        [
                            results["problem"],
                            results["processes"],
                            topology,
                            seed,
                            point["step"],
                            point["error"],
                            point["consensus_distance"],
                        ]
                    )
    figure = plot_seed_curves(
        {name: [[(p["step"], p["error"]) for p in run["curve"]] for run in runs] for name, runs in curves.items()},
        out / "error.png",
        f"DSGD {results['problem']}, {results['processes']} processes: averaged model",
        ylabel=ERROR_LABELS[results["problem"]],
    )
    if results["problem"] == "logreg":  # the error spans decades
        figure.axes[0].set_yscale("log")
        figure.savefig(out / "error.png", dpi=DPI)


def main(argv: list[str] | None = None) -> dict:
    script_args, training_args = parser(argv).parse_args_and_config(argv)
    state = PartialState()
    world, rank = state.num_processes, state.process_index
    runnable, skipped = [], []
    for topology in script_args.topologies:
        try:
            Topology(topology, world)
            runnable.append(topology)
        except ValueError as error:
            skipped.append({"topology": topology, "reason": str(error)})
    names = runnable + (["ddp"] if script_args.compare_ddp else [])
    if script_args.problem == "lm":
        tokenizer = stdlib_bpe_tokenizer(1024)
        data = (tokenizer, stdlib_corpus(tokenizer, script_args.block_size, max_files=script_args.corpus_files))
    else:
        build = logistic_problem if script_args.problem == "logreg" else mlp_problem
        problem = build(rank, world, script_args)
    curves = {name: [] for name in names}
    jobs = [(name, seed) for name in names for seed in script_args.seeds]
    for name, seed in tqdm(jobs, desc=f"dsgd {script_args.problem} x{world}", disable=not state.is_main_process):
        if script_args.problem == "lm":
            curves[name].append(lm_run(name, seed, script_args, training_args, data))
        else:
            curves[name].append(loop_run(problem, name, seed, script_args, training_args))
    results = {
        "problem": script_args.problem,
        "processes": world,
        "seeds": script_args.seeds,
        "steps": training_args.max_steps,
        "learning_rate": training_args.learning_rate,
        "batch_size_per_process": training_args.per_device_train_batch_size,
        "skipped": skipped,
        "topologies": {name: summarize(runs, name, world) for name, runs in curves.items()},
        "script_args": dataclasses.asdict(script_args),
    }
    if state.is_main_process:
        out = Path(training_args.output_dir)
        write_outputs(out, results, curves)
        for name, summary in results["topologies"].items():
            state.print(
                f"{name}: final error q50 {summary['error_q50']:.3e} q95 {summary['error_q95']:.3e}, consensus "
                f"{summary['consensus_distance_mean']:.2e}, {1e3 * summary['seconds_per_step']:.2f} ms/step, "
                f"{summary['bytes_per_step']:.0f} B/step"
            )
        state.print(f"wrote {out / 'results.json'}, {out / 'curves.csv'} and {out / 'error.png'}")
    state.wait_for_everyone()
    return results


if __name__ == "__main__":
    run_as_script(main)
