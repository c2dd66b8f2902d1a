"""Pretrain a small Llama at several weight decays, then fine-tune each base on two downstream tasks.

    hf-ext run wd_plasticity                                  # shipped config, ~15 min on 2 CPU cores
    hf-ext run wd_plasticity weight_decays="0.0 1.0" seed=1
    hf-ext run wd_plasticity --config wd_plasticity_quick     # seconds: the end-to-end check

Every base model is the same Llama architecture from the same initialisation, trained with
AdamW (decoupled weight decay; the Trainer leaves norms and biases undecayed) for the same
steps on the same standard-library source blocks with a small BPE vocabulary; only the weight
decay differs. While pretraining, :class:`hf_ext.plasticity.PlasticityCallback` logs probe
accuracy, attention statistics, the train/validation gap and weight statistics. Then each base
is fine-tuned with the same budget on (1) docstring module-family classification with a fresh
head and (2) arithmetic as LM fine-tuning (greedy exact match on held-out problems).

Writes ``wd_<value>/results.json`` (one row), ``wd_<value>/plasticity.json`` and ``wd_<value>/base``
(the pretrained model and tokenizer) per weight decay, then ``results.json``, ``table.md`` and
``plasticity.png`` (base loss vs downstream score) for the sweep;
``hf_ext.plasticity.plasticity_report(output_dir)`` prints the table again.
"""

import dataclasses
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from accelerate import PartialState
from transformers import Trainer, TrainingArguments
from trl import TrlParser

from hf_ext._validation import check_counts, check_finite_fields
from hf_ext.data import arithmetic_dataset, docstring_classification, stdlib_bpe_tokenizer, stdlib_corpus
from hf_ext.models import llama_from_scratch
from hf_ext.plasticity import (
    PlasticityCallback,
    arithmetic_after_finetuning,
    classification_after_finetuning,
    format_table,
    plot_sweep,
)
from hf_ext.recipes._results import write_results
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import run_config, set_per_run, settings_parser
from hf_ext.recipes._training import train_resumable


@dataclass
class PlasticityArguments:
    weight_decays: list[float] = field(
        default_factory=lambda: [0.0, 0.1, 0.3, 1.0], metadata={"help": "Pretraining weight decays to compare."}
    )
    vocab_size: int = field(default=2048, metadata={"help": "BPE vocabulary trained on standard-library source."})
    hidden_size: int = field(default=128, metadata={"help": "Model width (MLP 4x)."})
    num_layers: int = field(default=4, metadata={"help": "Decoder layers."})
    num_heads: int = field(default=4, metadata={"help": "Attention heads."})
    block_size: int = field(default=128, metadata={"help": "Tokens per pretraining block."})
    corpus_files: int = field(
        default=100, metadata={"help": "Standard-library files in the pretraining corpus (few: several epochs)."}
    )
    probe_every: int = field(default=250, metadata={"help": "Pretraining steps between plasticity measurements."})
    probe_examples: int = field(
        default=320, metadata={"help": "Docstrings in the linear-probe set (half fit, half scored)."}
    )
    loss_gap_blocks: int = field(default=64, metadata={"help": "Train and validation blocks for the loss gap."})
    num_classes: int = field(default=4, metadata={"help": "Docstring module families to classify (2..8)."})
    classification_steps: int = field(default=120, metadata={"help": "Fine-tuning steps for classification."})
    arithmetic_difficulty: int = field(default=2, metadata={"help": "Arithmetic difficulty, 1 to 4."})
    arithmetic_train: int = field(default=4000, metadata={"help": "Arithmetic fine-tuning problems."})
    arithmetic_test: int = field(
        default=128, metadata={"help": "Held-out arithmetic problems (none seen in training)."}
    )
    arithmetic_steps: int = field(default=300, metadata={"help": "Fine-tuning steps for arithmetic."})
    finetune_learning_rate: float = field(default=1e-3, metadata={"help": "Learning rate of both fine-tunings."})
    finetune_batch_size: int = field(
        default=16,
        metadata={"help": "Global batch size of both fine-tunings, split evenly across the processes of a launch."},
    )

    def __post_init__(self):
        check_finite_fields(self)
        check_counts(self, ("hidden_size", "num_heads"))
        if self.hidden_size % self.num_heads:  # LlamaConfig refused it once the corpus and tokenizer were built
            raise ValueError(
                f"PlasticityArguments: `hidden_size` ({self.hidden_size}) must be a multiple of `num_heads` "
                f"({self.num_heads})"
            )
        if not self.weight_decays:
            raise ValueError("`weight_decays` must list at least one weight decay, got an empty sweep")
        negative = [value for value in self.weight_decays if value < 0]
        if negative:
            raise ValueError(f"`weight_decays` must all be >= 0, got {negative}")
        if len(set(self.weight_decays)) != len(self.weight_decays):
            raise ValueError(f"`weight_decays` must not repeat a value, got {self.weight_decays}")


@dataclass
class PretrainingArguments(TrainingArguments):
    """TrainingArguments of the pretraining, less its weight decay: each base model's is one of ``weight_decays``
    (the fine-tunings build their own from these, with the ``finetune_*`` and ``*_steps`` settings)."""

    weight_decay: float = set_per_run(TrainingArguments, "weight_decay", by="PlasticityArguments' `weight_decays`")

    def __post_init__(self):
        check_finite_fields(self)
        super().__post_init__()


def parser(argv: list[str] | None = None) -> TrlParser:
    """The parser ``main`` reads its settings with (the same for every ``argv``)."""
    return settings_parser(PlasticityArguments, PretrainingArguments)


def downstream_data(tokenizer, script_args: PlasticityArguments, seed: int) -> dict:
    """The probe set, the classification splits and the arithmetic train/test rows (disjoint problems)."""
    classification = docstring_classification(script_args.num_classes, seed=seed)
    probe_rows = classification["train"].select(range(min(script_args.probe_examples, len(classification["train"]))))
    probe = probe_rows.map(
        lambda rows: tokenizer(rows["text"], truncation=True, max_length=64, padding="max_length"),
        batched=True,
        remove_columns=["text"],
    )
    train = arithmetic_dataset(script_args.arithmetic_train, script_args.arithmetic_difficulty, seed=seed)
    seen = set(train["expression"])
    test = arithmetic_dataset(4 * script_args.arithmetic_test, script_args.arithmetic_difficulty, seed=seed + 1)
    test = test.filter(lambda row: row["expression"] not in seen)
    if len(test) == 0:
        raise ValueError(
            f"every held-out arithmetic problem at difficulty {script_args.arithmetic_difficulty} is in the "
            f"{script_args.arithmetic_train} training problems: lower `arithmetic_train` or raise the difficulty"
        )
    test = test.select(range(min(script_args.arithmetic_test, len(test))))
    return {"probe": probe, "classification": classification, "arithmetic": (train, test)}


def pretraining_trainer(weight_decay, tokenizer, corpus, probe, script_args, training_args, out: Path):
    """A fresh model from the shared initialisation, in a Trainer whose AdamW decays at ``weight_decay``.

    The Trainer's own parameter grouping applies: norm weights and biases are not decayed.
    """
    args = run_config(TrainingArguments, training_args, weight_decay=weight_decay, output_dir=str(out / "pretraining"))
    model = llama_from_scratch(
        tokenizer,
        script_args.hidden_size,
        script_args.num_layers,
        script_args.num_heads,
        max_positions=script_args.block_size,
        seed=training_args.seed,
    )
    gap_blocks = range(min(script_args.loss_gap_blocks, len(corpus["validation"])))
    callback = PlasticityCallback(
        probe,
        every=script_args.probe_every,
        loss_datasets=(corpus["train"].select(gap_blocks), corpus["validation"].select(gap_blocks)),
        output_file=out / "plasticity.json",
    )
    trainer = Trainer(model=model, args=args, train_dataset=corpus["train"], eval_dataset=corpus["validation"])
    callback.attach(trainer)
    return trainer, callback


def pretrain(weight_decay, tokenizer, corpus, probe, script_args, training_args, out: Path):
    """One base model at ``weight_decay``: trained model, validation loss, last plasticity measurement, seconds."""
    trainer, callback = pretraining_trainer(weight_decay, tokenizer, corpus, probe, script_args, training_args, out)
    start = time.perf_counter()
    train_resumable(trainer, several_runs=True)
    seconds = time.perf_counter() - start
    trainer.save_model(str(out / "base"))
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(str(out / "base"))
    return trainer.model, trainer.evaluate()["eval_loss"], callback.history[-1], seconds


def _layer_mean(measurement: dict, name: str) -> float:
    values = [value for key, value in measurement.items() if key.startswith(f"plasticity/{name}/layer_")]
    return statistics.fmean(values)


def finetuning_args(training_args: PretrainingArguments, script_args: PlasticityArguments, out: Path, steps: int):
    """The same fine-tuning budget for every base model: no weight decay, linear decay after a short warmup, and
    ``finetune_batch_size`` sequences a step however many processes share them."""
    processes, batch = training_args.world_size, script_args.finetune_batch_size
    if batch % processes:
        raise ValueError(f"`finetune_batch_size` must be a multiple of the {processes} processes, got {batch}")
    per_device = batch // processes
    return run_config(
        TrainingArguments,
        training_args,
        output_dir=str(out),
        max_steps=steps,
        learning_rate=script_args.finetune_learning_rate,
        per_device_train_batch_size=per_device,
        per_device_eval_batch_size=per_device,
        weight_decay=0.0,
        lr_scheduler_type="linear",
        warmup_steps=max(1, steps // 10),
        logging_steps=max(1, steps // 5),
    )


def sweep_point(weight_decay, tokenizer, corpus, data, script_args, training_args) -> dict:
    """Pretrain at ``weight_decay``, fine-tune on both tasks, and return the table row."""
    out = Path(training_args.output_dir) / f"wd_{weight_decay:g}"
    model, base_loss, measurement, seconds = pretrain(
        weight_decay, tokenizer, corpus, data["probe"], script_args, training_args, out
    )
    classification = classification_after_finetuning(
        model,
        tokenizer,
        data["classification"],
        finetuning_args(training_args, script_args, out / "classification", script_args.classification_steps),
    )
    arithmetic = arithmetic_after_finetuning(
        model,
        tokenizer,
        *data["arithmetic"],
        finetuning_args(training_args, script_args, out / "arithmetic", script_args.arithmetic_steps),
    )
    return {
        "weight_decay": weight_decay,
        "base_validation_loss": base_loss,
        "loss_gap": measurement["plasticity/loss_gap"],
        "probe_accuracy": _layer_mean(measurement, "probe_accuracy"),
        "probe_accuracy_last_layer": measurement[f"plasticity/probe_accuracy/layer_{script_args.num_layers - 1}"],
        "qk_spectral_norm": _layer_mean(measurement, "qk_spectral_norm"),
        "qk_frobenius_norm": _layer_mean(measurement, "qk_frobenius_norm"),
        "attention_entropy": _layer_mean(measurement, "attention_entropy"),
        "weight_norm": measurement["plasticity/weight_norm"],
        "effective_rank_mean": measurement["plasticity/effective_rank_mean"],
        "classification_accuracy": classification["accuracy"],
        "classification_loss": classification["loss"],
        "arithmetic_exact_match": arithmetic["exact_match"],
        "arithmetic_loss": arithmetic["loss"],
        "pretraining_seconds": seconds,
    }


def main(argv: list[str] | None = None) -> dict:
    script_args, training_args = parser(argv).parse_args_and_config(argv)
    state = PartialState()
    tokenizer = stdlib_bpe_tokenizer(script_args.vocab_size)
    corpus = stdlib_corpus(tokenizer, script_args.block_size, max_files=script_args.corpus_files, seed=0)
    data = downstream_data(tokenizer, script_args, training_args.seed)
    out = Path(training_args.output_dir)
    rows = []
    for weight_decay in script_args.weight_decays:
        row = sweep_point(weight_decay, tokenizer, corpus, data, script_args, training_args)
        rows.append(row)
        if state.is_main_process:
            write_results(out / f"wd_{weight_decay:g}", row)
        state.print(
            f"weight decay {weight_decay:g}: base val loss {row['base_validation_loss']:.4f}, probe "
            f"{row['probe_accuracy']:.3f}, docstring acc {row['classification_accuracy']:.3f}, arithmetic exact "
            f"{row['arithmetic_exact_match']:.3f} (loss {row['arithmetic_loss']:.4f})"
        )
    results = {"rows": rows, "script_args": dataclasses.asdict(script_args), "seed": training_args.seed}
    if state.is_main_process:
        write_results(out, results)
        table = format_table(rows)
        (out / "table.md").write_text(table + "\n")
        plot_sweep([rows], out / "plasticity.png")
        state.print(f"{table}\nwrote {out / 'results.json'}, {out / 'table.md'} and {out / 'plasticity.png'}")
    return results


if __name__ == "__main__":
    run_as_script(main)
