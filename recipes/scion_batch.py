"""Scion at a fixed token budget: batch-size sweep, predicted critical batch, adaptive schedule, AdamW and Muon.

    hf-ext run scion_batch                       # shipped config (benchmarks/scion_batch.py runs it)
    hf-ext run scion_batch --config scion_batch_quick   # seconds: the end-to-end check

A small Llama is pretrained from scratch on standard-library source through the stock ``Trainer``,
every run on the same number of tokens (``token_budget``) from the same packed token stream:

1. Scion with a fixed batch of ``B`` sequences of ``seq_len`` tokens for each ``B`` in ``batch_sizes``,
   at ``lr(B) = scion_lr (B / lr_reference_batch)^lr_batch_exponent`` times each of ``lr_multipliers``
   (the best multiplier per ``B`` is kept): held-out loss against tokens per step shows the regimes.
2. The constants ``L, mu, rho, sigma`` measured at initialization and at the end of each run
   (:func:`hf_ext.optim.measure_constants`), and the critical batch they predict for the budget.
3. The adaptive schedule: ``adaptive_stages`` stages whose budgets grow by ``adaptive_stage_ratio``,
   ending at the best fixed batch and step size (:class:`hf_ext.optim.BatchSchedule`'s rule backwards).
4. AdamW and ``torch.optim.Muon`` (hidden matrices; AdamW for the rest) at the best fixed batch, their
   step sizes tuned over the same multipliers.

Held-out loss is measured on blocks of ``seq_len`` tokens ``eval_points`` times per run. Writes
``results.json``, ``runs.csv`` (one row per run) and ``sweep.png`` / ``curves.png`` to ``output_dir``.
"""

import csv
import dataclasses
import functools
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import torch
from accelerate import PartialState
from transformers import Trainer, TrainingArguments
from trl import TrlParser

from hf_ext._validation import check_finite_fields
from hf_ext.data import PackedStream, PackedStreamCollator, stdlib_bpe_tokenizer, stdlib_corpus
from hf_ext.distributed import unsharded_copy
from hf_ext.models import llama_from_scratch
from hf_ext.optim import BatchSchedule, BatchScheduleCallback, Constants, Scion, critical_batch_size, measure_constants
from hf_ext.plotting import plot_labelled_points
from hf_ext.recipes._optimizers import build_optimizer
from hf_ext.recipes._plotting import plot_seed_curves
from hf_ext.recipes._results import write_results
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import run_config, set_per_run, settings_parser
from hf_ext.recipes._training import train_resumable

OPTIMIZERS = ("scion", "adamw", "muon")


@dataclass
class ScionBatchArguments:
    token_budget: int = field(default=2**17, metadata={"help": "Training tokens of every run (T)."})
    seq_len: int = field(default=64, metadata={"help": "Sequence length of the fixed runs and of evaluation (S0)."})
    batch_sizes: list[int] = field(
        default_factory=lambda: [1, 2, 4, 8, 16, 32, 64], metadata={"help": "Fixed batch sizes (sequences) swept."}
    )
    scion_lr: float = field(default=0.02, metadata={"help": "Scion step size at `lr_reference_batch`."})
    lr_reference_batch: int = field(default=8, metadata={"help": "Batch size at which `scion_lr` applies."})
    lr_batch_exponent: float = field(
        default=1.0,
        metadata={"help": "lr(B) = scion_lr (B / lr_reference_batch)^exponent; 1 is the rule's lr* ~ B S at fixed T."},
    )
    lr_multipliers: list[float] = field(
        default_factory=lambda: [0.5, 1.0, 2.0],
        metadata={"help": "Each method's step size is tuned over these multiples of its base step size."},
    )
    adaptive_stages: int = field(default=3, metadata={"help": "Stages of the adaptive schedule."})
    adaptive_stage_ratio: float = field(default=4.0, metadata={"help": "Budget growth between adaptive stages."})
    seq_share: float = field(default=0.5, metadata={"help": "Share of the B S growth given to the sequence length."})
    adamw_lr: float = field(default=3e-3, metadata={"help": "AdamW base step size."})
    muon_lr: float = field(default=3e-3, metadata={"help": "Muon (AdamW-matched RMS) and its AdamW base step size."})
    seeds: list[int] = field(default_factory=lambda: [0, 1], metadata={"help": "Seeds (model init and data order)."})
    vocab_size: int = field(default=2048, metadata={"help": "BPE vocabulary trained on standard-library source."})
    hidden_size: int = field(default=64, metadata={"help": "Model width (MLP 4x)."})
    num_layers: int = field(default=2, metadata={"help": "Decoder layers."})
    num_heads: int = field(default=4, metadata={"help": "Attention heads."})
    corpus_files: int = field(default=200, metadata={"help": "Standard-library files in the corpus."})
    eval_blocks: int = field(default=64, metadata={"help": "Held-out blocks of `seq_len` tokens."})
    eval_points: int = field(default=8, metadata={"help": "Held-out evaluations per run."})
    constant_batches: int = field(
        default=8, metadata={"help": "Micro-batches of 4 sequences used to measure the constants."}
    )

    def __post_init__(self):
        check_finite_fields(self)
        positive = ("token_budget", "seq_len", "lr_reference_batch", "adaptive_stages", "eval_blocks", "eval_points")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be >= 1, got {getattr(self, name)}")
        if not self.batch_sizes or min(self.batch_sizes) < 1 or len(set(self.batch_sizes)) != len(self.batch_sizes):
            raise ValueError(f"`batch_sizes` must be distinct positive integers, got {self.batch_sizes}")
        if not self.lr_multipliers or min(self.lr_multipliers) <= 0:
            raise ValueError(f"`lr_multipliers` must be positive, got {self.lr_multipliers}")
        for name in ("scion_lr", "adamw_lr", "muon_lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"`{name}` must be > 0, got {getattr(self, name)}")
        if not self.adaptive_stage_ratio > 1:
            raise ValueError(f"`adaptive_stage_ratio` must be > 1, got {self.adaptive_stage_ratio}")
        if self.constant_batches < 2 or not self.seeds:
            raise ValueError("`constant_batches` must be >= 2 and `seeds` non-empty")


_BY_SCHEDULE = "the run's batch schedule"


@dataclass
class ScheduledTrainingArguments(TrainingArguments):
    """TrainingArguments less what each run's batch schedule sets: its steps, one packed sequence per micro-batch
    in order, its learning rate, evaluation and logging ``eval_points`` times, its seed, no checkpoints."""

    max_steps: int = set_per_run(TrainingArguments, "max_steps", by=_BY_SCHEDULE)
    per_device_train_batch_size: int = set_per_run(TrainingArguments, "per_device_train_batch_size", by=_BY_SCHEDULE)
    gradient_accumulation_steps: int = set_per_run(TrainingArguments, "gradient_accumulation_steps", by=_BY_SCHEDULE)
    train_sampling_strategy: str = set_per_run(TrainingArguments, "train_sampling_strategy", by=_BY_SCHEDULE)
    learning_rate: float = set_per_run(TrainingArguments, "learning_rate", by="ScionBatchArguments' learning rates")
    eval_strategy: str = set_per_run(TrainingArguments, "eval_strategy", by="ScionBatchArguments' `eval_points`")
    eval_steps: float | None = set_per_run(TrainingArguments, "eval_steps", by="ScionBatchArguments' `eval_points`")
    logging_steps: float = set_per_run(TrainingArguments, "logging_steps", by="ScionBatchArguments' `eval_points`")
    save_strategy: str = set_per_run(TrainingArguments, "save_strategy", by="the recipe ('no')")
    seed: int = set_per_run(TrainingArguments, "seed", by="ScionBatchArguments' `seeds`")

    def __post_init__(self):
        check_finite_fields(self)
        super().__post_init__()


def parser(argv: list[str] | None = None) -> TrlParser:
    """The recipe's parser (``argv`` is parsed by :func:`main`; ``hf-ext run scion_batch --help`` lists the fields)."""
    return settings_parser(ScionBatchArguments, ScheduledTrainingArguments)


def corpus_data(script_args: ScionBatchArguments):
    """The tokenizer, the training token stream and the held-out blocks of ``seq_len`` tokens."""
    tokenizer = stdlib_bpe_tokenizer(script_args.vocab_size)
    corpus = stdlib_corpus(tokenizer, script_args.seq_len, max_files=script_args.corpus_files, seed=0)
    stream = torch.tensor(corpus["train"]["input_ids"]).flatten()
    held_out = corpus["validation"].select(range(min(script_args.eval_blocks, len(corpus["validation"]))))
    return tokenizer, stream, held_out.remove_columns("attention_mask")


def train_run(optimizer_name, schedule, lr, seed, data, script_args, training_args, out: Path) -> dict:
    """One pretraining run through the stock Trainer; its held-out curve and the constants at its end."""
    tokenizer, stream, held_out = data
    max_seq = max(s.seq_len for s in schedule.stages)
    model = llama_from_scratch(
        tokenizer,
        script_args.hidden_size,
        script_args.num_layers,
        script_args.num_heads,
        max_positions=max_seq,
        seed=seed,
    )
    callback = BatchScheduleCallback(**schedule.settings)
    every = max(1, schedule.total_steps // script_args.eval_points)
    args = run_config(
        TrainingArguments,
        training_args,
        output_dir=str(out),
        max_steps=schedule.total_steps,
        per_device_train_batch_size=1,
        gradient_accumulation_steps=1,
        train_sampling_strategy="sequential",
        learning_rate=lr,
        eval_strategy="steps",
        eval_steps=every,
        logging_steps=every,
        save_strategy="no",
        seed=seed,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=PackedStream(stream, schedule, micro_batches_per_step=args.world_size, seed=seed),
        eval_dataset=held_out,
        data_collator=PackedStreamCollator(),
        callbacks=[callback],
        # The Trainer builds it from the model (a ready optimizer is refused under FSDP; accelerate then gives it the
        # sharded parameters): a factory, called as factory()(model, lr=lr).
        optimizer_cls_and_kwargs=(lambda: functools.partial(build_optimizer, optimizer_name), {"lr": lr}),
    )
    train_resumable(trainer, several_runs=True)
    final = trainer.evaluate()["eval_loss"]
    curve = [(e["step"], e["eval_loss"]) for e in trainer.state.log_history if "eval_loss" in e]
    curve = sorted(dict(curve).items())  # the last step may be logged twice
    row = {"final_loss": final, "steps": schedule.total_steps, "tokens": schedule.total_tokens, "curve": curve}
    if optimizer_name == "scion":
        row["constants"] = dataclasses.asdict(_constants(model, stream, script_args, seed))
    return row


def _constants(model, stream, script_args, seed):
    blocks = 4 * script_args.seq_len
    order = torch.randperm(len(stream) // blocks, generator=torch.Generator().manual_seed(seed + 7919))
    batches = []
    for index in order[: script_args.constant_batches].tolist():
        ids = stream[index * blocks : (index + 1) * blocks].view(4, script_args.seq_len)
        batches.append({"input_ids": ids, "labels": ids})
    whole = unsharded_copy(model)  # measure_constants takes whole tensors: each rank measures one process's constants
    return measure_constants(whole, Scion(whole), batches)


def _sweep_point(name, schedule, base_lr, data, script_args, training_args, label) -> dict:
    """All seeds at each step-size multiplier; keeps the multiplier with the lowest mean held-out loss."""
    tried = {}
    for multiplier in script_args.lr_multipliers:
        lr = base_lr * multiplier
        runs = [
            train_run(
                name,
                schedule,
                lr,
                seed,
                data,
                script_args,
                training_args,
                Path(training_args.output_dir) / "runs" / f"{label}_lr{lr:.3g}_seed{seed}",
            )
            for seed in script_args.seeds
        ]
        tried[lr] = runs
        PartialState().print(f"{label} lr {lr:.3g}: held-out loss {[round(r['final_loss'], 4) for r in runs]}")
    best_lr = min(tried, key=lambda lr: statistics.fmean(r["final_loss"] for r in tried[lr]))
    losses = [r["final_loss"] for r in tried[best_lr]]
    return {
        "label": label,
        "optimizer": name,
        "batch_size": schedule.stages[-1].batch_size,
        "tokens_per_step": schedule.stages[-1].tokens_per_step,
        "schedule": repr(schedule),
        "lr": best_lr,
        "final_loss": statistics.fmean(losses),
        "final_loss_std": statistics.stdev(losses) if len(losses) > 1 else 0.0,
        "steps": schedule.total_steps,
        "tokens": schedule.total_tokens,
        "runs": tried[best_lr],
        "seeds": script_args.seeds,
        "tried": {f"{lr:.6g}": [r["final_loss"] for r in runs] for lr, runs in tried.items()},
    }


def _mean_constants(runs: list[dict]) -> dict:
    return {k: statistics.fmean(r["constants"][k] for r in runs) for k in runs[0]["constants"]}


def main(argv: list[str] | None = None) -> dict:
    script_args, training_args = parser(argv).parse_args_and_config(argv)
    state = PartialState()
    data = corpus_data(script_args)
    multiple = training_args.world_size
    budget, seq = script_args.token_budget, script_args.seq_len

    fixed = []
    for batch in script_args.batch_sizes:
        schedule = BatchSchedule([budget], batch, seq, multiple=multiple)
        base = script_args.scion_lr * (batch / script_args.lr_reference_batch) ** script_args.lr_batch_exponent
        fixed.append(_sweep_point("scion", schedule, base, data, script_args, training_args, f"scion_B{batch}"))
    best = min(fixed, key=lambda row: row["final_loss"])

    adaptive = BatchSchedule.ending_at(
        best["tokens_per_step"],
        budget,
        script_args.adaptive_stages,
        script_args.adaptive_stage_ratio,
        seq,
        script_args.seq_share,
        multiple=multiple,
    )
    first_lr = best["lr"] / adaptive.stages[-1].lr_factor  # stage 0's step size: the last stage runs at the best's
    rows = [_sweep_point("scion", adaptive, first_lr, data, script_args, training_args, "scion_adaptive")]
    best_schedule = BatchSchedule([budget], best["batch_size"], seq, multiple=multiple)
    for name, lr in (("adamw", script_args.adamw_lr), ("muon", script_args.muon_lr)):
        rows.append(
            _sweep_point(name, best_schedule, lr, data, script_args, training_args, f"{name}_B{best['batch_size']}")
        )
    adaptive_row, adamw_row, muon_row = rows

    initial = llama_from_scratch(
        data[0],
        script_args.hidden_size,
        script_args.num_layers,
        script_args.num_heads,
        max_positions=seq,
        seed=script_args.seeds[0],
    )
    predictions = {
        "at_init": critical_batch_size(budget, _constants(initial, data[1], script_args, 0)).to_dict(),
        "at_end_of_best": critical_batch_size(budget, Constants(**_mean_constants(best["runs"]))).to_dict(),
    }
    results = {
        "fixed": fixed,
        "best_fixed": {k: best[k] for k in ("label", "batch_size", "tokens_per_step", "lr", "final_loss", "steps")},
        "adaptive": adaptive_row,
        "adamw": adamw_row,
        "muon": muon_row,
        "predicted": predictions,
        "adaptive_steps_to_best_fixed_loss": steps_to_reach(adaptive_row["runs"], best["final_loss"]),
        "script_args": dataclasses.asdict(script_args),
        "world_size": multiple,
    }
    for key, prediction in predictions.items():
        ratio = prediction["tokens_per_step"] / best["tokens_per_step"]
        results[f"predicted_over_best_{key}"] = ratio
        state.print(
            f"predicted critical tokens/step ({key}): {prediction['tokens_per_step']:.0f} "
            f"(lr* {prediction['lr']:.3g}), empirical best {best['tokens_per_step']} ({ratio:.2f}x)"
        )
    if state.is_main_process:
        out = write_results(training_args.output_dir, results)
        write_csv(out / "runs.csv", [*fixed, *rows])
        plot_results(results, out)
        state.print(f"wrote {out / 'results.json'}, {out / 'runs.csv'}, {out / 'sweep.png'} and {out / 'curves.png'}")
    return results


def steps_to_reach(runs: list[dict], target: float) -> float | None:
    """Mean over seeds of the first evaluated step whose held-out loss is <= ``target`` (None if one never does)."""
    steps = [next((step for step, loss in run["curve"] if loss <= target), None) for run in runs]
    return None if None in steps else statistics.fmean(steps)


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["label", "optimizer", "tokens_per_step", "steps", "tokens", "lr", "seed", "final_loss"])
        for row in rows:
            for seed_run, seed in zip(row["runs"], row["seeds"], strict=True):
                writer.writerow(
                    [
                        row["label"],
                        row["optimizer"],
                        row["tokens_per_step"],
                        row["steps"],
                        row["tokens"],
                        row["lr"],
                        seed,
                        seed_run["final_loss"],
                    ]
                )


def plot_results(results: dict, out: Path) -> None:
    def point(label: str, row: dict) -> tuple:
        x = math.log2(row["tokens_per_step"])  # the adaptive schedule's last stage
        return label, [x] * len(row["runs"]), [r["final_loss"] for r in row["runs"]]

    fixed = results["fixed"]
    panels = {
        "Scion, fixed batch: held-out loss": [point(f"B={row['batch_size']}", row) for row in fixed],
        "at the best fixed batch: held-out loss": [
            point(
                "Scion " + results["best_fixed"]["label"],
                next(r for r in fixed if r["label"] == results["best_fixed"]["label"]),
            ),
            *(point(key, results[key]) for key in ("adaptive", "adamw", "muon")),
        ],
    }
    plot_labelled_points(panels, out / "sweep.png", "Scion at a fixed token budget", "log2 tokens per step")
    curves = {
        "scion " + results["best_fixed"]["label"]: next(
            r for r in fixed if r["label"] == results["best_fixed"]["label"]
        )["runs"]
    }
    curves |= {key: results[key]["runs"] for key in ("adaptive", "adamw", "muon")}
    plot_seed_curves(
        {name: [run["curve"] for run in runs] for name, runs in curves.items()},
        out / "curves.png",
        "Held-out loss during training",
        ylabel="held-out loss",
    )


if __name__ == "__main__":
    run_as_script(main)
