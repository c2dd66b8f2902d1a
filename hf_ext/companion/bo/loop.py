"""The BO loop: GP-UCB, RCGP-UCB (stable and adaptive), GP-TS and RCGP-TS on BoTorch, with a history on disk.

Every evaluation is appended to ``history_file`` (JSON lines) the moment it is made, and a loop
created on an existing file resumes from it: an expensive objective's points are never lost,
even when the objective raises (the error names the round and where the history is).
"""

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from botorch.acquisition import UpperConfidenceBound
from botorch.fit import fit_gpytorch_mll
from botorch.generation import MaxPosteriorSampling
from botorch.models import SingleTaskGP
from botorch.models.robust_relevance_pursuit_model import RobustRelevancePursuitSingleTaskGP
from botorch.models.transforms import Standardize
from botorch.optim import optimize_acqf
from gpytorch.mlls import ExactMarginalLogLikelihood
from torch import Tensor
from torch.quasirandom import SobolEngine

from .adversary import NoCorruption
from .rcgp import RobustConjugateGP

MODELS = ("gp", "rcgp", "relevance_pursuit")
ACQUISITIONS = ("ucb", "ts")
# Standard GPs cannot hold an infinite observation; they see +-CLIP instead (and are wrecked by it).
CLIP = 1e10


@dataclass
class Evaluation:
    """One round: the query (in the objective's units), what was observed, and the true value."""

    round: int
    x: list[float]
    observed: float
    true: float
    corrupted: bool


def robust_standardize(values: Tensor) -> tuple[Tensor, float, float]:
    """``(values - median) / (1.4826 MAD)`` over the finite values; infinities stay infinite.

    Mean and standard deviation would be destroyed by a single huge or infinite observation.
    """
    finite = values[torch.isfinite(values)]
    if len(finite) == 0:
        return values, 0.0, 1.0
    center = finite.median().item()
    scale = 1.4826 * (finite - center).abs().median().item()
    if scale <= 0:
        scale = finite.std().item() if len(finite) > 1 else 0.0
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


def _checked_bounds(bounds) -> Tensor:
    bounds = torch.as_tensor(bounds, dtype=torch.float64)
    if bounds.dim() != 2 or bounds.shape[0] != 2 or bounds.shape[1] < 1:
        raise ValueError(f"`bounds` must be 2 x d (lower row, upper row), got shape {tuple(bounds.shape)}")
    if not torch.isfinite(bounds).all() or (bounds[0] >= bounds[1]).any():
        raise ValueError(f"`bounds` must be finite with lower < upper in every dimension, got {bounds.tolist()}")
    return bounds


class BayesianOptimization:
    """Maximise ``objective`` over the box ``bounds`` with a GP or RCGP surrogate and UCB or Thompson sampling.

    Args:
        objective: maps a ``1 x d`` tensor (in ``bounds``' units) to its value (a float or 1-element tensor).
        bounds: ``2 x d``, lower row then upper row.
        model: ``"rcgp"`` (:class:`RobustConjugateGP`), ``"gp"`` (BoTorch ``SingleTaskGP``) or
            ``"relevance_pursuit"`` (BoTorch ``RobustRelevancePursuitSingleTaskGP``).
        acquisition: ``"ucb"`` (``UpperConfidenceBound`` with :func:`ucb_beta`, maximised by
            ``optimize_acqf``) or ``"ts"`` (exact joint posterior samples on ``ts_candidates`` points).
        c: RCGP's soft threshold on the robustly standardised scale; ``None`` = adaptive.
        adversary: corrupts observations (default none); regret is measured on the true values.
        n_initial: Sobol points before the first model (default ``2 (d + 1)``).
        history_file: JSON lines, one evaluation each, appended as they happen; resumed if it exists.
    """

    def __init__(
        self,
        objective: Callable[[Tensor], float | Tensor],
        bounds,
        model: str = "rcgp",
        acquisition: str = "ucb",
        c: float | None = 2.0,
        epsilon: float = 0.05,
        adversary=None,
        n_initial: int | None = None,
        beta_scale: float = 0.2,
        history_file: str | Path | None = None,
        seed: int = 0,
        num_restarts: int = 4,
        raw_samples: int = 256,
        ts_candidates: int = 1000,
    ):
        if model not in MODELS:
            raise ValueError(f"`model` must be one of {list(MODELS)}, got {model!r}")
        if acquisition not in ACQUISITIONS:
            raise ValueError(f"`acquisition` must be one of {list(ACQUISITIONS)}, got {acquisition!r}")
        self.objective, self.bounds = objective, _checked_bounds(bounds)
        self.dim = self.bounds.shape[1]
        if getattr(objective, "dim", self.dim) != self.dim:
            raise ValueError(f"`bounds` has {self.dim} dimensions but the objective takes {objective.dim}")
        self.model_name, self.acquisition, self.c, self.epsilon = model, acquisition, c, epsilon
        self.adversary = adversary if adversary is not None else NoCorruption()
        self.n_initial = n_initial if n_initial is not None else 2 * (self.dim + 1)
        self.beta_scale, self.seed = beta_scale, seed
        self.num_restarts, self.raw_samples, self.ts_candidates = num_restarts, raw_samples, ts_candidates
        self.history_file = None if history_file is None else Path(history_file)
        self.history: list[Evaluation] = self._load_history()
        # A resumed run's corruptions count against the adversary's budget.
        self.adversary.corrupted_rounds.extend(e.round for e in self.history if e.corrupted)
        self._initial = SobolEngine(self.dim, scramble=True, seed=seed).draw(self.n_initial, dtype=torch.float64)
        self.model = None

    def _load_history(self) -> list[Evaluation]:
        if self.history_file is None or not self.history_file.is_file():
            return []
        history = [Evaluation(**json.loads(line)) for line in self.history_file.read_text().splitlines() if line]
        if any(len(e.x) != self.dim for e in history):
            raise ValueError(f"{self.history_file} holds points of another dimension than `bounds` ({self.dim})")
        return history

    def _to_unit(self, x: Tensor) -> Tensor:
        return (x - self.bounds[0]) / (self.bounds[1] - self.bounds[0])

    def _from_unit(self, x: Tensor) -> Tensor:
        return self.bounds[0] + x * (self.bounds[1] - self.bounds[0])

    def _training_data(self) -> tuple[Tensor, Tensor]:
        X = self._to_unit(torch.tensor([e.x for e in self.history], dtype=torch.float64))
        Y = torch.tensor([[e.observed] for e in self.history], dtype=torch.float64)
        return X, Y

    def fit_model(self):
        """The surrogate on every observation so far (robustly standardised for RCGP)."""
        X, Y = self._training_data()
        if self.model_name == "rcgp":
            Y, _, _ = robust_standardize(Y)
            model = RobustConjugateGP(X, Y, c=self.c, epsilon=self.epsilon)
            if isinstance(self.model, RobustConjugateGP):  # warm start from the last round's fit
                model.covar_module.load_state_dict(self.model.covar_module.state_dict())
                model.raw_noise.data.copy_(self.model.raw_noise.data)
            return model.fit(max_iter=20)
        model_class = SingleTaskGP if self.model_name == "gp" else RobustRelevancePursuitSingleTaskGP
        model = model_class(X, Y.clamp(-CLIP, CLIP), outcome_transform=Standardize(1))
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        return model

    def suggest(self) -> Tensor:
        """The next query in the unit cube: Sobol during the initial design, then the acquisition's choice."""
        round_index = len(self.history)
        if round_index < self.n_initial:
            return self._initial[round_index : round_index + 1]
        self.model = self.fit_model()
        unit = torch.stack([torch.zeros(self.dim), torch.ones(self.dim)]).to(torch.float64)
        generator = torch.Generator().manual_seed(self.seed * 100_003 + round_index)
        if self.acquisition == "ucb":
            beta = ucb_beta(round_index - self.n_initial + 1, self.dim, scale=self.beta_scale)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(int(torch.randint(2**31, (1,), generator=generator)))
                candidate, _ = optimize_acqf(
                    UpperConfidenceBound(self.model, beta=beta),
                    unit,
                    q=1,
                    num_restarts=self.num_restarts,
                    raw_samples=self.raw_samples,
                )
            return candidate.detach()
        candidates = torch.rand(self.ts_candidates, self.dim, dtype=torch.float64, generator=generator)
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(int(torch.randint(2**31, (1,), generator=generator)))
            return MaxPosteriorSampling(self.model, replacement=False)(candidates, num_samples=1)

    def _evaluate(self, x: Tensor) -> float:
        round_index = len(self.history)
        kept = f"the {round_index} evaluations so far are in {self.history_file or 'BayesianOptimization.history'}"
        try:
            value = self.objective(self._from_unit(x))
            value = float(value.reshape(-1)[0]) if isinstance(value, Tensor) else float(value)
        except Exception as error:
            point = self._from_unit(x).flatten().tolist()
            raise RuntimeError(f"the objective raised at round {round_index} (x = {point}); {kept}") from error
        if math.isnan(value):
            raise ValueError(f"the objective returned NaN at round {round_index}; {kept}")
        return value

    def step(self) -> Evaluation:
        """Suggest, evaluate, let the adversary corrupt the observation, record it (and append it to disk)."""
        x = self.suggest()
        true = self._evaluate(x)
        best = max((e.true for e in self.history), default=-math.inf)
        observed = self.adversary.corrupt(len(self.history), true, best)
        evaluation = Evaluation(
            len(self.history), self._from_unit(x).flatten().tolist(), observed, true, observed != true
        )
        self.history.append(evaluation)
        if self.history_file is not None:
            self.history_file.parent.mkdir(parents=True, exist_ok=True)
            with self.history_file.open("a") as handle:
                handle.write(json.dumps(asdict(evaluation)) + "\n")
        return evaluation

    def run(self, rounds: int) -> list[Evaluation]:
        """Evaluate until the history holds ``rounds`` evaluations (initial design included); returns it."""
        if rounds < 1:
            raise ValueError(f"`rounds` must be >= 1, got {rounds}")
        while len(self.history) < rounds:
            self.step()
        return self.history


class RCGPUCB(BayesianOptimization):
    """RCGP-UCB: ``variant="stable"`` fixes the soft threshold ``c``; ``"adaptive"`` sets it from the data."""

    def __init__(self, objective, bounds, variant: str = "stable", c: float = 2.0, **kwargs):
        if variant not in ("stable", "adaptive"):
            raise ValueError(f"RCGPUCB: `variant` must be 'stable' or 'adaptive', got {variant!r}")
        super().__init__(
            objective, bounds, model="rcgp", acquisition="ucb", c=c if variant == "stable" else None, **kwargs
        )
