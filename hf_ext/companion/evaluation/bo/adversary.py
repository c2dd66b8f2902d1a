"""The adversary robust BO is judged against: limited in how often it corrupts observations, not in how much.

RCGP-UCB's guarantees hold against up to ``floor(T^(1/4))`` corruptions (stable variant) or
``floor(T^(1/7))`` (adaptive variant) over ``T`` rounds, each of any magnitude, infinity included.
"""

import math
import random
from dataclasses import dataclass, field

from hf_ext._validation import check_count, check_finite_fields

PLACEMENTS = ("random", "best")


@dataclass
class FrequencyLimitedAdversary:
    """Corrupts at most ``floor(horizon ** exponent)`` of ``horizon`` rounds by ``+-magnitude``.

    ``placement="random"`` spends the budget on rounds drawn uniformly at random (seeded);
    ``"best"`` spends it where it hurts most, on the first rounds whose true value beats every
    value seen so far (a new incumbent). ``direction=-1`` subtracts (hides good points), ``+1``
    adds (a fake optimum). ``magnitude=math.inf`` replaces the value by ``+-inf``.
    """

    horizon: int
    magnitude: float = 1e6
    exponent: float = 0.25
    placement: str = "random"
    direction: int = -1
    seed: int = 0
    corrupted_rounds: list[int] = field(default_factory=list, init=False)

    def __post_init__(self):
        check_finite_fields(self, allow_infinite=("magnitude",))
        check_count(type(self).__name__, "horizon", self.horizon, 1)
        check_count(type(self).__name__, "seed", self.seed)  # random.Random(-s) is random.Random(s)
        if not 0 < self.exponent < 1:
            raise ValueError(f"FrequencyLimitedAdversary: `exponent` must be in (0, 1), got {self.exponent}")
        if self.placement not in PLACEMENTS:
            raise ValueError(
                f"FrequencyLimitedAdversary: `placement` must be one of {list(PLACEMENTS)}, got {self.placement!r}"
            )
        if self.direction not in (-1, 1):
            raise ValueError(f"FrequencyLimitedAdversary: `direction` must be -1 or 1, got {self.direction}")
        if not self.magnitude > 0:
            raise ValueError(f"FrequencyLimitedAdversary: `magnitude` must be > 0 (inf allowed), got {self.magnitude}")
        rounds = random.Random(self.seed).sample(range(self.horizon), self.budget)
        self._planned = set(rounds) if self.placement == "random" else None

    @property
    def budget(self) -> int:
        """How many rounds may be corrupted: ``floor(horizon ** exponent)`` (exact powers despite rounding)."""
        return math.floor(self.horizon**self.exponent + 1e-9)

    def corrupt(self, round_index: int, value: float, best_so_far: float) -> float:
        """The observation of round ``round_index`` whose true value is ``value``."""
        if len(self.corrupted_rounds) >= self.budget:
            return value
        targeted = round_index in self._planned if self._planned is not None else value > best_so_far
        if not targeted:
            return value
        self.corrupted_rounds.append(round_index)
        return self.direction * math.inf if math.isinf(self.magnitude) else value + self.direction * self.magnitude
