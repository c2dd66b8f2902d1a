"""Rep3D vs a fixed prior mask vs no mask vs a small kernel: 3D segmentation Dice at two learning rates.

    hf-ext run rep3d                                  # shipped config: 14 min on one thread (OMP_NUM_THREADS=1)
    hf-ext run rep3d variants="rep3d no_mask" seeds="0"
    hf-ext run rep3d --config rep3d_quick             # seconds: the end-to-end check
    hf-ext run rep3d --accelerate-config cpu_2proc    # each run data-parallel on two CPU processes

Every variant is the same plain encoder (:class:`hf_ext.models.Rep3DForSegmentation`) trained by
the stock ``Trainer`` for the same steps on the same synthetic volumes
(:func:`hf_ext.data.volume_segmentation`), from the same initialisation per seed. Only the
large kernels' mask differs: ``rep3d`` learns ``M = P + f(P)``, ``fixed_prior`` keeps ``M = P``,
``no_mask`` uses the kernel as it is, and ``small_kernel`` replaces every kernel by a
``small_kernel_size`` one (no mask). Each runs at ``learning_rate`` times each of
``lr_multipliers`` (the higher one probes the stability claim). Validation Dice per class is
measured every ``eval_steps``. The encoder's sizes are ``Rep3DConfig``'s own fields (its defaults; the shipped
configs set the recipe's smaller encoder).

Writes ``runs.csv`` (final Dice per run), ``curves.csv`` (validation mean Dice per evaluation),
``results.json`` (per variant and learning rate: mean and std over seeds), ``rep3d_dice.png``
(mean foreground Dice against steps, +-1 std over seeds, one panel per learning rate) and
``rep3d_slice.png`` (the middle slice of a validation volume: truth and each variant's
prediction at the base learning rate, first seed) to ``output_dir``.
"""

import dataclasses
import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from accelerate import PartialState
from transformers import Trainer, TrainingArguments
from trl import TrlParser

from hf_ext._validation import check_finite_fields
from hf_ext.data import volume_segmentation
from hf_ext.data.volumes import class_names
from hf_ext.models.rep3d import DiceMetrics, Rep3DConfig, Rep3DForSegmentation, argmax_logits
from hf_ext.models.rep3d.conv import check_kernel_size
from hf_ext.recipes._plotting import plot_bands, plot_label_slices
from hf_ext.recipes._results import write_results, write_rows
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import library_field, run_config, set_per_run, settings_parser
from hf_ext.recipes._training import train_resumable

VARIANTS = ("rep3d", "fixed_prior", "no_mask", "small_kernel")
MASKS = {"rep3d": "learned", "fixed_prior": "prior", "no_mask": "none", "small_kernel": "none"}


@dataclass
class Rep3DArguments:
    variants: list[str] = field(default_factory=lambda: list(VARIANTS), metadata={"help": f"Any of {list(VARIANTS)}."})
    lr_multipliers: list[float] = field(
        default_factory=lambda: [1.0, 3.0], metadata={"help": "Each run's learning rate is learning_rate times these."}
    )
    seeds: list[int] = field(
        default_factory=lambda: [0, 1, 2], metadata={"help": "Seeds: initialisation and batch order."}
    )
    size: int = field(default=32, metadata={"help": "Side of the cubic volumes (>= the stride product)."})
    num_classes: int = field(default=4, metadata={"help": "Classes: background + liver, kidney, lesion (2..4)."})
    num_train: int = field(default=64, metadata={"help": "Training volumes."})
    num_validation: int = field(default=8, metadata={"help": "Validation volumes."})
    volume_seed: int = field(default=0, metadata={"help": "Seed of the synthetic volumes (the same for every run)."})
    hidden_sizes: list[int] = library_field(Rep3DConfig, "hidden_sizes")
    depths: list[int] = library_field(Rep3DConfig, "depths")
    kernel_sizes: list[int] = library_field(Rep3DConfig, "kernel_sizes")
    small_kernel_size: int = field(default=3, metadata={"help": "Kernel of every stage in `small_kernel` (odd)."})
    decoder_hidden_size: int = library_field(Rep3DConfig, "decoder_hidden_size")

    def __post_init__(self):
        check_finite_fields(self)
        if not self.variants or set(self.variants) - set(VARIANTS):
            raise ValueError(f"`variants` must be a non-empty subset of {list(VARIANTS)}, got {self.variants}")
        if not self.lr_multipliers or any(m <= 0 for m in self.lr_multipliers):
            raise ValueError(f"`lr_multipliers` must be a non-empty list of numbers > 0, got {self.lr_multipliers}")
        if not self.seeds:
            raise ValueError("`seeds` must list at least one seed")
        check_kernel_size(type(self).__name__, "small_kernel_size", self.small_kernel_size)
        for name in ("num_train", "num_validation"):
            if getattr(self, name) < 1:
                raise ValueError(f"`{name}` must be >= 1, got {getattr(self, name)}")
        stride_product = self.model_config("rep3d").stride_product  # Rep3DConfig checks the model's fields
        if self.size < stride_product:
            raise ValueError(f"`size` must be at least the encoder's stride product {stride_product}, got {self.size}")

    def model_config(self, variant: str) -> Rep3DConfig:
        small = variant == "small_kernel"
        return Rep3DConfig(
            num_labels=self.num_classes,
            hidden_sizes=self.hidden_sizes,
            depths=self.depths,
            kernel_sizes=[self.small_kernel_size] * len(self.kernel_sizes) if small else self.kernel_sizes,
            mask_mode=MASKS[variant],
            decoder_hidden_size=self.decoder_hidden_size,
        )


@dataclass
class Rep3DTrainingArguments(TrainingArguments):
    """TrainingArguments less what the recipe sets: each run's seed (one of ``seeds``), and the logging of a
    diverged run's loss as NaN (the Trainer's filter would log the mean of its finite losses)."""

    seed: int = set_per_run(TrainingArguments, "seed", by="Rep3DArguments' `seeds`")
    logging_nan_inf_filter: bool = set_per_run(
        TrainingArguments, "logging_nan_inf_filter", by="the recipe (false: a diverged run logs NaN)"
    )

    def __post_init__(self):
        check_finite_fields(self)
        super().__post_init__()


def parser(argv: list[str] | None = None) -> TrlParser:
    """The parser ``main`` reads its settings with (the same for every ``argv``)."""
    return settings_parser(Rep3DArguments, Rep3DTrainingArguments)


def parse_args(argv: list[str] | None) -> tuple[Rep3DArguments, TrainingArguments]:
    return tuple(parser(argv).parse_args_and_config(argv))


def build_model(args: Rep3DArguments, variant: str, seed: int) -> Rep3DForSegmentation:
    """The variant's model, starting from the plain large-kernel model of ``seed``: every tensor they share (by
    name and shape) is copied, so that variants differ by their masks (and the small kernel's size) only."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        reference = Rep3DForSegmentation(args.model_config("no_mask")).state_dict()
        model = Rep3DForSegmentation(args.model_config(variant))
    own = model.state_dict()
    model.load_state_dict({k: v for k, v in reference.items() if k in own and own[k].shape == v.shape}, strict=False)
    return model


def train_one(args, training_args, data, variant: str, multiplier: float, seed: int, out: Path) -> dict:
    """One run: the final validation Dice per class, the mean-Dice curve and the middle-slice prediction."""
    run_args = run_config(
        TrainingArguments,
        training_args,
        learning_rate=training_args.learning_rate * multiplier,
        seed=seed,
        output_dir=str(out / f"{variant}_lr{multiplier:g}_seed{seed}"),
        logging_nan_inf_filter=False,
    )
    trainer = Trainer(
        model=build_model(args, variant, seed),
        args=run_args,
        train_dataset=data["train"],
        eval_dataset=data["validation"],
        compute_metrics=DiceMetrics(class_names(args.num_classes)),
        preprocess_logits_for_metrics=argmax_logits,
    )
    start = time.perf_counter()
    result = train_resumable(trainer, several_runs=True)
    seconds = time.perf_counter() - start
    history = trainer.state.log_history
    if not any(e.get("step") == trainer.state.global_step and "eval_mean_dice" in e for e in history):
        trainer.evaluate()
    curve = [(e["step"], e["eval_mean_dice"]) for e in trainer.state.log_history if "eval_mean_dice" in e]
    final = next(e for e in reversed(trainer.state.log_history) if "eval_mean_dice" in e)
    model = trainer.model.eval()
    with torch.no_grad():
        volume = data["validation"][0]["pixel_values"][None]
        prediction = model(pixel_values=volume).logits.argmax(1)[0, args.size // 2]
    row = {
        "variant": variant,
        "lr_multiplier": multiplier,
        "learning_rate": run_args.learning_rate,
        "seed": seed,
        "mean_dice": final["eval_mean_dice"],
        **{f"dice_{name}": final[f"eval_dice_{name}"] for name in class_names(args.num_classes)},
        "train_loss": result.training_loss,
        "diverged": not math.isfinite(result.training_loss),
        "seconds": seconds,
    }
    return {"row": row, "curve": curve, "slice": prediction.tolist()}


def summarize(runs: list[dict], args: Rep3DArguments) -> dict:
    """Per variant and learning-rate multiplier: mean and sample std over seeds of the final validation Dice."""
    summary = {}
    for variant in args.variants:
        for multiplier in args.lr_multipliers:
            rows = [
                r["row"] for r in runs if r["row"]["variant"] == variant and r["row"]["lr_multiplier"] == multiplier
            ]
            dice = [r["mean_dice"] for r in rows]
            summary[f"{variant}/lr_x{multiplier:g}"] = {
                "mean_dice": statistics.fmean(dice),
                "std_dice": statistics.stdev(dice) if len(dice) > 1 else 0.0,
                "per_seed": dice,
                **{
                    f"dice_{name}": statistics.fmean(r[f"dice_{name}"] for r in rows)
                    for name in class_names(args.num_classes)
                },
                "diverged_runs": sum(r["diverged"] for r in rows),
                "seconds_per_run": statistics.fmean(r["seconds"] for r in rows),
            }
    return summary


def write_outputs(runs: list[dict], args: Rep3DArguments, training_args: TrainingArguments, data, out: Path) -> dict:
    results = {
        "summary": summarize(runs, args),
        "runs": [r["row"] for r in runs],
        "args": dataclasses.asdict(args),
        "learning_rate": training_args.learning_rate,
        "max_steps": training_args.max_steps,
    }
    write_results(out, results)
    write_rows(out / "runs.csv", [r["row"] for r in runs])
    curve_rows = [
        {k: r["row"][k] for k in ("variant", "lr_multiplier", "seed")} | {"step": step, "mean_dice": dice}
        for r in runs
        for step, dice in r["curve"]
    ]
    write_rows(out / "curves.csv", curve_rows)
    panels = {
        f"learning rate x{m:g}": {
            v: [
                [dice for _, dice in r["curve"]]
                for r in runs
                if r["row"]["variant"] == v and r["row"]["lr_multiplier"] == m
            ]
            for v in args.variants
        }
        for m in args.lr_multipliers
    }
    plot_bands(
        panels,
        out / "rep3d_dice.png",
        f"Validation mean foreground Dice, mean +- std over {len(args.seeds)} seed(s)",
        f"evaluation (every {training_args.eval_steps:g} steps)",
        "mean Dice",
        ncols=len(args.lr_multipliers),
    )
    volume = data["validation"][0]
    first = {
        r["row"]["variant"]: r["slice"]
        for r in runs
        if r["row"]["lr_multiplier"] == args.lr_multipliers[0] and r["row"]["seed"] == args.seeds[0]
    }
    plot_label_slices(
        volume["pixel_values"][0, args.size // 2].numpy(),
        {"truth": volume["labels"][args.size // 2].numpy()} | first,
        out / "rep3d_slice.png",
        f"Middle slice of validation volume 0, predictions at learning rate x{args.lr_multipliers[0]:g}, "
        f"seed {args.seeds[0]}",
    )
    return results


def main(argv: list[str] | None = None) -> dict:
    args, training_args = parse_args(argv)
    state = PartialState()  # set up by TrainingArguments: every process takes part in every run (DDP)
    data = volume_segmentation(args.num_train, args.num_validation, args.size, args.num_classes, args.volume_seed)
    out = Path(training_args.output_dir)
    jobs = [(v, m, s) for v in args.variants for m in args.lr_multipliers for s in args.seeds]
    runs = []
    for variant, multiplier, seed in jobs:
        runs.append(train_one(args, training_args, data, variant, multiplier, seed, out))
        row = runs[-1]["row"]
        state.print(
            f"{variant} lr x{multiplier:g} seed {seed}: mean Dice {row['mean_dice']:.4f} ({row['seconds']:.0f} s)"
        )
    results = {}
    if state.is_main_process:
        results = write_outputs(runs, args, training_args, data, out)
        for key, entry in results["summary"].items():
            state.print(f"{key}: mean Dice {entry['mean_dice']:.4f} +- {entry['std_dice']:.4f} over seeds")
    state.wait_for_everyone()  # leave together (a rank exiting while another holds the gloo group can abort)
    return results


if __name__ == "__main__":
    run_as_script(main)
