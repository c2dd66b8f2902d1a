"""Preference signals from language: the LLM asks the decision maker, then labels pairs or scores outcomes.

``LLMFeedback`` is LILO's: each round the LLM asks one question about a few outcomes, the
decision maker answers in words, and, given everything said so far, the LLM labels pairs of
observed outcomes (JSON: choice and reason, several samples, majority vote) or gives each outcome
a probability of acceptance. A sample that is not valid JSON is retried with another seed, then
dropped; a round with fewer valid labels than ``min_answer_rate`` is an error, with every call
kept in the transcript. ``OracleFeedback`` gives the true answers (the baselines' feedback).

A round's labels and scores are independent calls (every pair or outcome, every sample): with an ``executor``
(:mod:`hf_ext.executors`) they run at once, the LLM's through :meth:`Transcript.complete_many` and
the decision maker's comparisons through ``run_jobs``, and give what one call after another gives.
"""

from collections import Counter
from concurrent.futures import Executor
from dataclasses import dataclass, field
from functools import partial

import torch
from torch import Tensor

from hf_ext.executors import run_jobs

from .backends import LLMBackend
from .config import LILOConfig
from .decision_makers import DecisionMaker
from .parsing import parse_json_object
from .transcript import Transcript

SYSTEM = "You help a decision maker choose among outcomes. Answer briefly."


class LLMAnswerError(RuntimeError):
    """The language model gave too few valid answers; the run's state is in its transcript."""


def describe(outcome: Tensor, names: list[str]) -> str:
    return ", ".join(f"{name} {value:.2f}" for name, value in zip(names, outcome.tolist(), strict=True))


def _choice(answer: dict) -> int | None:
    """0 for option A, 1 for option B, None when the answer names neither."""
    choice = str(answer.get("choice", "")).strip().upper().removeprefix("OPTION").strip()
    return {"A": 0, "1": 0, "B": 1, "2": 1}.get(choice)


def _probability(answer: dict) -> float | None:
    try:
        value = float(answer.get("probability"))
    except (TypeError, ValueError):
        return None
    value = value / 100 if 1 < value <= 100 else value
    return value if 0 <= value <= 1 else None


def _read(read, text: str):
    """``read``'s value of the JSON answer ``text``; None when it is not valid."""
    try:
        return read(parse_json_object(text))
    except ValueError:
        return None


def _valid(read, text: str) -> bool:
    return _read(read, text) is not None


@dataclass
class LLMFeedback:
    """LILO's feedback: conversation with the decision maker, then LLM labels or scores (see the module docstring)."""

    backend: LLMBackend
    decision_maker: DecisionMaker
    names: list[str]
    config: LILOConfig
    transcript: Transcript
    executor: Executor | None = None
    notes: list[str] = field(default_factory=list, init=False)

    def _context(self) -> str:
        said = " ".join([self.decision_maker.prior_knowledge(), *self.notes]).strip()
        return f"The decision maker said: {said}" if said else "The decision maker has said nothing yet."

    def converse(self, round_index: int, outcomes: Tensor) -> str:
        """The LLM asks about ``outcomes`` (numbered from 1), the decision maker answers; the answer is kept."""
        listing = "; ".join(f"option {i + 1}: {describe(o, self.names)}" for i, o in enumerate(outcomes))
        messages = [
            {"role": "system", "content": SYSTEM},
            {
                "role": "user",
                "content": f"{self._context()}\nOutcomes: {listing}.\nAsk the decision maker one "
                "short question about these outcomes.",
            },
        ]
        seed = self.config.seed * 1_000_003 + round_index
        question = self.transcript.complete(self.backend, messages, seed, round=round_index, role="question")
        answer = self.decision_maker.answer(question, outcomes)
        self.transcript.record(f"answer:{round_index}", "answer", round=round_index, question=question, answer=answer)
        self.notes.append(answer)
        return answer

    def _ask(self, prompts: list[tuple[list[dict], int]], read, round_index: int) -> list[list]:
        """Per prompt ``(messages, seed)``: the valid answers of ``config.samples`` samples, each tried
        ``1 + max_retries`` times with a new seed; every prompt's samples at once on the executor."""
        samples, attempts = self.config.samples, 1 + self.config.max_retries
        chains = [
            (messages, [seed + 7919 * sample + 104_729 * attempt for attempt in range(attempts)])
            for messages, seed in prompts
            for sample in range(samples)
        ]
        answers = self.transcript.complete_many(
            self.backend, chains, partial(_valid, read), self.executor, round=round_index
        )
        values = [_read(read, texts[-1]) for texts in answers]
        return [[v for v in values[i : i + samples] if v is not None] for i in range(0, len(values), samples)]

    def _check_rate(self, round_index: int, valid: int, asked: int, what: str) -> None:
        if valid < self.config.min_answer_rate * asked:
            where = self.transcript.path or "the in-memory transcript"
            raise LLMAnswerError(
                f"round {round_index}: the language model gave valid JSON for {valid} of {asked} {what} after "
                f"{1 + self.config.max_retries} tries each (min_answer_rate={self.config.min_answer_rate}); "
                f"every call and answer so far is kept in {where}"
            )

    def label(self, round_index: int, pairs: list[tuple[int, int]], outcomes: Tensor) -> list[tuple[int, int]]:
        """``(winner, loser)`` for each pair the LLM labels validly (majority of its samples; ties dropped)."""
        prompts = []
        for number, (i, j) in enumerate(pairs):
            prompt = (
                f"{self._context()}\nOption A: {describe(outcomes[i], self.names)}.\nOption B: "
                f"{describe(outcomes[j], self.names)}.\nWhich option does the decision maker prefer? Reply with "
                'JSON only: {"choice": "A" or "B", "reason": "..."}'
            )
            messages = [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": '{"choice": "'},  # a 135M model keeps to JSON only when started
            ]
            prompts.append((messages, (self.config.seed * 1_000_003 + round_index) * 1_009 + number))
        comparisons, answered = [], 0
        for (i, j), choices in zip(pairs, self._ask(prompts, _choice, round_index), strict=True):
            votes = Counter(choices).most_common()
            answered += bool(votes)
            choice = votes[0][0] if votes and (len(votes) == 1 or votes[0][1] > votes[1][1]) else None
            record = {"round": round_index, "pair": [i, j], "votes": dict(votes), "choice": choice}
            if hasattr(self.decision_maker, "prefers_first") and choice is not None:
                record["correct"] = (choice == 0) == self.decision_maker.prefers_first(outcomes[i], outcomes[j])
            self.transcript.record(f"label:{round_index}:{i}:{j}", "label", **record)
            if choice is not None:
                comparisons.append((i, j) if choice == 0 else (j, i))
        self._check_rate(round_index, answered, len(pairs), "pairs")
        return comparisons

    def score(self, round_index: int, outcomes: Tensor) -> Tensor:
        """Each outcome's mean probability of acceptance by the LLM (NaN where no sample was valid)."""
        prompts = []
        for number, outcome in enumerate(outcomes):
            prompt = (
                f"{self._context()}\nOutcome: {describe(outcome, self.names)}.\nHow likely is the decision maker "
                'to accept it? Reply with JSON only: {"probability": a number from 0 to 1, "reason": "..."}'
            )
            messages = [
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": prompt},
                {"role": "assistant", "content": '{"probability": '},
            ]
            prompts.append((messages, (self.config.seed * 1_000_003 + round_index) * 1_009 + number))
        scores = []
        answers = self._ask(prompts, _probability, round_index)
        for number, (outcome, values) in enumerate(zip(outcomes, answers, strict=True)):
            scores.append(sum(values) / len(values) if values else float("nan"))
            record = {"round": round_index, "outcome": number, "samples": values}
            if hasattr(self.decision_maker, "utility"):  # the truth the scores are judged against, as for labels
                record["utility"] = self.decision_maker.utility(outcome[None]).item()
            self.transcript.record(f"score:{round_index}:{number}", "score", **record)
        scores = torch.tensor(scores, dtype=outcomes.dtype)
        self._check_rate(round_index, int(torch.isfinite(scores).sum()), len(scores), "outcomes")
        return scores


@dataclass
class OracleFeedback:
    """The true comparisons and utilities of a simulated decision maker: preferential BO and BO on the utility."""

    decision_maker: DecisionMaker
    executor: Executor | None = None

    def converse(self, round_index: int, outcomes: Tensor) -> str:
        return ""

    def label(self, round_index: int, pairs: list[tuple[int, int]], outcomes: Tensor) -> list[tuple[int, int]]:
        """The decision maker's comparison of every pair, all at once on the executor."""
        jobs = [(outcomes[i], outcomes[j]) for i, j in pairs]
        prefers = run_jobs(self.executor, self.decision_maker.prefers_first, jobs)
        return [(i, j) if first else (j, i) for (i, j), first in zip(pairs, prefers, strict=True)]

    def score(self, round_index: int, outcomes: Tensor) -> Tensor:
        return self.decision_maker.utility(outcomes)
