"""What the loop corrupts observations through: an adversary has ``corrupt(round_index, value, best_so_far)`` and
``corrupted_rounds``. The default corrupts nothing; the adversary robust BO is judged against is
:class:`hf_ext.companion.evaluation.bo.FrequencyLimitedAdversary`.
"""

from dataclasses import dataclass, field


@dataclass
class NoCorruption:
    """Observations are the objective's values."""

    corrupted_rounds: list[int] = field(default_factory=list, init=False)

    def corrupt(self, round_index: int, value: float, best_so_far: float) -> float:
        return value
