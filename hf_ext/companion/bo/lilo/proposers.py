"""How each method picks the next batch from the points and outcomes so far: LILO and its baselines.

``PreferenceProposer`` (LILO with pairwise feedback; preferential BO with EUBO on true
comparisons) chooses pairs of observed outcomes by the expected utility of the best option under
the current ``PairwiseGP``, has them labelled, refits the ``PairwiseGP`` on every label and takes
its posterior mean at the observed outcomes as their utilities. ``UtilityProposer`` (LILO's
scalar variant; BO on the true utility) takes the utilities from its feedback directly. Both
then fit a proxy GP over the inputs on those utilities and maximise a batch acquisition function
on it: the same model and acquisition factories as :class:`~hf_ext.companion.bo.BayesianOptimization`.
``LLMOnlyProposer`` asks the LLM for the points themselves; ``RandomProposer`` draws them.
"""

import itertools
import random
import warnings
from dataclasses import dataclass, field

import torch
from botorch.acquisition.preference import AnalyticExpectedUtilityOfBestOption
from botorch.exceptions.errors import ModelFittingError
from botorch.fit import fit_gpytorch_mll
from botorch.models.pairwise_gp import PairwiseGP, PairwiseLaplaceMarginalLogLikelihood
from botorch.optim import optimize_acqf
from torch import Tensor

from ..factories import AcquisitionFactory, LogNEIFactory, ModelFactory, SingleTaskGPFactory
from .config import LILOConfig
from .feedback import describe
from .parsing import parse_json_object
from .transcript import Transcript


def fit_preference_model(outcomes: Tensor, comparisons: list[tuple[int, int]]) -> PairwiseGP:
    """BoTorch's ``PairwiseGP`` on ``outcomes`` (``n x m``) and ``(winner, loser)`` index pairs, Laplace-fitted.

    When every fitting attempt fails (it happens on a few contradictory labels), the model keeps its
    default hyperparameters, with a warning: the round still learns from the labels.
    """
    model = PairwiseGP(outcomes, torch.tensor(comparisons, dtype=torch.long))
    try:
        fit_gpytorch_mll(PairwiseLaplaceMarginalLogLikelihood(model.likelihood, model))
    except ModelFittingError as error:
        warnings.warn(f"PairwiseGP kept its default hyperparameters: {error}", RuntimeWarning, stacklevel=2)
        model = PairwiseGP(outcomes, torch.tensor(comparisons, dtype=torch.long))
    return model


def select_pairs(
    model: PairwiseGP | None, outcomes: Tensor, labelled: set[tuple[int, int]], k: int, rng: random.Random
) -> list[tuple[int, int]]:
    """The ``k`` unlabelled pairs of observed outcomes with the highest EUBO under ``model`` (random without one).

    EUBO (Lin et al., 2022) is ``E[max(g(y_i), g(y_j))]`` under the utility model ``g``: the pair
    whose better option is expected to be best, the most useful comparison to ask about.
    """
    pairs = [pair for pair in itertools.combinations(range(len(outcomes)), 2) if pair not in labelled]
    if model is None:
        return rng.sample(pairs, min(k, len(pairs)))
    with torch.no_grad():
        eubo = AnalyticExpectedUtilityOfBestOption(pref_model=model)(outcomes[torch.tensor(pairs)])
    return [pairs[i] for i in eubo.topk(min(k, len(pairs))).indices.tolist()]


@dataclass
class _ProxyAcquisition:
    """A proxy GP over the inputs on estimated utilities, and a batch chosen by the acquisition factory on it."""

    config: LILOConfig
    model_factory: ModelFactory = field(default_factory=SingleTaskGPFactory)
    acquisition_factory: AcquisitionFactory = field(default_factory=LogNEIFactory)

    def next_batch(self, round_index: int, X: Tensor, utilities: Tensor) -> Tensor:
        known = torch.isfinite(utilities)
        model = self.model_factory(X[known], utilities[known, None])
        unit = torch.stack([torch.zeros(X.shape[-1]), torch.ones(X.shape[-1])]).to(X)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.config.seed * 1_000_003 + round_index)
            batch, _ = optimize_acqf(
                self.acquisition_factory(model, round_index),
                unit,
                q=self.config.batch_size,
                num_restarts=self.config.num_restarts,
                raw_samples=self.config.raw_samples,
            )
        return batch.detach()


@dataclass
class UtilityProposer(_ProxyAcquisition):
    """Utilities straight from ``feedback.score`` (LLM probabilities of acceptance, or the true utility)."""

    feedback: object = None

    def propose(self, round_index: int, X: Tensor, outcomes: Tensor) -> Tensor:
        self.feedback.converse(round_index, outcomes[-self.config.shown_outcomes :])
        return self.next_batch(round_index, X, self.feedback.score(round_index, outcomes))


@dataclass
class PreferenceProposer(_ProxyAcquisition):
    """Labels of EUBO-chosen pairs from ``feedback.label``, a ``PairwiseGP`` on them, its mean as the utility."""

    feedback: object = None
    comparisons: list[tuple[int, int]] = field(default_factory=list, init=False)
    preference_model: PairwiseGP | None = field(default=None, init=False)

    def propose(self, round_index: int, X: Tensor, outcomes: Tensor) -> Tensor:
        self.feedback.converse(round_index, outcomes[-self.config.shown_outcomes :])
        labelled = {tuple(sorted(c)) for c in self.comparisons}
        rng = random.Random(self.config.seed * 1_000_003 + round_index)
        if self.preference_model is not None:  # the outcomes observed since the last fit join the model
            self.preference_model = fit_preference_model(outcomes, self.comparisons)
        pairs = select_pairs(self.preference_model, outcomes, labelled, self.config.pairs_per_round, rng)
        self.comparisons += self.feedback.label(round_index, pairs, outcomes)
        if not self.comparisons:  # nothing to learn from yet: explore
            return RandomProposer(self.config).propose(round_index, X, outcomes)
        self.preference_model = fit_preference_model(outcomes, self.comparisons)
        with torch.no_grad():
            utilities = self.preference_model.posterior(outcomes).mean.squeeze(-1)
        return self.next_batch(round_index, X, utilities)


def _generator(proposer, round_index: int) -> torch.Generator:
    return torch.Generator().manual_seed(proposer.config.seed * 1_000_003 + round_index)


def _any_answer(text: str) -> bool:
    return True


@dataclass
class LLMOnlyProposer:
    """The LLM proposes each point itself (JSON ``{"x": [...]}``), given the history and the conversation.

    An answer that is not a valid point in the unit cube is replaced by a random one (counted in
    :attr:`invalid`), so the baseline always spends its evaluations.
    """

    config: LILOConfig
    feedback: object
    transcript: Transcript
    invalid: int = field(default=0, init=False)

    def propose(self, round_index: int, X: Tensor, outcomes: Tensor) -> Tensor:
        self.feedback.converse(round_index, outcomes[-self.config.shown_outcomes :])
        names = self.feedback.names
        tried = "; ".join(
            f"x={[round(v, 2) for v in x.tolist()]} gave {describe(o, names)}" for x, o in zip(X, outcomes, strict=True)
        )
        prompt = (
            f"{self.feedback._context()}\nTried so far: {tried}.\nPropose a new x of {X.shape[-1]} numbers in [0, 1] "
            'that the decision maker will like more. Reply with JSON only: {"x": [...]}'
        )
        messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": '{"x": ['}]
        generator = _generator(self, round_index)
        seeds = [(self.config.seed * 1_000_003 + round_index) * 1_009 + n for n in range(self.config.batch_size)]
        chains = [(messages, [seed]) for seed in seeds]  # the batch's proposals at once on the feedback's executor
        answers = self.transcript.complete_many(
            self.feedback.backend, chains, _any_answer, self.feedback.executor, round=round_index, role="propose"
        )
        batch = []
        for (text,) in answers:
            fallback = torch.rand(X.shape[-1], dtype=X.dtype, generator=generator)
            try:
                point = torch.tensor(parse_json_object(text)["x"], dtype=X.dtype)
                valid = point.shape == fallback.shape and bool(((point >= 0) & (point <= 1)).all())
            except (ValueError, KeyError, TypeError, RuntimeError):
                valid = False
            self.invalid += not valid
            batch.append(point if valid else fallback)
        return torch.stack(batch)


@dataclass
class RandomProposer:
    """Uniformly random points: the floor every method should beat."""

    config: LILOConfig

    def propose(self, round_index: int, X: Tensor, outcomes: Tensor) -> Tensor:
        return torch.rand(self.config.batch_size, X.shape[-1], dtype=X.dtype, generator=_generator(self, round_index))
