"""GRPO with plain SGD vs AdamW on SmolLM2-135M-Instruct and verifiable arithmetic rewards.

    hf-ext run grpo_sgd                                   # SGD, then AdamW, same seed and budget
    hf-ext run grpo_sgd optimizers=sgd max_steps=20

Trains a fresh copy of the model with each optimizer on the same prompts for the same number
of steps (the optimizer's ``optim``, ``optim_args``, ``weight_decay`` from ``hf_ext.rl.presets`` and its
``*_learning_rate``; ``reward_weights`` from ``format_reward_weight``: these GRPOConfig fields are not
settings here) and measures: held-out mean reward (greedy exact answer) before and after, the fraction
of parameter entries changed (fp32 and bf16), optimizer-state bytes, and the size of a sparse
delta checkpoint in each mode (exact; bf16-visible) vs a full one. Checkpoints, if
``save_strategy`` saves any, get a sparse delta in ``delta_mode``. Writes ``results.json`` and
``reward.png`` to ``output_dir``.
"""

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch
from accelerate import PartialState
from accelerate.utils import broadcast_object_list
from transformers import set_seed
from trl import GRPOConfig, GRPOTrainer, TrlParser

from hf_ext._sharded import whole
from hf_ext._validation import check_counts, check_finite_fields
from hf_ext.data import arithmetic_dataset, arithmetic_reward, final_number_format_reward
from hf_ext.evaluation import arithmetic_accuracy
from hf_ext.models import CAUSAL_LMS, load_causal_lm
from hf_ext.plotting import loss_curve
from hf_ext.recipes._plotting import plot_curves
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import run_config, set_per_run, settings_parser
from hf_ext.recipes._training import compare_runs, train_measured
from hf_ext.rl import SparseDeltaCallback, UpdateSparsityCallback, checked_reward, save_sparse_delta
from hf_ext.rl.delta import MODES
from hf_ext.rl.presets import DELTA_SETTINGS, LEARNING_RATES, OPTIMIZER_SETTINGS

# bfloat16 stores and updates the weights in bf16 (no fp32 master copy): steps below half a bf16
# ulp of a weight round away, which is where the reported update sparsity comes from.
PARAM_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass
class GRPOSGDArguments:
    optimizers: list[str] = field(
        default_factory=lambda: list(OPTIMIZER_SETTINGS), metadata={"help": f"Any of {list(OPTIMIZER_SETTINGS)}."}
    )
    model: str = field(default="smollm2", metadata={"help": f"Initial policy, one of {sorted(CAUSAL_LMS)}."})
    difficulty: int = field(default=1, metadata={"help": "Arithmetic difficulty, 1 (one-digit sums) to 4."})
    num_train: int = field(default=512, metadata={"help": "Training prompts."})
    num_eval: int = field(default=64, metadata={"help": "Held-out prompts (drawn with seed + 1), greedy decoding."})
    sgd_learning_rate: float = field(default=LEARNING_RATES["sgd"], metadata={"help": "SGD's learning rate."})
    adamw_learning_rate: float = field(default=LEARNING_RATES["adamw"], metadata={"help": "AdamW's learning rate."})
    format_reward_weight: float = field(
        default=0.0, metadata={"help": "Weight of the end-on-the-number format reward (0: exact answer only)."}
    )
    max_new_tokens: int = field(default=32, metadata={"help": "Generation budget per held-out answer."})
    param_dtype: str = field(
        default="float32",
        metadata={"help": f"Dtype the parameters are stored and updated in, one of {list(PARAM_DTYPES)}."},
    )
    delta_mode: str = field(
        default=DELTA_SETTINGS["mode"],
        metadata={
            "help": f"Sparse delta mode of the checkpoints, one of {list(MODES)}. 'visible' (the preset's) stores "
            "what a bf16 copy sees and restores the bf16 model bit-exactly: with float32 parameters nearly every "
            "entry moves bitwise, so an 'exact' delta is about as large as a full checkpoint. Both are measured."
        },
    )

    def __post_init__(self):
        check_finite_fields(self)
        unknown = sorted(set(self.optimizers) - set(OPTIMIZER_SETTINGS))
        if unknown or not self.optimizers:
            raise ValueError(
                f"`optimizers` must be a non-empty subset of {list(OPTIMIZER_SETTINGS)}, got {self.optimizers}"
            )
        if self.model not in CAUSAL_LMS:
            raise ValueError(f"`model` must be one of {sorted(CAUSAL_LMS)}, got {self.model!r}")
        if self.param_dtype not in PARAM_DTYPES:
            raise ValueError(f"`param_dtype` must be one of {list(PARAM_DTYPES)}, got {self.param_dtype!r}")
        if self.delta_mode not in MODES:
            raise ValueError(f"`delta_mode` must be one of {list(MODES)}, got {self.delta_mode!r}")
        if self.format_reward_weight < 0:
            raise ValueError(f"`format_reward_weight` must be >= 0, got {self.format_reward_weight}")
        check_counts(self, ("num_train", "num_eval"))
        for name in ("sgd_learning_rate", "adamw_learning_rate"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"GRPOSGDArguments: `{name}` must be >= 0, got {getattr(self, name)}")


@dataclass
class GRPOSGDConfig(GRPOConfig):
    """GRPOConfig less what each optimizer's run sets: its optimizer, learning rate and weight decay, and the
    reward weights."""

    optim: str = set_per_run(GRPOConfig, "optim", by="`optimizers` (hf_ext.rl.presets)")
    optim_args: str | None = set_per_run(GRPOConfig, "optim_args", by="`optimizers` (hf_ext.rl.presets)")
    weight_decay: float = set_per_run(GRPOConfig, "weight_decay", by="`optimizers` (hf_ext.rl.presets)")
    learning_rate: float = set_per_run(GRPOConfig, "learning_rate", by="`sgd_learning_rate`/`adamw_learning_rate`")
    reward_weights: list[float] | None = set_per_run(GRPOConfig, "reward_weights", by="`format_reward_weight`")

    def __post_init__(self):
        check_finite_fields(self)
        super().__post_init__()


def _checkpoint_sizes(model, base_state) -> dict[str, float]:
    """Bytes of a sparse delta in each mode against the initial weights, and of a full safetensors checkpoint.

    Measured on the main process (``save_pretrained`` writes nothing on the other ranks) and shared with them;
    a sharded model's tensors are first gathered whole, by every rank.
    """
    state = {name: whole(tensor) for name, tensor in model.state_dict().items()}
    shared = [_measure_checkpoint_sizes(model, state, base_state) if PartialState().is_main_process else None]
    broadcast_object_list(shared)
    return shared[0]


def _measure_checkpoint_sizes(model, state, base_state) -> dict[str, float]:
    sizes = {}
    with tempfile.TemporaryDirectory() as scratch:
        model.save_pretrained(Path(scratch) / "full", state_dict=dict(state))  # it empties the dict it gets
        sizes["full_checkpoint_bytes"] = sum(f.stat().st_size for f in (Path(scratch) / "full").glob("*.safetensors"))
        for mode in MODES:  # both sizes are reported side by side: no warning about the exact one
            delta = save_sparse_delta(state, base_state, Path(scratch) / f"{mode}.safetensors", mode, warn=False)
            sizes[f"delta_bytes_{mode}"] = delta["bytes"]
            sizes[f"delta_over_full_{mode}"] = delta["bytes"] / sizes["full_checkpoint_bytes"]
            sizes[f"delta_changed_fraction_{mode}"] = delta["changed"] / delta["total"]
    return sizes


def run_optimizer(optimizer: str, script_args: GRPOSGDArguments, training_args: GRPOSGDConfig, train, held_out) -> dict:
    """Train a fresh copy of the model with one optimizer; returns rewards, sparsity and sizes."""
    set_seed(training_args.seed)
    model, tokenizer = load_causal_lm(script_args.model)
    model.to(PARAM_DTYPES[script_args.param_dtype])
    base_state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    rewards, weights = [checked_reward(arithmetic_reward)], [1.0]
    if script_args.format_reward_weight:
        rewards.append(checked_reward(final_number_format_reward))
        weights.append(script_args.format_reward_weight)
    # GRPOConfig derives generation_batch_size from steps_per_generation and refuses both on a rebuild.
    args = run_config(
        GRPOConfig,
        training_args,
        generation_batch_size=None,
        **{"optim_args": None} | OPTIMIZER_SETTINGS[optimizer],
        learning_rate=getattr(script_args, f"{optimizer}_learning_rate"),
        reward_weights=weights,
        output_dir=str(Path(training_args.output_dir) / optimizer),
    )

    sparsity = UpdateSparsityCallback()
    delta_dtype = DELTA_SETTINGS["dtype"] if script_args.delta_mode == "visible" else None
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=rewards,
        args=args,
        train_dataset=train,
        processing_class=tokenizer,
        callbacks=[sparsity, SparseDeltaCallback(base_state, script_args.delta_mode, delta_dtype)],
    )
    before, after, seconds = train_measured(
        trainer, lambda: arithmetic_accuracy(model, tokenizer, held_out, script_args.max_new_tokens)
    )
    final = sparsity.measure(trainer.model, trainer.optimizer)
    history = trainer.state.log_history
    return {
        "learning_rate": args.learning_rate,
        "param_dtype": script_args.param_dtype,
        "held_out_reward_before": before,
        "held_out_reward_after": after,
        "changed_fraction": final["sparsity/changed_entry_fraction"],
        "changed_fraction_bf16": final["sparsity/changed_entry_fraction_bf16"],
        "optimizer_state_bytes": final["sparsity/optimizer_state_bytes"],
        **_checkpoint_sizes(trainer.model, base_state),
        "steps": trainer.state.global_step,
        "train_seconds": seconds,
        "train_reward": loss_curve(history, "reward"),
        "changed_fraction_curve": loss_curve(history, "sparsity/changed_entry_fraction"),
    }


def parser(argv: list[str] | None = None) -> TrlParser:
    """The parser ``main`` reads its settings with (the same for every ``argv``)."""
    return settings_parser(GRPOSGDArguments, GRPOSGDConfig)


def main(argv: list[str] | None = None) -> dict:
    script_args, training_args = parser(argv).parse_args_and_config(argv)
    train = arithmetic_dataset(script_args.num_train, script_args.difficulty, seed=training_args.seed)
    held_out = arithmetic_dataset(script_args.num_eval, script_args.difficulty, seed=training_args.seed + 1)

    def run(optimizer: str) -> dict:
        return run_optimizer(optimizer, script_args, training_args, train, held_out)

    def line(optimizer: str, r: dict) -> str:
        return (
            f"{optimizer}: held-out reward {r['held_out_reward_before']:.3f} -> {r['held_out_reward_after']:.3f}; "
            f"changed {r['changed_fraction']:.3e} of entries (bf16 {r['changed_fraction_bf16']:.3e}); optimizer "
            f"state {r['optimizer_state_bytes']} B; sparse delta / full checkpoint "
            f"({r['full_checkpoint_bytes'] / 1e6:.1f} MB): exact {r['delta_over_full_exact']:.3f}, bf16-visible "
            f"{r['delta_over_full_visible']:.3f} ({r['steps']} steps, {r['train_seconds']:.0f} s)"
        )

    def write_reports(results: dict, out: Path) -> list[str]:
        plot_curves(
            {name: r["train_reward"] for name, r in results.items()},
            out / "reward.png",
            f"GRPO on {script_args.model}: SGD vs AdamW",
            ylabel="mean training reward",
        )
        return ["reward.png"]

    return compare_runs(script_args.optimizers, run, line, training_args.output_dir, write_reports)


if __name__ == "__main__":
    run_as_script(main)
