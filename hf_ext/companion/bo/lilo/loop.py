"""The LILO loop and its baselines in one harness: initial design, then rounds of feedback and a batch each.

    X (Sobol) -> outcomes -> [LLM asks, decision maker answers -> LLM labels EUBO-chosen pairs
    -> PairwiseGP -> posterior mean as utility -> proxy GP -> qLogNEI batch] -> outcomes -> ...

Every LLM call, answer, label and evaluation goes to the transcript (JSON lines) as it is made;
a loop created on an existing transcript replays the run and takes every LLM answer from it, so
a killed run resumes without repeating a call, and only under the settings stored beside it.

The replay is exact in a new process too: each round's proposal runs inside
:func:`~hf_ext._random.seeded_global_rng`, seeded from ``config.seed`` and the round, because BoTorch's
``PairwiseGP`` starts its solver from NumPy's global generator (and a failed fit's retry draws from
torch's). A replayed evaluation that differs from the transcript's is an error, not a silent fork.
"""

import itertools
import statistics
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch.quasirandom import SobolEngine

from hf_ext._random import derived_seed, seeded_global_rng
from hf_ext._settings import check_and_store_settings
from hf_ext.executors import check_executor

from ..descriptions import describe
from ..factories import AcquisitionFactory, LogNEIFactory, ModelFactory, SingleTaskGPFactory
from .backends import LLMBackend
from .config import LILOConfig
from .decision_makers import DecisionMaker
from .environments import Environment
from .feedback import LLMFeedback, OracleFeedback
from .proposers import LLMOnlyProposer, PreferenceProposer, RandomProposer, UtilityProposer
from .transcript import Transcript

METHODS = ("lilo", "preferential", "true_utility", "llm_only", "random")
LLM_METHODS = ("lilo", "llm_only")
PROXY_GP_METHODS = ("lilo", "preferential", "true_utility")  # those that fit a proxy GP and maximise an acquisition


@dataclass
class RoundResult:
    """After a round: evaluations so far, the true utility of the best of them, LLM calls and label accuracy.

    ``labels`` counts the LLM's labels judged against the hidden utility so far: pairs labelled, or
    with scalar feedback the pairs of one round's outcomes it scored apart (:func:`implied_labels`).
    """

    round: int
    evaluations: int
    best_utility: float
    llm_calls: int
    labels: int
    correct_labels: int


def implied_labels(scores: list[dict]) -> list[bool]:
    """Whether each pair of outcomes scored apart in one round is ordered as the hidden utility orders them.

    The scalar variant's counterpart of a label's correctness: two outcomes that the LLM gave
    different mean probabilities of acceptance in the same round amount to a label, right when the
    one scored higher has the higher true utility. Equal scores, like a tied vote, label nothing.
    """
    by_round = defaultdict(list)
    for record in scores:
        if record["samples"]:
            by_round[record["round"]].append((statistics.fmean(record["samples"]), record["utility"]))
    return [
        (first[0] - second[0]) * (first[1] - second[1]) > 0
        for scored in by_round.values()
        for first, second in itertools.combinations(scored, 2)
        if first[0] != second[0]
    ]


class LILO:
    """Language-in-the-loop BO on ``environment`` (``method="lilo"``), or one of its baselines in the same harness.

    Args:
        environment: the problem, its outcomes and its hidden utility (:mod:`.environments`).
        backend: the language model (``lilo`` and ``llm_only``; see :mod:`.backends`).
        config: rounds, batch size, pairs, samples, retries, seed (:class:`LILOConfig`).
        method: ``lilo`` (``config.feedback`` pairwise or scalar), ``preferential`` (EUBO on true
            comparisons), ``true_utility`` (BO on the utility itself), ``llm_only`` or ``random``.
        decision_maker: who answers (default: the environment's simulated one, seeded by ``config.seed``).
        transcript_file: JSON lines of the run; resumed when it exists, under the same settings only.
        model_factory: the proxy GP (default SingleTaskGP); stored with the settings, as it chooses the points.
        acquisition_factory: the batch acquisition (default qLogNEI); stored with the settings, as it chooses the
            points.
        executor: runs a round's independent calls at once (the LLM's labels, scores and proposals, every
            sample; the decision maker's comparisons): a ``concurrent.futures.Executor`` (threads for an HTTP
            backend, processes or a cluster for a local model; see docs/cluster.md) or None (one after another
            here). The run's answers and transcript are the same on any executor for a backend that is
            reproducible by seed, so it is not a setting and may change on resume.
    """

    def __init__(
        self,
        environment: Environment,
        backend: LLMBackend | None = None,
        config: LILOConfig | None = None,
        method: str = "lilo",
        decision_maker: DecisionMaker | None = None,
        transcript_file: str | Path | None = None,
        model_factory: ModelFactory | None = None,
        acquisition_factory: AcquisitionFactory | None = None,
        executor: Executor | None = None,
    ):
        self.executor = check_executor(executor, "LILO")
        if method not in METHODS:
            raise ValueError(f"LILO: `method` must be one of {list(METHODS)}, got {method!r}")
        if method in LLM_METHODS and backend is None:
            raise ValueError(f"LILO: method {method!r} needs a `backend` (a language model), got None")
        self.environment, self.method = environment, method
        self.config = config if config is not None else LILOConfig()
        self.decision_maker = decision_maker or environment.decision_maker(self.config.seed)
        self.backend = backend if method in LLM_METHODS else None
        proxy_gp = method in PROXY_GP_METHODS
        self.model_factory = (model_factory or SingleTaskGPFactory()) if proxy_gp else None
        self.acquisition_factory = (acquisition_factory or LogNEIFactory()) if proxy_gp else None
        path = None if transcript_file is None else Path(transcript_file)
        if path is not None:
            check_and_store_settings(
                path.with_name(f"{path.stem}.settings.json"),
                self.settings(),
                resuming=path.is_file() and path.stat().st_size > 0,
                run=f"the LILO transcript {path}",
                start_fresh=f"pass another `transcript_file`, or delete {path}",
            )
        self.transcript = Transcript(path)
        self.proposer = self._proposer()

    def settings(self) -> dict[str, Any]:
        """What decides the run's questions, labels and points (JSON-serialisable)."""
        return {
            "method": self.method,
            "config": asdict(self.config),
            "environment": self.environment.name,
            "backend": describe(self.backend) if self.backend is not None else None,
            "decision_maker": describe(self.decision_maker),
            "model_factory": describe(self.model_factory) if self.model_factory is not None else None,
            "acquisition_factory": describe(self.acquisition_factory) if self.acquisition_factory is not None else None,
        }

    def _proposer(self):
        config, names = self.config, self.environment.names
        if self.method == "random":
            return RandomProposer(config)
        if self.method in LLM_METHODS:
            feedback = LLMFeedback(self.backend, self.decision_maker, names, config, self.transcript, self.executor)
        else:
            feedback = OracleFeedback(self.decision_maker, self.executor)
        if self.method == "llm_only":
            return LLMOnlyProposer(config, feedback, self.transcript)
        scalar = self.method == "true_utility" or (self.method == "lilo" and config.feedback == "scalar")
        return (UtilityProposer if scalar else PreferenceProposer)(
            config, self.model_factory, self.acquisition_factory, feedback=feedback
        )

    def _result(self, round_index: int, X: torch.Tensor) -> RoundResult:
        so_far = [r for r in self.transcript.records if r.get("round", 0) <= round_index]
        labels = [r["correct"] for r in so_far if r["kind"] == "label" and "correct" in r]
        labels += implied_labels([r for r in so_far if r["kind"] == "score" and "utility" in r])
        return RoundResult(
            round_index,
            len(X),
            self.environment.true_utility(X).max().item(),
            sum(r["kind"] == "llm" for r in so_far),
            len(labels),
            sum(labels),
        )

    def _evaluate(self, round_index: int, X: torch.Tensor, first: int) -> torch.Tensor:
        outcomes = self.environment.outcomes(X)
        for number, (x, y) in enumerate(zip(X.tolist(), outcomes.tolist(), strict=True), start=first):
            recorded = self.transcript.record(f"evaluation:{number}", "evaluation", round=round_index, x=x, outcomes=y)
            if recorded["x"] != x:
                raise ValueError(
                    f"{self.transcript.path}: the replayed run evaluates x = {x} where the transcript holds "
                    f"x = {recorded['x']} (evaluation {number}, round {round_index}): it was not made by this code "
                    "under these settings; start fresh with another `transcript_file`"
                )
        return outcomes

    def run(self, callback: Callable[[RoundResult], None] | None = None) -> list[RoundResult]:
        """The initial design (round 0) and ``config.rounds`` feedback rounds; one result per round."""
        dim = self.environment.dim
        X = SobolEngine(dim, scramble=True, seed=self.config.seed).draw(self.config.n_initial, dtype=torch.float64)
        outcomes = self._evaluate(0, X, 0)
        results = [self._result(0, X)]
        for round_index in range(1, self.config.rounds + 1):
            with seeded_global_rng(derived_seed(self.config.seed, round_index, "propose")):
                batch = self.proposer.propose(round_index, X, outcomes)
            outcomes = torch.cat([outcomes, self._evaluate(round_index, batch, len(X))])
            X = torch.cat([X, batch])
            results.append(self._result(round_index, X))
            if callback is not None:
                callback(results[-1])
        return results
