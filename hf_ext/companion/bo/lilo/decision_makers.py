"""Simulated decision makers: a hidden utility that answers in natural language from templates, deterministic by seed.

The answers rank the outcomes they are shown and say what the decision maker wants in words
("more safety", "at least moderate cost"), never the utility's formula or its numbers: the
language model has to turn them into preferences, as with a person. ``ScriptedDecisionMaker``
replays fixed answers for tests.
"""

import random
from dataclasses import dataclass, field
from typing import Protocol

import torch
from torch import Tensor

OPENINGS = ("Looking at these,", "Honestly,", "From what I see,", "Hmm.")
RANKINGS = (
    "option {best} is the one I like most and option {worst} the least.",
    "I prefer option {best}; option {worst} is the weakest.",
    "option {best} comes closest to what I want, option {worst} is furthest.",
)
WANTS = ("I would most like more {name}.", "What I miss most is {name}.", "More {name} would help me the most.")


class DecisionMaker(Protocol):
    def prior_knowledge(self) -> str: ...

    def answer(self, question: str, outcomes: Tensor) -> str: ...


@dataclass
class SimulatedDecisionMaker:
    """Answers questions about outcomes (``n x m``, the environment's scale) from a hidden ``utility``.

    Args:
        utility: maps ``n x m`` outcomes to ``n`` values (higher is better); see :mod:`.utility_functions`.
        names: the outcomes' names, as the decision maker calls them.
        seed: chooses the phrasing; the same seed and questions give the same answers.
    """

    utility: object
    names: list[str]
    seed: int = 0
    _answers: int = field(default=0, init=False, repr=False, compare=False)

    def prior_knowledge(self) -> str:
        """What the decision maker says before any outcome is seen: its wants in words."""
        hints = self.utility.hints(self.names)
        random.Random(self.seed).shuffle(hints)
        return " ".join(hints)

    def answer(self, question: str, outcomes: Tensor) -> str:
        """A reply to ``question`` about the outcomes shown, numbered from 1: which it prefers, and what it misses."""
        rng = random.Random(f"{self.seed}:{self._answers}")
        self._answers += 1
        values = self.utility(outcomes)
        best, worst = int(values.argmax()) + 1, int(values.argmin()) + 1
        reply = [rng.choice(OPENINGS), rng.choice(RANKINGS).format(best=best, worst=worst)]
        reply.append(rng.choice(WANTS).format(name=self.names[self._most_wanted(outcomes[best - 1])]))
        return " ".join(reply)

    def _most_wanted(self, outcome: Tensor) -> int:
        """The outcome whose improvement (by 0.1 on its scale) raises the utility most."""
        step = 0.1 * torch.eye(len(outcome), dtype=outcome.dtype)
        return int((self.utility(outcome + step) - self.utility(outcome[None])).argmax())

    def prefers_first(self, first: Tensor, second: Tensor) -> bool:
        """The true comparison (ties to the first): what the decision maker would answer, and the labels' truth."""
        values = self.utility(torch.stack([first, second]))
        return bool(values[0] >= values[1])


@dataclass
class ScriptedDecisionMaker:
    """Replays ``answers`` in order (cycling) and ``prior`` as prior knowledge: for tests."""

    answers: list[str]
    prior: str = ""
    _answers: int = field(default=0, init=False, repr=False, compare=False)

    def prior_knowledge(self) -> str:
        return self.prior

    def answer(self, question: str, outcomes: Tensor) -> str:
        self._answers += 1
        return self.answers[(self._answers - 1) % len(self.answers)]
