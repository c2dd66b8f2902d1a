"""The BO loop's settings: one dataclass, validated at construction, stored with the history it produces."""

import math
from dataclasses import dataclass, field

from hf_ext._validation import check_finite_fields

from .factories import (
    AcquisitionFactory,
    LogNEIFactory,
    ModelFactory,
    RCGPFactory,
    RelevancePursuitFactory,
    SingleTaskGPFactory,
    ThompsonSamplingFactory,
    UCBFactory,
)

MODELS = ("gp", "rcgp", "relevance_pursuit")
ACQUISITIONS = ("ucb", "ts", "lognei")


@dataclass
class BayesianOptimizationConfig:
    """How :class:`~hf_ext.companion.bo.BayesianOptimization` chooses its queries.

    Every field decides which points a run queries, so the whole config is stored next to a
    run's history and a resume under another config is refused.
    """

    model: str | ModelFactory = field(
        default="rcgp",
        metadata={
            "help": f"Surrogate, one of {list(MODELS)}: RobustConjugateGP, BoTorch's SingleTaskGP, or BoTorch's "
            "RobustRelevancePursuitSingleTaskGP; or any model factory (X, Y) -> Model."
        },
    )
    acquisition: str | AcquisitionFactory = field(
        default="ucb",
        metadata={
            "help": f"One of {list(ACQUISITIONS)}: UpperConfidenceBound maximised by optimize_acqf "
            "(qUpperConfidenceBound for q > 1 or asynchronous runs), Thompson sampling on `ts_candidates` random "
            "points, or qLogNoisyExpectedImprovement; or any acquisition factory (model, t) -> AcquisitionFunction "
            "(or a BoTorch SamplingStrategy)."
        },
    )
    c: float | None = field(
        default=2.0,
        metadata={"help": "RCGP's soft threshold on the robustly standardised scale (> 0); None = adaptive."},
    )
    epsilon: float = field(
        default=0.05, metadata={"help": "Adaptive threshold: the 1 - epsilon quantile of |residuals|, in (0, 1)."}
    )
    n_initial: int | None = field(
        default=None, metadata={"help": "Sobol points before the first model (>= 1); None = 2 (d + 1)."}
    )
    beta_scale: float = field(
        default=0.2, metadata={"help": "Multiplier (> 0) of GP-UCB's theoretical beta_t; 1 is the theory's value."}
    )
    seed: int = field(default=0, metadata={"help": "Seeds the Sobol design and every acquisition step."})
    num_restarts: int = field(default=4, metadata={"help": "optimize_acqf restarts (>= 1)."})
    raw_samples: int = field(default=256, metadata={"help": "optimize_acqf raw samples (>= 1)."})
    ts_candidates: int = field(default=1000, metadata={"help": "Random candidates for Thompson sampling (>= 1)."})
    q: int = field(
        default=1,
        metadata={
            "help": "Evaluations in flight (>= 1): each round proposes a batch of q points jointly (BoTorch's batch "
            "acquisitions, q Thompson samples) and waits for all of them; with `asynchronous`, q run at all times."
        },
    )
    asynchronous: bool = field(
        default=False,
        metadata={
            "help": "Propose a new point as soon as an evaluation finishes, with the q - 1 still running as "
            "X_pending (Thompson sampling draws a fresh sample instead), rather than in batches of q."
        },
    )

    def __post_init__(self):
        check_finite_fields(self)
        owner = type(self).__name__
        if not callable(self.model) and self.model not in MODELS:
            raise ValueError(
                f"{owner}: `model` must be one of {list(MODELS)}, got {self.model!r} (or a factory (X, Y) -> Model)"
            )
        if not callable(self.acquisition) and self.acquisition not in ACQUISITIONS:
            raise ValueError(
                f"{owner}: `acquisition` must be one of {list(ACQUISITIONS)}, got {self.acquisition!r} "
                "(or a factory (model, t) -> AcquisitionFunction)"
            )
        if self.c is not None and not 0 < self.c < math.inf:
            raise ValueError(f"{owner}: `c` must be a positive number or None (adaptive), got {self.c}")
        if not 0 < self.epsilon < 1:
            raise ValueError(f"{owner}: `epsilon` must be in (0, 1), got {self.epsilon}")
        if not self.beta_scale > 0:
            raise ValueError(f"{owner}: `beta_scale` must be > 0, got {self.beta_scale}")
        for name in ("num_restarts", "raw_samples", "ts_candidates", "n_initial", "q"):
            value = getattr(self, name)
            if not (_is_int(value) and value >= 1) and not (name == "n_initial" and value is None):
                allowed = "an integer >= 1" + (" or None (2 (d + 1))" if name == "n_initial" else "")
                raise ValueError(f"{owner}: `{name}` must be {allowed}, got {value!r}")
        if not _is_int(self.seed):
            raise ValueError(f"{owner}: `seed` must be an integer, got {self.seed!r}")
        if not isinstance(self.asynchronous, bool):
            raise ValueError(f"{owner}: `asynchronous` must be True or False, got {self.asynchronous!r}")

    @property
    def parallel(self) -> bool:
        """Whether points are proposed with others in flight (``q > 1`` or ``asynchronous``): batch acquisitions."""
        return self.q > 1 or self.asynchronous

    def model_factory(self) -> ModelFactory:
        """``model`` itself when it is a factory, else a fresh ready-made one for its name."""
        if callable(self.model):
            return self.model
        if self.model == "rcgp":
            return RCGPFactory(c=self.c, epsilon=self.epsilon)
        return SingleTaskGPFactory() if self.model == "gp" else RelevancePursuitFactory()

    def acquisition_factory(self, dim: int) -> AcquisitionFactory:
        """``acquisition`` itself when it is a factory, else the ready-made one for its name (inputs of ``dim``)."""
        if callable(self.acquisition):
            return self.acquisition
        if self.acquisition == "lognei":
            return LogNEIFactory()
        return UCBFactory(dim, self.beta_scale) if self.acquisition == "ucb" else ThompsonSamplingFactory()


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
