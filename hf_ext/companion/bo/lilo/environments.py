"""Environments: a BoTorch multi-objective test problem, its outcomes on a common scale, and a hidden utility.

Each outcome is negated where BoTorch minimises it and mapped linearly to ``[0, 1]`` by the
range seen on 2048 Sobol points (seed 0), so 1 is good and the decision maker's utilities can
speak of "low" and "high" on every problem. The utility's best value is estimated on the same
kind of sample (plus the points a run finds), for reporting how close a run gets.
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch
from botorch.test_functions.multi_objective import DTLZ2, BraninCurrin, VehicleSafety
from torch import Tensor
from torch.quasirandom import SobolEngine

from .decision_makers import SimulatedDecisionMaker
from .utility_functions import BetaCDFProductUtility, L1IdealUtility, PiecewiseLinearUtility


@dataclass
class Environment:
    """``problem`` (maximised outcomes) with outcome ``names`` and a hidden ``utility`` over the scaled outcomes."""

    name: str
    problem: object
    names: list[str]
    utility: Callable[[Tensor], Tensor]

    def __post_init__(self):
        sample = SobolEngine(self.dim, scramble=True, seed=0).draw(2048, dtype=torch.float64)
        raw = self.problem(self.from_unit(sample))
        self._low, self._high = raw.min(0).values, raw.max(0).values
        self.best_utility = self.utility(self.outcomes(sample)).max().item()

    @property
    def dim(self) -> int:
        return self.problem.dim

    @property
    def bounds(self) -> Tensor:
        return self.problem.bounds.to(torch.float64)

    def from_unit(self, X: Tensor) -> Tensor:
        return self.bounds[0] + X * (self.bounds[1] - self.bounds[0])

    def outcomes(self, X: Tensor) -> Tensor:
        """The scaled outcomes (``n x m``, 1 = best seen) of the points ``X`` given in the unit cube."""
        return ((self.problem(self.from_unit(X)) - self._low) / (self._high - self._low)).clamp(0, 1)

    def true_utility(self, X: Tensor) -> Tensor:
        return self.utility(self.outcomes(X))

    def decision_maker(self, seed: int = 0) -> SimulatedDecisionMaker:
        return SimulatedDecisionMaker(self.utility, self.names, seed)


def _dtlz2() -> Environment:
    problem = DTLZ2(dim=4, num_objectives=2, negate=True)
    return Environment("dtlz2", problem, ["accuracy", "speed"], L1IdealUtility([0.8, 0.7], [1.0, 1.0]))


def _vehicle_safety() -> Environment:
    utility = PiecewiseLinearUtility([0.7, 0.6, 0.8], [1.0, 0.8, 1.2])
    names = ["lightness", "crash safety", "durability"]
    return Environment("vehicle_safety", VehicleSafety(negate=True), names, utility)


def _branin_currin() -> Environment:
    utility = BetaCDFProductUtility([4.0, 3.0], [2.0, 2.0])
    return Environment("branin_currin", BraninCurrin(negate=True), ["yield", "purity"], utility)


ENVIRONMENTS = {"dtlz2": _dtlz2, "vehicle_safety": _vehicle_safety, "branin_currin": _branin_currin}


def make_environment(name: str) -> Environment:
    """One of :data:`ENVIRONMENTS` by name."""
    if name not in ENVIRONMENTS:
        raise ValueError(f"`environment` must be one of {list(ENVIRONMENTS)}, got {name!r}")
    return ENVIRONMENTS[name]()
