"""Curvature from weight-space symmetries: each group's estimate against exact Hessians, then training with it.

    hf-ext run symmetry_curvature                  # shipped config (benchmarks/symmetry_curvature.py runs it)
    hf-ext run symmetry_curvature --config symmetry_curvature_quick   # seconds: the end-to-end check

(a) Accuracy. An MLP on scikit-learn's digits and a tiny Llama on standard-library source are trained
briefly with AdamW; then, for each measured weight matrix, the exact Hessian of the loss on held data
(``torch.func.hessian`` through ``functional_call``) is compared with estimates built from
``gradient_batches`` minibatch gradients: each symmetry group's ``S = mean R2(g g^T)``
(:class:`hf_ext.optim.SymmetryGroup`), the full ``mean g g^T`` (no symmetry), KFAC-style
``E[dd^T] kron E[aa^T]`` (output gradients and inputs of the layer) and Shampoo-style
``(L kron R)^(1/2)`` (``L = mean g g^T``, ``R = mean g^T g``). Reported per estimate, for ``H = S^(1/2)`` (the
preconditioner) and for ``S`` itself: the Frobenius cosine with the Hessian, the relative error after
the best scalar rescaling, the mean cosine of ``H u`` with ``Hessian u`` over random directions ``u``
and over secants (the weight's changes in the last pretraining steps), and the numbers stored. The
diagonal (Adam-like) estimate is the group ``scaling:scaling``.

(b) Optimization at equal steps, ``seeds`` each: the MLP on digits (plain loop) and a small Llama on
the offline corpus (stock ``Trainer``) with AdamW, :class:`hf_ext.optim.SymmetryCurvature` (default
rule: permutations of each matrix's output units), a Shampoo-style baseline (our optimizer with the
one-sided ``orthogonal x identity`` group: ``G (E[G^T G])^(-1/2)``) and ``torch.optim.Muon`` (+ AdamW):
held-out loss and step time as a ratio to AdamW.

The measurements of (a) live in :mod:`hf_ext.optim.symmetry_curvature.estimates`; this recipe picks the models,
data and layers. Writes ``results.json``, ``accuracy.csv``, ``training.csv``, ``tradeoff.png`` and ``training.png``.
"""

import dataclasses
import math
import statistics
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch
from accelerate import PartialState
from torch import nn
from tqdm.auto import tqdm
from transformers import Trainer, TrainingArguments
from trl import TrlParser

from hf_ext._validation import check_finite_fields
from hf_ext.data import digits, stdlib_bpe_tokenizer, stdlib_corpus
from hf_ext.models import digits_mlp, llama_from_scratch
from hf_ext.optim.symmetry_curvature import (
    GROUPS,
    CurvatureTask,
    agreement,
    exact_hessian,
    gradients_and_kfac,
    pretrain_with_secants,
    psd_sqrt,
    second_moment_estimates,
)
from hf_ext.plotting import plot_labelled_points
from hf_ext.recipes._optimizers import build_optimizer
from hf_ext.recipes._plotting import plot_grouped_bars
from hf_ext.recipes._results import write_results, write_rows
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import run_config, set_per_run, settings_parser
from hf_ext.recipes._training import train_resumable

OPTIMIZERS = ("adamw", "symmetry", "shampoo_style", "muon")


@dataclass
class SymmetryCurvatureArguments:
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2], metadata={"help": "Seeds (init and data order)."})
    accuracy_groups: list[str] = field(
        default_factory=lambda: [
            "scaling:identity",
            "permutation:identity",
            "orthogonal:identity",
            "identity:permutation",
            "identity:orthogonal",
            "permutation:permutation",
            "scaling:scaling",
            "orthogonal:orthogonal",
        ],
        metadata={"help": f"Groups 'rows:cols' whose estimates (a) measures; names among {list(GROUPS)}."},
    )
    mlp_hidden: int = field(default=16, metadata={"help": "(a) MLP hidden width (its Hessians are exact)."})
    tiny_lm_hidden: int = field(default=8, metadata={"help": "(a) tiny Llama width (MLP 4x), one layer."})
    pretrain_steps: int = field(default=200, metadata={"help": "(a) AdamW steps before the Hessian is taken."})
    gradient_batches: int = field(default=64, metadata={"help": "(a) minibatch gradients each estimate averages."})
    probe_directions: int = field(
        default=32,
        metadata={
            "help": "(a) random directions u for cos(H u, Hess u); as many secants (the last pretraining steps)."
        },
    )
    mlp_train_hidden: int = field(default=64, metadata={"help": "(b) MLP hidden width on digits."})
    mlp_steps: int = field(default=300, metadata={"help": "(b) MLP optimizer steps (batch 64)."})
    mlp_lrs: list[float] = field(
        default_factory=lambda: [1e-3, 3e-3, 1e-2],
        metadata={"help": "(b) MLP: each optimizer's best of these step sizes (by mean held-out loss) is reported."},
    )
    lm_steps: int = field(default=200, metadata={"help": "(b) Llama optimizer steps through the Trainer."})
    lm_lrs: list[float] = field(
        default_factory=lambda: [3e-3, 1e-2],
        metadata={"help": "(b) Llama: each optimizer's best of these step sizes (by mean held-out loss) is reported."},
    )
    lm_hidden_size: int = field(default=32, metadata={"help": "(b) Llama width (MLP 4x)."})
    lm_layers: int = field(default=2, metadata={"help": "(b) Llama decoder layers."})
    seq_len: int = field(default=32, metadata={"help": "Tokens per block, (a) and (b)."})
    vocab_size: int = field(default=512, metadata={"help": "BPE vocabulary trained on standard-library source."})
    corpus_files: int = field(default=40, metadata={"help": "Standard-library files in the corpus."})
    eval_blocks: int = field(default=64, metadata={"help": "Held-out blocks for (b)'s loss and (a)'s Hessian."})

    def __post_init__(self):
        check_finite_fields(self)
        for name in ("mlp_hidden", "tiny_lm_hidden", "gradient_batches", "probe_directions", "mlp_train_hidden"):
            if getattr(self, name) < 2:
                raise ValueError(f"SymmetryCurvatureArguments: `{name}` must be >= 2, got {getattr(self, name)}")
        for name in ("mlp_steps", "lm_steps", "lm_layers", "seq_len", "corpus_files", "eval_blocks"):
            if getattr(self, name) < 1:
                raise ValueError(f"SymmetryCurvatureArguments: `{name}` must be >= 1, got {getattr(self, name)}")
        if self.pretrain_steps < 1:
            raise ValueError(f"SymmetryCurvatureArguments: `pretrain_steps` must be >= 1, got {self.pretrain_steps}")
        for name in ("mlp_lrs", "lm_lrs"):
            if not getattr(self, name) or min(getattr(self, name)) <= 0:
                raise ValueError(f"SymmetryCurvatureArguments: `{name}` must be a non-empty list of numbers > 0")
        if not self.seeds:
            raise ValueError("SymmetryCurvatureArguments: `seeds` must not be empty")
        for spec in self.accuracy_groups:
            sides = spec.split(":")
            if len(sides) != 2 or any(side not in GROUPS for side in sides) or sides == ["identity", "identity"]:
                raise ValueError(
                    f"SymmetryCurvatureArguments: `accuracy_groups` entries must be 'rows:cols' with names among "
                    f"{list(GROUPS)}, not both 'identity' (that is the 'full' baseline); got {spec!r}"
                )


@dataclass
class LMTrainingArguments(TrainingArguments):
    """TrainingArguments of the Llama runs, less what each run sets: ``lm_steps`` steps at one of ``lm_lrs``,
    its seed, no evaluation during training and no checkpoints."""

    max_steps: int = set_per_run(TrainingArguments, "max_steps", by="SymmetryCurvatureArguments' `lm_steps`")
    learning_rate: float = set_per_run(TrainingArguments, "learning_rate", by="SymmetryCurvatureArguments' `lm_lrs`")
    seed: int = set_per_run(TrainingArguments, "seed", by="SymmetryCurvatureArguments' `seeds`")
    eval_strategy: str = set_per_run(TrainingArguments, "eval_strategy", by="the recipe ('no')")
    save_strategy: str = set_per_run(TrainingArguments, "save_strategy", by="the recipe ('no')")

    def __post_init__(self):
        check_finite_fields(self)
        super().__post_init__()


def parser(argv: list[str] | None = None) -> TrlParser:
    """The recipe's parser (``hf-ext run symmetry_curvature --help`` lists the fields)."""
    return settings_parser(SymmetryCurvatureArguments, LMTrainingArguments)


# ---------------------------------------------------------------- data and models


def digits_split(seed: int = 0) -> dict[str, torch.Tensor]:
    """scikit-learn's digits scaled to [0, 1], split 80/20 by a seeded permutation."""
    x, y = digits()
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    cut = int(0.8 * len(y))
    return {"x": x[order[:cut]], "y": y[order[:cut]], "x_val": x[order[cut:]], "y_val": y[order[cut:]]}


def corpus(script_args: SymmetryCurvatureArguments):
    """The tokenizer and the train / held-out blocks of ``seq_len`` tokens."""
    tokenizer = stdlib_bpe_tokenizer(script_args.vocab_size)
    blocks = stdlib_corpus(tokenizer, script_args.seq_len, max_files=script_args.corpus_files, seed=0)
    held_out = blocks["validation"].select(range(min(script_args.eval_blocks, len(blocks["validation"]))))
    return tokenizer, blocks["train"].remove_columns("attention_mask"), held_out.remove_columns("attention_mask")


def mlp_task(script_args, data, seed: int) -> CurvatureTask:
    generator = torch.Generator().manual_seed(seed)

    def batch(size: int = 32):
        index = torch.randint(0, len(data["y"]), (size,), generator=generator)
        return data["x"][index], data["y"][index]

    def loss(model, inputs):
        return nn.functional.cross_entropy(model(inputs[0]), inputs[1])

    return CurvatureTask(digits_mlp(script_args.mlp_hidden, seed), batch, loss)


def tiny_lm_task(script_args, tokenizer, train, seed: int) -> CurvatureTask:
    model = llama_from_scratch(
        tokenizer, script_args.tiny_lm_hidden, 1, 2, max_positions=script_args.seq_len, seed=seed
    )
    model.set_attn_implementation("eager")  # CPU SDPA has no forward-mode AD, which hessian() uses
    ids = torch.tensor(train["input_ids"])
    generator = torch.Generator().manual_seed(seed)

    def batch(size: int = 4):
        return ids[torch.randint(0, len(ids), (size,), generator=generator)]

    def loss(model, inputs):
        return model(input_ids=inputs, labels=inputs).loss

    return CurvatureTask(model, batch, loss)


# ---------------------------------------------------------------- (a) accuracy


def accuracy(script_args: SymmetryCurvatureArguments, lm_data, seed: int) -> list[dict]:
    """Part (a) for one seed: one row per (model, layer, estimate, power)."""
    tokenizer, train, held_out = lm_data
    data = digits_split(seed)
    cases = [
        (mlp_task(script_args, data, seed), ["0.weight", "2.weight"], (data["x_val"], data["y_val"]), "mlp_digits"),
        (
            tiny_lm_task(script_args, tokenizer, train, seed),
            [f"model.layers.0.{n}.weight" for n in ("mlp.up_proj", "mlp.down_proj", "self_attn.q_proj")],
            torch.tensor(held_out["input_ids"][:16]),  # 16 blocks: forward-mode AD holds a copy per weight
            "tiny_llama",
        ),
    ]
    rows = []
    for task, names, held, model_name in cases:
        secants = pretrain_with_secants(task, script_args.pretrain_steps, names, script_args.probe_directions)
        for name in names:
            exact = exact_hessian(task, name, held)
            gradients, *kfac = gradients_and_kfac(task, name, script_args.gradient_batches)
            generator = torch.Generator().manual_seed(seed)
            directions = torch.randn(exact.shape[0], script_args.probe_directions, generator=generator).double()
            groups = script_args.accuracy_groups
            for label, (second_moment, storage) in second_moment_estimates(gradients, kfac, groups).items():
                for power, matrix in (("H=S^1/2", psd_sqrt(second_moment)), ("S", second_moment)):
                    row = {"model": model_name, "layer": name, "shape": list(gradients[0].shape), "seed": seed}
                    row |= {"estimate": label, "power": power, "storage": storage}
                    rows.append(row | agreement(matrix, exact, directions, secants[name]))
    return rows


# ---------------------------------------------------------------- (b) optimization


def train_mlp(script_args, name: str, lr: float, seed: int) -> dict:
    """The MLP on digits: ``mlp_steps`` steps of batch 64; held-out loss, accuracy and seconds per step."""
    data, model = digits_split(0), digits_mlp(script_args.mlp_train_hidden, seed)
    optimizer, generator = build_optimizer(name, model, lr), torch.Generator().manual_seed(seed)
    start = time.perf_counter()
    for _ in range(script_args.mlp_steps):
        index = torch.randint(0, len(data["y"]), (64,), generator=generator)
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(data["x"][index]), data["y"][index]).backward()
        optimizer.step()
    seconds = (time.perf_counter() - start) / script_args.mlp_steps
    with torch.no_grad():
        logits = model(data["x_val"])
    loss = nn.functional.cross_entropy(logits, data["y_val"]).item()
    correct = (logits.argmax(-1) == data["y_val"]).float().mean().item()
    return {"final_loss": loss, "accuracy": correct, "seconds_per_step": seconds}


def train_lm(script_args, training_args, lm_data, name: str, lr: float, seed: int) -> dict:
    """The small Llama through the stock Trainer: held-out loss after ``lm_steps`` steps, seconds per step."""
    tokenizer, train, held_out = lm_data
    size = script_args.lm_hidden_size
    model = llama_from_scratch(
        tokenizer, size, script_args.lm_layers, max(1, size // 16), max_positions=script_args.seq_len, seed=seed
    )
    args = run_config(
        TrainingArguments,
        training_args,
        output_dir=str(Path(training_args.output_dir) / "runs" / f"{name}_lr{lr:g}_seed{seed}"),
        max_steps=script_args.lm_steps,
        learning_rate=lr,
        save_strategy="no",
        eval_strategy="no",
        seed=seed,
    )
    # The Trainer builds it from the model (a ready optimizer is refused under FSDP; accelerate then gives it the
    # sharded parameters): a factory, called as factory()(model, lr=lr).
    optimizer = (lambda: partial(build_optimizer, name), {"lr": lr})
    trainer = Trainer(
        model=model, args=args, train_dataset=train, eval_dataset=held_out, optimizer_cls_and_kwargs=optimizer
    )
    metrics = train_resumable(trainer, several_runs=True).metrics
    return {
        "final_loss": trainer.evaluate()["eval_loss"],
        "seconds_per_step": metrics["train_runtime"] / script_args.lm_steps,
    }


def _summary(runs: list[dict]) -> dict:
    losses = [r["final_loss"] for r in runs]
    return {
        "final_loss": statistics.fmean(losses),
        "final_loss_std": statistics.stdev(losses) if len(losses) > 1 else 0.0,
        "seconds_per_step": statistics.fmean(r["seconds_per_step"] for r in runs),
        "runs": runs,
    }


def _tuned(run, lrs: list[float], seeds: list[int], progress) -> dict:
    """``run(lr, seed)`` for every step size and seed; the step size with the lowest mean held-out loss is kept."""
    tried = {}
    for lr in lrs:
        tried[lr] = [run(lr, seed) for seed in seeds]
        progress.update(len(seeds))
    best = min(tried, key=lambda lr: statistics.fmean(r["final_loss"] for r in tried[lr]))
    return _summary(tried[best]) | {
        "lr": best,
        "tried": {f"{lr:g}": statistics.fmean(r["final_loss"] for r in runs) for lr, runs in tried.items()},
    }


def optimization(script_args, training_args, lm_data, progress) -> dict:
    """Part (b): per task and optimizer, the seeds' held-out losses at the optimizer's best step size."""
    results = {"mlp_digits": {}, "llama_corpus": {}}
    for name in OPTIMIZERS:
        results["mlp_digits"][name] = _tuned(
            partial(train_mlp, script_args, name), script_args.mlp_lrs, script_args.seeds, progress
        )
        results["llama_corpus"][name] = _tuned(
            partial(train_lm, script_args, training_args, lm_data, name),
            script_args.lm_lrs,
            script_args.seeds,
            progress,
        )
    for task in results.values():
        adamw = task["adamw"]["seconds_per_step"]
        best = min(row["final_loss"] for key, row in task.items() if key != "symmetry")
        for row in task.values():
            row["step_time_vs_adamw"] = row["seconds_per_step"] / adamw
        task["symmetry"]["vs_best_baseline"] = task["symmetry"]["final_loss"] / best - 1
    return results


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> dict:
    script_args, training_args = parser(argv).parse_args_and_config(argv)
    state = PartialState()
    lm_data = corpus(script_args)
    runs = len(script_args.seeds) * (1 + len(OPTIMIZERS) * (len(script_args.mlp_lrs) + len(script_args.lm_lrs)))
    with tqdm(total=runs, desc="symmetry_curvature", disable=not state.is_main_process) as progress:
        rows = []
        for seed in script_args.seeds:
            rows += accuracy(script_args, lm_data, seed)
            progress.update(1)
        training = optimization(script_args, training_args, lm_data, progress)
    results = {
        "accuracy": tradeoff(rows),
        "training": training,
        "script_args": dataclasses.asdict(script_args),
    }
    if state.is_main_process:
        out = write_results(training_args.output_dir, results)
        write_rows(out / "accuracy.csv", rows)
        write_rows(out / "training.csv", training_rows(training))
        plot_results(results, out)
        state.print(f"wrote {out / 'results.json'}, accuracy.csv, training.csv, tradeoff.png and training.png")
    return results


def tradeoff(rows: list[dict]) -> list[dict]:
    """Mean and std over seeds of each (model, layer, estimate, power)'s agreement with the exact Hessian."""
    keys = ("model", "layer", "estimate", "power")
    grouped: dict[tuple, list[dict]] = {}
    for row in rows:
        grouped.setdefault(tuple(row[k] for k in keys), []).append(row)
    summary = []
    for key, items in grouped.items():
        entry = dict(zip(keys, key, strict=True)) | {"storage": items[0]["storage"], "shape": items[0]["shape"]}
        for metric in ("cosine", "relative_error", "action_cosine", "secant_cosine"):
            values = [item[metric] for item in items]
            entry[metric] = statistics.fmean(values)
            entry[f"{metric}_std"] = statistics.stdev(values) if len(values) > 1 else 0.0
        summary.append(entry)
    return summary


def training_rows(training: dict) -> list[dict]:
    return [
        {"task": task, "optimizer": name, "lr": row["lr"], "seed": seed, **run}
        for task, table in training.items()
        for name, row in table.items()
        for seed, run in enumerate(row["runs"])
    ]


def plot_results(results: dict, out: Path) -> None:
    """``tradeoff.png``: cosine of ``H`` with the exact Hessian against log2 storage, one panel per layer, points
    joined in order of storage; ``training.png``: held-out loss over AdamW's per task."""
    panels: dict[str, list] = {}
    for entry in sorted(results["accuracy"], key=lambda e: e["storage"]):
        if entry["power"] == "H=S^1/2":
            label = f"{entry['model']} {entry['layer'].removeprefix('model.layers.0.')} {tuple(entry['shape'])}"
            point = (entry["estimate"], [math.log2(entry["storage"])], [entry["cosine"]])
            panels.setdefault(label, []).append(point)
    plot_labelled_points(panels, out / "tradeoff.png", "cosine(H, exact Hessian) vs storage", "log2 numbers stored")
    bars = {
        name: {
            task: table[name]["final_loss"] / table["adamw"]["final_loss"]
            for task, table in results["training"].items()
        }
        for name in OPTIMIZERS
    }
    plot_grouped_bars(bars, out / "training.png", "held-out loss at equal steps", "held-out loss / AdamW's")


if __name__ == "__main__":
    run_as_script(main)
