"""LILO's settings: one dataclass, validated at construction and stored with the run's transcript."""

from dataclasses import dataclass, field

from hf_ext._validation import check_finite_fields

FEEDBACK = ("pairwise", "scalar")


@dataclass
class LILOConfig:
    """How a LILO run (and its baselines, in the same harness) spends evaluations and language-model calls."""

    feedback: str = field(
        default="pairwise",
        metadata={
            "help": f"One of {list(FEEDBACK)}: the LLM labels pairs of outcomes (PairwiseGP), or gives each "
            "outcome a probability of acceptance (a GP on those)."
        },
    )
    n_initial: int = field(default=4, metadata={"help": "Sobol points evaluated before the first feedback (>= 2)."})
    batch_size: int = field(default=2, metadata={"help": "Points evaluated per feedback round (>= 1)."})
    rounds: int = field(default=4, metadata={"help": "Feedback rounds after the initial design (>= 1)."})
    pairs_per_round: int = field(default=3, metadata={"help": "Pairs of observed outcomes labelled per round (>= 1)."})
    samples: int = field(default=3, metadata={"help": "LLM samples per label, majority vote (>= 1)."})
    max_retries: int = field(default=1, metadata={"help": "Extra tries of a sample that is not valid JSON (>= 0)."})
    min_answer_rate: float = field(
        default=0.2, metadata={"help": "Share of labels in a round that must be valid, in [0, 1]; else an error."}
    )
    shown_outcomes: int = field(
        default=4, metadata={"help": "Outcomes shown to the decision maker with each question (>= 2)."}
    )
    seed: int = field(default=0, metadata={"help": "Seeds the design, the LLM samples and the acquisition."})
    num_restarts: int = field(default=2, metadata={"help": "optimize_acqf restarts (>= 1)."})
    raw_samples: int = field(default=64, metadata={"help": "optimize_acqf raw samples (>= 1)."})

    def __post_init__(self):
        check_finite_fields(self)
        owner = type(self).__name__
        if self.feedback not in FEEDBACK:
            raise ValueError(f"{owner}: `feedback` must be one of {list(FEEDBACK)}, got {self.feedback!r}")
        minimum = {"n_initial": 2, "batch_size": 1, "rounds": 1, "pairs_per_round": 1, "samples": 1}
        minimum |= {"max_retries": 0, "shown_outcomes": 2, "num_restarts": 1, "raw_samples": 1}
        for name, low in minimum.items():
            value = getattr(self, name)
            if not (_is_int(value) and value >= low):
                raise ValueError(f"{owner}: `{name}` must be an integer >= {low}, got {value!r}")
        if not _is_int(self.seed):
            raise ValueError(f"{owner}: `seed` must be an integer, got {self.seed!r}")
        if not 0 <= self.min_answer_rate <= 1:
            raise ValueError(f"{owner}: `min_answer_rate` must be in [0, 1], got {self.min_answer_rate}")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
