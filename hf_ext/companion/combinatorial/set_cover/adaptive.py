"""Adaptive choice among neighbourhood policies, as adaptive LNS does (Ropke and Pisinger, 2006): each iteration
draws a policy with probability following the objective gain per second it has been earning.

Why: GLNS's regions are connected sets around the incumbent. On correlated costs those regions hold no improvement
(a HiGHS solve of the whole region proves the incumbent optimal there), while random neighbourhoods, spread over
the instance, keep finding some; on rail_wide it is the other way round. Learning the mix at run time needs no
knowledge of the cost regime.
"""

from collections.abc import Callable

import numpy as np

from hf_ext._validation import check_number

from .instance import SetCoverInstance

Neighbourhood = Callable[[SetCoverInstance, np.ndarray, int, np.random.Generator], np.ndarray]


class AdaptiveNeighbourhood:
    """A neighbourhood policy (``(instance, incumbent, size, rng) -> columns``) that delegates each call to one of
    ``policies``: every policy once in turn, then drawn so that its expected share of the search's time is
    ``exploration / k + (1 - exploration) x`` its share of the rates, where a policy's rate is an exponential
    average (weight ``reaction``) of the gain per second of its iterations. ``run_lns`` reports each iteration
    through ``observe``.

    Why time and not draws: the policies differ in cost per call (at 1M columns a GLNS neighbourhood and its repair
    took 0.19 s, a random one 0.05 s), so an exploration share counted in draws gave a policy that earned nothing
    a quarter of the time. A policy's draw probability is its time share over its average seconds per call
    (the same exponential average)."""

    def __init__(self, policies: dict[str, Neighbourhood], reaction: float = 0.3, exploration: float = 0.1):
        if not policies:
            raise ValueError("AdaptiveNeighbourhood: `policies` must name at least one neighbourhood policy")
        check_number("AdaptiveNeighbourhood", "reaction", reaction)
        check_number("AdaptiveNeighbourhood", "exploration", exploration)
        if not 0 < reaction <= 1 or not 0 <= exploration <= 1:
            raise ValueError(
                f"AdaptiveNeighbourhood: `reaction` must be in (0, 1] and `exploration` in [0, 1], "
                f"got {reaction}, {exploration}"
            )
        self.policies, self.reaction, self.exploration = policies, reaction, exploration
        self.rates: dict[str, float | None] = dict.fromkeys(policies)
        self.seconds: dict[str, float | None] = dict.fromkeys(policies)  # per call
        self.counts = dict.fromkeys(policies, 0)
        self.last: str | None = None

    def probabilities(self) -> np.ndarray:
        """The chance of each policy (in ``policies``' order) at the next draw, once every one has been tried."""
        rates = np.array([self.rates[name] for name in self.policies], dtype=np.float64)
        seconds = np.array([self.seconds[name] for name in self.policies], dtype=np.float64)
        k, total = len(rates), rates.sum()
        share = rates / total if total > 0 else np.full(k, 1 / k)
        draws = (self.exploration / k + (1 - self.exploration) * share) / np.maximum(seconds, 1e-9)
        return draws / draws.sum()

    def __call__(self, instance: SetCoverInstance, incumbent: np.ndarray, size: int, rng) -> np.ndarray:
        untried = [name for name, rate in self.rates.items() if rate is None]
        names = list(self.policies)
        self.last = untried[0] if untried else names[rng.choice(len(names), p=self.probabilities())]
        self.counts[self.last] += 1
        return self.policies[self.last](instance, incumbent, size, rng)

    def observe(self, gain: float, seconds: float) -> None:
        """The last call's neighbourhood improved the objective by ``gain`` (>= 0) in ``seconds`` (choice and
        repair)."""
        if self.last is None:
            raise RuntimeError("AdaptiveNeighbourhood.observe: no neighbourhood was chosen yet")
        self.rates[self.last] = self._average(self.rates[self.last], gain / max(seconds, 1e-9))
        self.seconds[self.last] = self._average(self.seconds[self.last], seconds)

    def _average(self, previous: float | None, value: float) -> float:
        return value if previous is None else (1 - self.reaction) * previous + self.reaction * value
