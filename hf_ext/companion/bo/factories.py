"""The BO loop's pluggable pieces, BoTorch-style: model factories and acquisition factories, and the ready-made ones.

A model factory is any callable ``(X, Y) -> Model``: ``X`` the evaluations so far scaled to the
unit cube (``n x d``), ``Y`` their observations as made (``n x 1``, ``+-inf`` and huge values
included, though :class:`SingleTaskGPFactory` refuses ``+-inf``). An acquisition factory is any
callable ``(model, t) -> AcquisitionFunction``, ``t`` counting the model-based rounds from 1; the
loop maximises what it returns with ``optimize_acqf`` over the unit cube, or, for a BoTorch
``SamplingStrategy`` (Thompson sampling), applies it to random candidates. The ready-made factories
are dataclasses, so a run's stored settings name them with their fields.

With points in flight (``q > 1`` or an asynchronous run) the loop needs a batch acquisition: a Monte-Carlo one
(BoTorch's ``q...`` classes, which take the points still running as ``X_pending``) or a ``SamplingStrategy``. A
factory whose ``__call__`` returns an analytic acquisition offers its batch form as ``batch(model, t)``, as
:class:`UCBFactory` does with ``qUpperConfidenceBound``; the loop calls it in those runs.

A model factory that carries state from one fit to the next (:class:`RCGPFactory`'s warm start)
exposes it as ``state_dict()`` (JSON-ready) and ``load_state_dict(state)``: the loop stores it with
each evaluation and loads the last one on resuming, so a resumed run fits from where the
uninterrupted one would have (a factory holding state without them would resume from a cold fit).
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from botorch.acquisition import (
    AcquisitionFunction,
    UpperConfidenceBound,
    qLogNoisyExpectedImprovement,
    qUpperConfidenceBound,
)
from botorch.fit import fit_gpytorch_mll
from botorch.generation import MaxPosteriorSampling
from botorch.generation.sampling import SamplingStrategy
from botorch.models import SingleTaskGP
from botorch.models.model import Model
from botorch.models.robust_relevance_pursuit_model import RobustRelevancePursuitSingleTaskGP
from botorch.models.transforms import Standardize
from gpytorch.mlls import ExactMarginalLogLikelihood
from torch import Tensor

from hf_ext._validation import check_finite_fields

from .rcgp import RobustConjugateGP, check_threshold, check_training_data, robust_scale

ModelFactory = Callable[[Tensor, Tensor], Model]
AcquisitionFactory = Callable[[Model, int], AcquisitionFunction | SamplingStrategy]
# Standard GPs cannot hold an infinite observation; they see +-CLIP instead (and are wrecked by it).
CLIP = 1e10


def robust_standardize(values: Tensor) -> tuple[Tensor, float, float]:
    """``(values - median) / robust_scale`` over the finite values (:func:`~.rcgp.robust_scale`); infinities stay.

    Mean and standard deviation would be destroyed by a single huge or infinite observation.
    """
    finite = values[torch.isfinite(values)]
    if len(finite) == 0:
        return values, 0.0, 1.0
    center = finite.median().item()
    scale = robust_scale(finite)
    scale = scale if scale > 0 else 1.0
    return (values - center) / scale, center, scale


def ucb_beta(round_index: int, dim: int, delta: float = 0.1, scale: float = 0.2) -> float:
    """GP-UCB's exploration weight for a continuous domain (Srinivas et al., 2010, Theorem 2), times ``scale``.

    ``2 log(2 pi^2 t^2 / (3 delta)) + 2 d log(t^2 d sqrt(log(4 d / delta)))`` with the domain and
    smoothness constants set to 1 (inputs in the unit cube). The bound's value over-explores in
    practice; ``scale=0.2`` is the usual correction (Kandasamy et al.), ``scale=1`` the theory's.
    """
    t = max(round_index, 1)
    theory = 2 * math.log(2 * math.pi**2 * t**2 / (3 * delta)) + 2 * dim * math.log(
        t**2 * dim * math.sqrt(math.log(4 * dim / delta))
    )
    return scale * theory


def _fit_exact_gp(owner: object, model_class: type[SingleTaskGP], X: Tensor, Y: Tensor, **options) -> SingleTaskGP:
    check_training_data(type(owner).__name__, X, Y)
    model = model_class(X, Y.clamp(-CLIP, CLIP), outcome_transform=Standardize(1), **options)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model


@dataclass
class SingleTaskGPFactory:
    """BoTorch's ``SingleTaskGP`` (standardised outputs) fitted by marginal likelihood; values clipped to +-1e10.

    A non-finite observation is refused, naming the robust model: clipped silently, one ``+inf`` wrecked the
    baseline users compare against (a posterior mean of 2e7 where the values are 0-4).
    """

    def __call__(self, X: Tensor, Y: Tensor) -> SingleTaskGP:
        if not torch.isfinite(Y).all():
            rows = torch.nonzero(~torch.isfinite(Y.reshape(-1))).flatten().tolist()
            raise ValueError(
                f"{type(self).__name__}: observations {rows} are {Y.reshape(-1)[rows].tolist()}; a standard GP "
                "cannot hold a non-finite observation: use model='rcgp' (RobustConjugateGP, where it drops out), or "
                "ClippedGPFactory() to see it as +-1e10"
            )
        return _fit_exact_gp(self, SingleTaskGP, X, Y)


@dataclass
class ClippedGPFactory(SingleTaskGPFactory):
    """:class:`SingleTaskGPFactory` that sees ``+-inf`` as ``+-1e10``: what an infinite corruption does to a standard
    GP, the baseline that ``bo_robust`` measures under infinite corruptions."""

    def __call__(self, X: Tensor, Y: Tensor) -> SingleTaskGP:
        return _fit_exact_gp(self, SingleTaskGP, X, Y)


@dataclass
class RelevancePursuitFactory:
    """BoTorch's ``RobustRelevancePursuitSingleTaskGP`` (the outside robust baseline); ``+-inf`` clipped to 1e10.

    Its prior on the number of outliers has mean ``int(0.2 n)`` by default: 0 below five observations, whose log
    failed the fit ("math domain error"). The mean is at least one outlier here; from five observations on it is
    BoTorch's.
    """

    def __call__(self, X: Tensor, Y: Tensor) -> RobustRelevancePursuitSingleTaskGP:
        outliers = max(1, int(0.2 * X.shape[-2]))
        return _fit_exact_gp(self, RobustRelevancePursuitSingleTaskGP, X, Y, prior_mean_of_support=outliers)


@dataclass
class RCGPFactory:
    """:class:`RobustConjugateGP` on robustly standardised outputs, warm-started from the previous round's fit.

    ``c=None`` takes the adaptive threshold (``epsilon``); ``max_iter`` bounds each L-BFGS fit. The
    warm start (the last fit's raw hyperparameters) is :meth:`state_dict`, so a resumed run keeps it.
    The leave-one-out objective has several optima, and a warm start alone kept a poor one round after
    round (lengthscales at the floor in one input: UCB then saw the domain as noise, and never left the
    initial design on a quadratic bowl), so each round also fits from the default start (lengthscales at
    their prior's mode) and keeps whichever fit reaches the higher :meth:`~RobustConjugateGP.fit_objective`.
    """

    c: float | None = 2.0
    epsilon: float = 0.05
    max_iter: int = 20
    _warm_start: dict[str, Tensor] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        check_finite_fields(self)
        check_threshold("RCGPFactory", self.c, self.epsilon)
        if self.max_iter < 1:
            raise ValueError(f"RCGPFactory: `max_iter` must be an integer >= 1, got {self.max_iter}")

    def __call__(self, X: Tensor, Y: Tensor) -> RobustConjugateGP:
        targets = robust_standardize(Y)[0]
        model = self._fitted(X, targets, self._warm_start)
        if self._warm_start is not None:
            fresh = self._fitted(X, targets, None)
            if fresh.fit_objective().item() > model.fit_objective().item():
                model = fresh
        self._warm_start = {name: parameter.detach().clone() for name, parameter in model.named_parameters()}
        return model

    def _fitted(self, X: Tensor, targets: Tensor, start: dict[str, Tensor] | None) -> RobustConjugateGP:
        """RCGP fitted from ``start`` (raw hyperparameters by name), or from the default start for ``None``."""
        model = RobustConjugateGP(X, targets, c=self.c, epsilon=self.epsilon)
        if start is not None:
            parameters = dict(model.named_parameters())
            if parameters.keys() != start.keys():
                held, expected = sorted(start), sorted(parameters)
                raise ValueError(f"RCGPFactory: the warm start holds {held}, the model's parameters are {expected}")
            with torch.no_grad():
                for name, parameter in parameters.items():
                    parameter.copy_(start[name])
        return model.fit(max_iter=self.max_iter)

    def state_dict(self) -> dict[str, list | float]:
        """The next fit's starting point, the last fit's raw hyperparameters by name, as JSON-ready numbers.

        Empty before the first fit. Floats are written by ``repr``, which round-trips, so a loaded
        state starts the next fit from exactly the same bits.
        """
        return {name: value.tolist() for name, value in (self._warm_start or {}).items()}

    def load_state_dict(self, state: dict[str, list | float]) -> None:
        """Warm-start the next fit from ``state`` (from :meth:`state_dict`; empty: a cold start)."""
        if not isinstance(state, dict):
            raise TypeError(f"RCGPFactory.load_state_dict: `state` must be a dict, got {type(state).__name__}")
        self._warm_start = {name: torch.tensor(value, dtype=torch.float64) for name, value in state.items()} or None


@dataclass
class UCBFactory:
    """``UpperConfidenceBound`` with GP-UCB's ``beta_t`` (:func:`ucb_beta`) for inputs of dimension ``dim``."""

    dim: int
    beta_scale: float = 0.2

    def __post_init__(self):
        check_finite_fields(self)
        if self.dim < 1:
            raise ValueError(f"UCBFactory: `dim` must be an integer >= 1, got {self.dim}")
        if not self.beta_scale > 0:
            raise ValueError(f"UCBFactory: `beta_scale` must be > 0, got {self.beta_scale}")

    def __call__(self, model: Model, t: int) -> UpperConfidenceBound:
        return UpperConfidenceBound(model, beta=ucb_beta(t, self.dim, scale=self.beta_scale))

    def batch(self, model: Model, t: int) -> qUpperConfidenceBound:
        """The batch form with the same ``beta_t``: ``qUpperConfidenceBound`` (points in flight as ``X_pending``)."""
        return qUpperConfidenceBound(model, beta=ucb_beta(t, self.dim, scale=self.beta_scale))


@dataclass
class ThompsonSamplingFactory:
    """Thompson sampling: BoTorch's ``MaxPosteriorSampling``, an exact joint posterior sample on random candidates.

    A batch of q is q joint samples, the maximiser of each, without replacement (Kandasamy et al., 2018).
    """

    def __call__(self, model: Model, t: int) -> MaxPosteriorSampling:
        return MaxPosteriorSampling(model, replacement=False)


@dataclass
class LogNEIFactory:
    """BoTorch's batch ``qLogNoisyExpectedImprovement`` with the model's training inputs as the baseline."""

    def __call__(self, model: Model, t: int) -> qLogNoisyExpectedImprovement:
        return qLogNoisyExpectedImprovement(model, X_baseline=model.train_inputs[0])
