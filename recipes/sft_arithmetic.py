"""Supervised fine-tuning of SmolLM2 on verifiable arithmetic with the stock Trainer.

    accelerate launch recipes/sft_arithmetic.py --config recipes/configs/sft_arithmetic.yaml
    hf-ext run sft_arithmetic num_train=256 learning_rate=5e-5

Prints exact-match accuracy before and after training and writes ``results.json`` and
``loss.png`` to ``output_dir``.
"""

import time
from dataclasses import asdict, dataclass, field

from accelerate import PartialState
from transformers import DataCollatorForSeq2Seq, Trainer, TrainingArguments
from trl import TrlParser

from hf_ext._validation import check_finite_fields
from hf_ext.data import arithmetic_dataset
from hf_ext.data.arithmetic import MAX_DIFFICULTY
from hf_ext.data.sft import tokenize_prompt_completion
from hf_ext.evaluation import arithmetic_accuracy
from hf_ext.models import CAUSAL_LMS, load_causal_lm
from hf_ext.plotting import loss_curve
from hf_ext.recipes._plotting import plot_curves
from hf_ext.recipes._results import write_results
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import settings_parser
from hf_ext.recipes._training import train_resumable


@dataclass
class SFTArithmeticArguments:
    model: str = field(default="smollm2", metadata={"help": f"Model to fine-tune, one of {sorted(CAUSAL_LMS)}."})
    difficulty: int = field(default=1, metadata={"help": "Arithmetic difficulty, 1 (one-digit sums) to 4."})
    num_train: int = field(default=256, metadata={"help": "Number of training problems."})
    num_eval: int = field(default=64, metadata={"help": "Number of held-out problems for exact-match accuracy."})
    max_new_tokens: int = field(default=24, metadata={"help": "Generation budget per evaluated answer."})
    eval_batch_size: int = field(default=16, metadata={"help": "Prompts per generation batch."})

    def __post_init__(self):
        check_finite_fields(self)
        owner = type(self).__name__
        if self.model not in CAUSAL_LMS:
            raise ValueError(f"{owner}: `model` must be one of {sorted(CAUSAL_LMS)}, got {self.model!r}")
        if not 1 <= self.difficulty <= MAX_DIFFICULTY:
            raise ValueError(f"{owner}: `difficulty` must be an integer in 1..{MAX_DIFFICULTY}, got {self.difficulty}")
        for name in ("num_train", "num_eval", "max_new_tokens", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"{owner}: `{name}` must be an integer >= 1, got {getattr(self, name)}")


def parser(argv: list[str] | None = None) -> TrlParser:
    """The parser ``main`` reads its settings with (the same for every ``argv``)."""
    return settings_parser(SFTArithmeticArguments, TrainingArguments)


def main(argv: list[str] | None = None) -> dict:
    script_args, training_args = parser(argv).parse_args_and_config(argv)
    state = PartialState()
    model, tokenizer = load_causal_lm(script_args.model)
    train = arithmetic_dataset(script_args.num_train, script_args.difficulty, seed=training_args.seed)
    held_out = arithmetic_dataset(script_args.num_eval, script_args.difficulty, seed=training_args.seed + 1)
    columns = train.column_names
    train = train.map(tokenize_prompt_completion, fn_kwargs={"tokenizer": tokenizer}, remove_columns=columns)

    def accuracy() -> float:
        return arithmetic_accuracy(model, tokenizer, held_out, script_args.max_new_tokens, script_args.eval_batch_size)

    accuracy_before = accuracy()
    state.print(f"exact-match accuracy before training: {accuracy_before:.3f}")
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train,
        data_collator=DataCollatorForSeq2Seq(tokenizer, padding=True),
        processing_class=tokenizer,
    )
    start = time.perf_counter()
    train_resumable(trainer)
    train_seconds = time.perf_counter() - start
    accuracy_after = accuracy()
    state.print(f"exact-match accuracy after training: {accuracy_after:.3f}")

    results = {
        "accuracy_before": accuracy_before,
        "accuracy_after": accuracy_after,
        "train_seconds": train_seconds,
        "loss": loss_curve(trainer.state.log_history),
        "script_args": asdict(script_args),
    }
    if state.is_main_process:
        out = write_results(training_args.output_dir, results)
        plot_curves({"SFT": results["loss"]}, out / "loss.png", f"SFT of {script_args.model} on arithmetic")
        state.print(f"wrote {out / 'results.json'} and {out / 'loss.png'}")
    return results


if __name__ == "__main__":
    run_as_script(main)
