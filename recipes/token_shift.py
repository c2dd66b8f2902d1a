"""Where likelihood moved: per-token log-prob changes of a trained policy against its reference.

    hf-ext run token_shift policy=outputs/my_dpo_run reference=smollm2

Scores the chosen and rejected responses of held-out arithmetic preference pairs under both
models and writes ``token_shift.json`` (per response kind: mean log-probs before and after, the
share of the total change carried by the top 1% / 5% of tokens, the outlier tokens; and log P)
and ``token_shift.png`` (histogram of the per-token changes) to ``output_dir``.
"""

from dataclasses import dataclass, field

from trl import TrlParser

from hf_ext._validation import check_finite_fields
from hf_ext.alignment import token_shift, write_report
from hf_ext.data import preference_dataset
from hf_ext.models import check_causal_lm, load_causal_lm
from hf_ext.recipes._jobs import on_main_process
from hf_ext.recipes._script import run_as_script
from hf_ext.recipes._settings import settings_parser


@dataclass
class TokenShiftArguments:
    policy: str = field(metadata={"help": "Trained model: a save_pretrained directory, 'smollm2' or 'tiny'."})
    reference: str = field(default="smollm2", metadata={"help": "Model before training, same choices as policy."})
    num_pairs: int = field(default=64, metadata={"help": "Preference pairs to score."})
    difficulty: int = field(default=1, metadata={"help": "Arithmetic difficulty of the pairs, 1 to 4."})
    pairs_seed: int = field(
        default=1, metadata={"help": "Seed of the pairs; 1 gives the held-out pairs of dpo_regularized at seed 0."}
    )
    batch_size: int = field(default=8, metadata={"help": "Sequences per forward pass."})
    output_dir: str = field(default="outputs/token_shift", metadata={"help": "Where the JSON and PNG go."})

    def __post_init__(self):
        check_finite_fields(self)
        check_causal_lm("policy", self.policy)
        check_causal_lm("reference", self.reference)


def parser(argv: list[str] | None = None) -> TrlParser:
    """The parser ``main`` reads its settings with (the same for every ``argv``)."""
    return settings_parser(TokenShiftArguments)


@on_main_process
def main(argv: list[str] | None = None) -> dict:
    (args,) = parser(argv).parse_args_and_config(argv)
    policy, tokenizer = load_causal_lm(args.policy)
    reference, _ = load_causal_lm(args.reference)
    pairs = preference_dataset(args.num_pairs, args.difficulty, seed=args.pairs_seed)
    shift = token_shift(policy, reference, pairs, tokenizer, batch_size=args.batch_size)
    summary = write_report({"policy": shift}, args.output_dir, "Per-token log-prob change")["policy"]
    for kind in ("chosen", "rejected"):
        s = summary[kind]
        print(
            f"{kind}: mean log-prob {s['mean_logps_reference']:.3f} -> {s['mean_logps_policy']:.3f}; top 1% of "
            f"tokens carry {s['top_1pct_share']:.0%} of the change, top 5% {s['top_5pct_share']:.0%}"
        )
    print(f"log P {summary['log_p']['reference']:.3f} -> {summary['log_p']['policy']:.3f}; wrote {args.output_dir}")
    return summary


if __name__ == "__main__":
    run_as_script(main)
