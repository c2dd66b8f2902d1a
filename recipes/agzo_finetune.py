"""AGZO vs MeZO: zeroth-order fine-tuning of MiniLM on docstring classification, same forward budget.

    hf-ext run agzo_finetune                  # the demo: 400 steps, both methods at once, one process each
    hf-ext run agzo_finetune seeds="0 1 2"    # the comparison over seeds
    accelerate launch recipes/agzo_finetune.py --config recipes/configs/agzo_finetune.yaml

Fine-tunes all-MiniLM-L6-v2 with a fresh classification head on standard-library docstrings labelled
by package, once with AGZO and once with MeZO from the same initial model, for the same number of
steps (both two-point, so the same number of forward passes). The zeroth-order settings are
``AGZOConfig``'s own fields; MeZO takes the ones the two share (``eps``, ``other_params``,
``weight_decay``, ...), so both methods perturb and decay the same weights. Prints validation
accuracy before and after each, writes ``results.json`` and ``loss.png`` to ``output_dir``, and ends
with a table of both methods. The shipped config is sized for a first look (about 11 minutes on 2 CPU
cores, the two methods on two processes of one thread each); the comparison over seeds is the override above.
The runs go ``workers`` at a time to local processes, or to any ``concurrent.futures.Executor`` passed to
``main(argv, executor=...)`` (Dask, Ray: docs/cluster.md).
"""

import contextlib
import os
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from accelerate import PartialState
from matplotlib.figure import Figure
from transformers import DataCollatorWithPadding, TrainingArguments, set_seed
from trl import TrlParser

from hf_ext._settings import SettingsError
from hf_ext._validation import check_finite_fields
from hf_ext.data import docstring_classification
from hf_ext.models import load_minilm
from hf_ext.plotting import loss_curve
from hf_ext.recipes._jobs import check_workers, run_all, workers_field
from hf_ext.recipes._plotting import display_name, plot_seed_curves
from hf_ext.recipes._results import write_results
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import given_settings, library_field, run_config, set_per_run, settings_parser
from hf_ext.recipes._training import train_measured
from hf_ext.zo import AGZOConfig, MeZOConfig, ZOTrainer

METHODS = ("agzo", "mezo")
FSDP_WRAP_VARIABLE = "FSDP_TRANSFORMER_CLS_TO_WRAP"


@dataclass
class AGZOFinetuneArguments:
    methods: list[str] = field(default_factory=lambda: list(METHODS), metadata={"help": f"Any of {list(METHODS)}."})
    num_classes: int = field(default=4, metadata={"help": "Docstring classes (package families), 2 to 8."})
    max_length: int = field(default=64, metadata={"help": "Tokens per docstring after truncation."})
    agzo_learning_rate: float = field(default=1e-2, metadata={"help": "AGZO's learning rate."})
    mezo_learning_rate: float = field(default=7e-4, metadata={"help": "MeZO's learning rate."})
    workers: int = workers_field(
        launch="Under a launch of several processes, which train each run together, it is 1: the shipped "
        "config's value follows the launch, a value you set is refused."
    )
    seeds: list[int] = field(
        default_factory=list,
        metadata={
            "help": "Seeds to run each method with (each sets the data split, the new head and the perturbation "
            "stream); the table shows the mean, spread and AGZO - MeZO paired by seed. Empty: `seed` alone."
        },
    )

    def __post_init__(self):
        check_finite_fields(self)
        unknown = sorted(set(self.methods) - set(METHODS))
        if unknown or not self.methods:
            raise ValueError(f"`methods` must be a non-empty subset of {list(METHODS)}, got {self.methods}")
        if len(set(self.seeds)) != len(self.seeds) or any(seed < 0 for seed in self.seeds):
            raise ValueError(f"`seeds` must be distinct non-negative integers, got {self.seeds}")
        check_workers("AGZOFinetuneArguments", self.workers)
        for name in ("agzo_learning_rate", "mezo_learning_rate"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"AGZOFinetuneArguments: `{name}` must be >= 0, got {getattr(self, name)}")


@dataclass
class AGZOFinetuneZOConfig(AGZOConfig):
    """AGZOConfig, its ``target_modules`` one string (``'all-linear'`` or a regex): a parser keeps its default."""

    target_modules: str = library_field(AGZOConfig, "target_modules")


@dataclass
class AGZOFinetuneTrainingArguments(TrainingArguments):
    """TrainingArguments less what each method sets: its own learning rate, and no weight decay of the
    Trainer's (ZOTrainer decays by the ZO config's ``weight_decay``)."""

    learning_rate: float = set_per_run(
        TrainingArguments, "learning_rate", by="`agzo_learning_rate`/`mezo_learning_rate`"
    )
    weight_decay: float = set_per_run(
        TrainingArguments, "weight_decay", by="AGZOConfig's `weight_decay` (ZOTrainer's own)"
    )

    def __post_init__(self):
        check_finite_fields(self)
        super().__post_init__()


def _accuracy(prediction) -> dict[str, float]:
    return {"accuracy": float(np.mean(prediction.predictions.argmax(-1) == prediction.label_ids))}


def run_method(
    method: str,
    script_args: AGZOFinetuneArguments,
    zo_config: AGZOFinetuneZOConfig,
    training_args: AGZOFinetuneTrainingArguments,
    data,
    seed: int,
) -> dict:
    """Fine-tune a fresh copy of the model with one method and seed; returns its accuracies, losses and budget."""
    set_seed(seed)
    model, tokenizer = load_minilm(num_labels=script_args.num_classes)
    zo_class, lr = AGZOConfig, script_args.agzo_learning_rate
    if method == "mezo":
        zo_class, lr = MeZOConfig, script_args.mezo_learning_rate
    output_dir = str(Path(training_args.output_dir) / method / f"seed_{seed}")
    args = run_config(
        TrainingArguments, training_args, learning_rate=lr, weight_decay=0.0, output_dir=output_dir, seed=seed
    )
    trainer = ZOTrainer(
        model,
        args,
        train_dataset=data["train"],
        eval_dataset=data["validation"],
        data_collator=DataCollatorWithPadding(tokenizer),
        processing_class=tokenizer,
        compute_metrics=_accuracy,
        zo_config=run_config(zo_class, zo_config),
    )
    before, after, seconds = train_measured(trainer, trainer.evaluate)
    history = trainer.state.log_history
    return {
        "accuracy_before": before["eval_accuracy"],
        "accuracy_after": after["eval_accuracy"],
        "eval_loss_after": after["eval_loss"],
        "forward_passes": sum(entry.get("zo/forward_passes", 0) for entry in history),
        "steps": trainer.state.global_step,
        "train_seconds": seconds,
        "learning_rate": lr,
        "loss": loss_curve(history),
    }


def run_seeded(
    method: str,
    seed: int,
    script_args: AGZOFinetuneArguments,
    zo_config: AGZOFinetuneZOConfig,
    training_args: AGZOFinetuneTrainingArguments,
) -> dict:
    """One (method, seed) run from its seed's data split: a job of its own, so that runs can go to ``workers``."""
    _, tokenizer = load_minilm()
    data = docstring_classification(num_classes=script_args.num_classes, seed=seed)
    data = data.map(
        lambda rows: tokenizer(rows["text"], truncation=True, max_length=script_args.max_length),
        batched=True,
        remove_columns=["text"],
    )
    r = run_method(method, script_args, zo_config, training_args, data, seed)
    PartialState().print(
        f"{method}, seed {seed}: validation accuracy {r['accuracy_before']:.3f} -> {r['accuracy_after']:.3f} "
        f"after {r['steps']} steps / {r['forward_passes']} forward passes ({r['train_seconds']:.0f} s)"
    )
    return r


def summarize(runs: dict[int, dict]) -> dict:
    """One method's runs by seed: the mean of each number, the spread of the accuracy after, and the runs."""
    after = np.array([run["accuracy_after"] for run in runs.values()])
    first = next(iter(runs.values()))
    return {
        "accuracy_before": float(np.mean([run["accuracy_before"] for run in runs.values()])),
        "accuracy_after": float(after.mean()),
        "accuracy_after_std": float(after.std(ddof=1)) if len(after) > 1 else 0.0,
        "accuracy_after_min": float(after.min()),
        "accuracy_after_max": float(after.max()),
        "eval_loss_after": float(np.mean([run["eval_loss_after"] for run in runs.values()])),
        "forward_passes": first["forward_passes"],
        "steps": first["steps"],
        "train_seconds": float(sum(run["train_seconds"] for run in runs.values())),
        "learning_rate": first["learning_rate"],
        "runs": runs,
    }


def plot_losses(results: dict, path: Path) -> Figure:
    """Each method's training loss against the step (mean and spread over seeds), under its display name."""
    return plot_seed_curves(
        {method: [run["loss"] for run in r["runs"].values()] for method, r in results.items()},
        path,
        "Zeroth-order fine-tuning of MiniLM on docstring classes",
    )


def results_table(results: dict[str, dict]) -> str:
    """The headline comparison as a Markdown table, one row per method, and AGZO - MeZO paired by seed: what the
    run prints last."""
    seeds = list(next(iter(results.values()))["runs"])
    header = "| method | seeds | steps | accuracy before | accuracy after (mean +- std, min-max) | eval loss |"
    lines = [header + " seconds |", "|---" * 7 + "|"]
    for method, r in results.items():
        after = f"{r['accuracy_after']:.3f} +- {r['accuracy_after_std']:.3f} ({r['accuracy_after_min']:.3f}-"
        after += f"{r['accuracy_after_max']:.3f})"
        cells = (len(seeds), r["steps"], f"{r['accuracy_before']:.3f}", after, f"{r['eval_loss_after']:.3f}")
        lines.append(f"| {display_name(method)} | " + " | ".join(map(str, cells)) + f" | {r['train_seconds']:.0f} |")
    if {"agzo", "mezo"} <= results.keys():
        gaps = np.array(
            [results["agzo"]["runs"][s]["accuracy_after"] - results["mezo"]["runs"][s]["accuracy_after"] for s in seeds]
        )
        wins = int((gaps > 0).sum())
        spread = f" +- {gaps.std(ddof=1):.3f}" if len(gaps) > 1 else ""
        lines.append(f"\nAGZO - MeZO, paired by seed: {gaps.mean():+.3f}{spread}; AGZO ahead on {wins} of {len(gaps)}")
    return "\n".join(lines)


def parser(argv: list[str] | None = None) -> TrlParser:
    """The parser ``main`` reads its settings with (the same for every ``argv``)."""
    return settings_parser(AGZOFinetuneArguments, AGZOFinetuneZOConfig, AGZOFinetuneTrainingArguments)


@contextlib.contextmanager
def wrapping_encoder_layers_under_fsdp():
    """Under FSDP2, shard MiniLM layer by layer (``BertLayer``) for the duration of a run, leaving the process's
    environment as it was afterwards.

    accelerate 1.16 otherwise shards MiniLM's ``BertEmbeddings`` (one of its ``_no_split_modules``) and then its
    word embeddings again as "the input embeddings", which fails. The variable is read when the Trainer's
    Accelerator starts and changes nothing without FSDP; a caller's own setting wins.
    """
    previous = os.environ.get(FSDP_WRAP_VARIABLE)
    os.environ.setdefault(FSDP_WRAP_VARIABLE, "BertLayer")
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(FSDP_WRAP_VARIABLE, None)


def launch_workers(workers: int, processes: int, given: bool) -> int:
    """The runs at once: ``workers``, or 1 under a launch of several processes, which train each run together.

    A ``workers`` the user did not write (the shipped config's) follows the launch; one they wrote is refused.
    """
    if processes == 1 or workers == 1:
        return workers
    if given:
        raise SettingsError(
            f"`workers` must be 1 under a launch of {processes} processes (they train each run together), got {workers}"
        )
    return 1


def main(argv: list[str] | None = None, executor: Executor | None = None) -> dict:
    """Fine-tune MiniLM with each method and seed, print the comparison and write it to ``output_dir``; the runs go
    to ``executor`` when given (a Dask or Ray executor), else as ``workers`` says."""
    with wrapping_encoder_layers_under_fsdp():
        return _compare(argv, executor)


def _compare(argv: list[str] | None, executor: Executor | None) -> dict:
    script_args, zo_config, training_args = parser(argv).parse_args_and_config(argv)
    state = PartialState()
    if executor is not None and state.num_processes > 1:
        raise ValueError(
            f"main: `executor` runs each run in one of its workers; under a launch of {state.num_processes} "
            "processes, which train each run together, pass none"
        )
    workers = launch_workers(script_args.workers, state.num_processes, "workers" in given_settings(argv))
    seeds = script_args.seeds or [training_args.seed]
    jobs = [(method, seed, script_args, zo_config, training_args) for seed in seeds for method in script_args.methods]
    done = run_all(run_seeded, jobs, workers, "agzo_finetune", executor, threads=1)
    runs = {method: {} for method in script_args.methods}
    for (method, seed, *_), run in zip(jobs, done, strict=True):
        runs[method][seed] = run
    results = {method: summarize(by_seed) for method, by_seed in runs.items()}
    if state.is_main_process:
        out = write_results(training_args.output_dir, results)
        plot_losses(results, out / "loss.png")
        state.print(f"wrote {out / 'results.json'} and {out / 'loss.png'}\n\n{results_table(results)}")
    return results


if __name__ == "__main__":
    run_as_script(main)
