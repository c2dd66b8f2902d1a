"""Vanilla vs regularized DPO or SimPO on SmolLM2-135M-Instruct with offline arithmetic preference pairs.

    hf-ext run dpo_regularized                               # DPO, without and with the regularizer
    hf-ext run dpo_regularized --config simpo_regularized    # SimPO, without and with it

Trains the same initial model on the same pairs once per variant ("vanilla": regularizer_coef 0,
TRL's loss exactly; "regularized": the configured coefficient, > 0, and form) and measures on held-out
pairs: TRL's reward accuracy and margin, the chosen and rejected responses' mean token log-prob
before and after, and log P of the pair. Writes ``results.json``, ``logps.png`` (chosen mean
log-prob during training), and ``token_shift.json`` / ``token_shift.png`` to ``output_dir``.
"""

import sys
from dataclasses import dataclass, field
from pathlib import Path

from transformers import set_seed
from trl import TrlParser

import hf_ext.alignment as alignment
from hf_ext._validation import check_counts, check_finite_fields
from hf_ext.data import preference_dataset
from hf_ext.models import CAUSAL_LMS, load_causal_lm
from hf_ext.plotting import loss_curve
from hf_ext.recipes._plotting import display_name, plot_curves
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import run_config, settings_parser
from hf_ext.recipes._training import compare_runs, train_measured

ALGORITHMS = {
    "dpo": ("RegularizedDPOConfig", "RegularizedDPOTrainer"),
    "simpo": ("RegularizedSimPOConfig", "RegularizedSimPOTrainer"),
}
VARIANTS = ("vanilla", "regularized")
# The settings whose values choose the parser's dataclasses (`hf-ext run` checks keys against each choice's own).
PARSER_FOLLOWS = ("algorithm",)


@dataclass
class PreferenceRecipeArguments:
    algorithm: str = field(default="dpo", metadata={"help": f"One of {list(ALGORITHMS)}."})
    variants: list[str] = field(default_factory=lambda: list(VARIANTS), metadata={"help": f"Any of {VARIANTS}."})
    model: str = field(default="smollm2", metadata={"help": f"Initial policy, one of {sorted(CAUSAL_LMS)}."})
    difficulty: int = field(default=1, metadata={"help": "Arithmetic difficulty of the pairs, 1 to 4."})
    num_train: int = field(default=64, metadata={"help": "Training pairs."})
    num_eval: int = field(default=64, metadata={"help": "Held-out pairs (drawn with seed + 1)."})

    def __post_init__(self):
        check_finite_fields(self)
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"`algorithm` must be one of {list(ALGORITHMS)}, got {self.algorithm!r}")
        unknown = sorted(set(self.variants) - set(VARIANTS))
        if unknown or not self.variants:
            raise ValueError(f"`variants` must be a non-empty subset of {list(VARIANTS)}, got {self.variants}")
        if self.model not in CAUSAL_LMS:
            raise ValueError(f"`model` must be one of {sorted(CAUSAL_LMS)}, got {self.model!r}")
        check_counts(self, ("num_train", "num_eval"))


def check_variants(recipe_args: PreferenceRecipeArguments, config) -> None:
    """The regularized variant runs at ``regularizer_coef``: 0 would make it the vanilla one (TRL's loss)."""
    if "regularized" in recipe_args.variants and not config.regularizer_coef > 0:
        raise ValueError(
            f"{type(config).__name__}: `regularizer_coef` must be > 0 for the 'regularized' variant (at 0 it is the "
            f"'vanilla' one, TRL's loss), got {config.regularizer_coef}"
        )


def parser(argv: list[str] | None = None) -> TrlParser:
    """The parser ``main`` reads its settings with: the TRL config class follows ``algorithm`` in ``argv``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    first = settings_parser(PreferenceRecipeArguments)
    recipe_args, _ = first.parse_args_and_config(argv, return_remaining_strings=True)
    config_class = getattr(alignment, ALGORITHMS[recipe_args.algorithm][0])
    return settings_parser(PreferenceRecipeArguments, config_class, check=check_variants)


def parse_args(argv: list[str] | None):
    """Recipe arguments and the TRL config of the chosen algorithm."""
    return parser(argv).parse_args_and_config(argv)


def _held_out_metrics(trainer) -> dict[str, float]:
    metrics = trainer.evaluate()
    return {
        "reward_accuracy": metrics["eval_rewards/accuracies"],
        "reward_margin": metrics["eval_rewards/margins"],
        "loss": metrics["eval_loss"],
    }


def run_variant(variant: str, recipe_args: PreferenceRecipeArguments, training_args, train, held_out) -> dict:
    """Train a fresh copy of the model with one variant; returns its held-out metrics and curves."""
    set_seed(training_args.seed)
    model, tokenizer = load_causal_lm(recipe_args.model)
    reference, _ = load_causal_lm(recipe_args.model)
    args = run_config(
        type(training_args),
        training_args,
        regularizer_coef=training_args.regularizer_coef if variant == "regularized" else 0.0,
        output_dir=str(Path(training_args.output_dir) / variant),
    )
    trainer_class = getattr(alignment, ALGORITHMS[recipe_args.algorithm][1])
    reference_kwargs = {"ref_model": reference} if recipe_args.algorithm == "dpo" else {}
    trainer = trainer_class(
        model=model,
        args=args,
        train_dataset=train,
        eval_dataset=held_out,
        processing_class=tokenizer,
        **reference_kwargs,
    )
    before, after, seconds = train_measured(trainer, lambda: _held_out_metrics(trainer))
    history = trainer.state.log_history
    return {
        "regularizer_coef": args.regularizer_coef,
        "regularizer_form": args.regularizer_form,
        "steps": trainer.state.global_step,
        "train_seconds": seconds,
        "held_out_before": before,
        "held_out_after": after,
        "loss": loss_curve(history),
        "train_mean_logps_chosen": loss_curve(history, "regularizer/mean_logps_chosen"),
        "shift": alignment.token_shift(trainer.model, reference, held_out, tokenizer),
    }


def displacement(shift) -> dict[str, float]:
    """Held-out changes that show likelihood displacement: chosen / rejected mean log-prob and log P."""
    summary = shift.summary()
    numbers = {}
    for kind in ("chosen", "rejected"):
        before, after = summary[kind]["mean_logps_reference"], summary[kind]["mean_logps_policy"]
        numbers |= {f"{kind}_mean_logp_before": before, f"{kind}_mean_logp_after": after}
        numbers[f"{kind}_mean_logp_change"] = after - before
    numbers |= {"log_p_before": summary["log_p"]["reference"], "log_p_after": summary["log_p"]["policy"]}
    numbers["log_p_change"] = numbers["log_p_after"] - numbers["log_p_before"]
    return numbers


def main(argv: list[str] | None = None) -> dict:
    recipe_args, training_args = parse_args(argv)
    train = preference_dataset(recipe_args.num_train, recipe_args.difficulty, seed=training_args.seed)
    held_out = preference_dataset(recipe_args.num_eval, recipe_args.difficulty, seed=training_args.seed + 1)
    shifts = {}

    def run(variant: str) -> dict:
        result = run_variant(variant, recipe_args, training_args, train, held_out)
        shifts[variant] = result.pop("shift")
        return result | {"held_out_displacement": displacement(shifts[variant])}

    def line(variant: str, result: dict) -> str:
        d, after = result["held_out_displacement"], result["held_out_after"]
        return (
            f"{recipe_args.algorithm} {variant}: held-out chosen mean log-prob {d['chosen_mean_logp_before']:.3f} -> "
            f"{d['chosen_mean_logp_after']:.3f}, rejected {d['rejected_mean_logp_before']:.3f} -> "
            f"{d['rejected_mean_logp_after']:.3f}, log P {d['log_p_before']:.3f} -> {d['log_p_after']:.3f}; "
            f"reward accuracy {after['reward_accuracy']:.3f}, margin {after['reward_margin']:.3f} "
            f"({result['steps']} steps, {result['train_seconds']:.0f} s)"
        )

    def write_reports(results: dict, out: Path) -> list[str]:
        title = f"{display_name(recipe_args.algorithm)} on {recipe_args.model}: held-out per-token change"
        alignment.write_report(shifts, out, title)
        plot_curves(
            {variant: r["train_mean_logps_chosen"] for variant, r in results.items()},
            out / "logps.png",
            f"{display_name(recipe_args.algorithm)}: chosen responses during training",
            ylabel="mean token log-prob (train batch)",
        )
        return ["logps.png", "token_shift.json", "token_shift.png"]

    return compare_runs(recipe_args.variants, run, line, training_args.output_dir, write_reports)


if __name__ == "__main__":
    run_as_script(main)
