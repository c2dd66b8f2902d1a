"""The BO loop: a model factory and an acquisition factory on BoTorch, with a history on disk.

GP-UCB, RCGP-UCB (stable and adaptive), GP-TS and RCGP-TS are its ready-made settings
(:mod:`hf_ext.companion.bo.factories`); any ``(X, Y) -> Model`` and ``(model, t) ->
AcquisitionFunction`` plug in the same way.

Every evaluation is appended to ``history_file`` (JSON lines) the moment it is made, and a loop
created on an existing file resumes from it: an expensive objective's points are never lost,
even when the objective raises (the error names the round and where the history is). The run's
settings are stored next to it (``<name>.settings.json``) and a resume under others is refused.

A run killed at any point and resumed in a new process makes the same queries as the uninterrupted
one: the Sobol design, each fit and each acquisition step draw from seeds derived from
``config.seed`` and the round (:mod:`hf_ext._random`), never from the process's global generators,
and a model factory's warm start is stored with each evaluation (``model_factory_state``).
"""

import math
import warnings
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.generation.sampling import SamplingStrategy
from botorch.optim import optimize_acqf
from torch import Tensor
from torch.quasirandom import SobolEngine

from hf_ext._random import derived_seed, seeded_global_rng
from hf_ext._settings import check_and_store_settings

from .adversary import NoCorruption
from .config import BayesianOptimizationConfig
from .descriptions import describe
from .history import Evaluation, append_evaluation, read_history

VARIANTS = ("stable", "adaptive")


def _checked_bounds(bounds) -> Tensor:
    bounds = torch.as_tensor(bounds, dtype=torch.float64)
    if bounds.dim() != 2 or bounds.shape[0] != 2 or bounds.shape[1] < 1:
        raise ValueError(f"`bounds` must be 2 x d (lower row, upper row), got shape {tuple(bounds.shape)}")
    if not torch.isfinite(bounds).all() or (bounds[0] >= bounds[1]).any():
        raise ValueError(f"`bounds` must be finite with lower < upper in every dimension, got {bounds.tolist()}")
    return bounds


def _config_from(config: BayesianOptimizationConfig | None, deprecated_settings: dict, owner: str):
    """``config``, or one built from the keyword arguments that earlier versions took (with a ``FutureWarning``)."""
    unknown = sorted(deprecated_settings.keys() - {f.name for f in fields(BayesianOptimizationConfig)})
    if unknown:
        raise TypeError(f"{owner}() got unexpected keyword arguments {unknown}")
    if deprecated_settings:
        if config is not None:
            raise TypeError(f"{owner}: pass the settings in `config` only, not also as {sorted(deprecated_settings)}")
        arguments = ", ".join(f"{name}={value!r}" for name, value in deprecated_settings.items())
        warnings.warn(
            f"{owner}({arguments}) is deprecated and will be removed: pass "
            f"config=BayesianOptimizationConfig({arguments}) instead",
            FutureWarning,
            stacklevel=3,
        )
        return BayesianOptimizationConfig(**deprecated_settings)
    if config is None:
        return BayesianOptimizationConfig()
    if not isinstance(config, BayesianOptimizationConfig):
        raise TypeError(f"{owner}: `config` must be a BayesianOptimizationConfig, got {type(config).__name__}")
    return config


class BayesianOptimization:
    """Maximise ``objective`` over the box ``bounds`` with the config's model and acquisition factories.

    The settings that choose the queries are one :class:`BayesianOptimizationConfig` (its ``model``
    and ``acquisition`` a ready-made name or a factory of your own); what the
    loop is run on (the objective, its domain, an adversary, where the history goes) are separate
    arguments, as a BoTorch model takes its data and a settings object apart. Earlier versions
    took the config's fields as keyword arguments: those still work, with a ``FutureWarning``.

    Args:
        objective: maps a ``1 x d`` tensor (in ``bounds``' units) to its value (a float or 1-element tensor).
        bounds: ``2 x d``, lower row then upper row.
        config: model, acquisition, thresholds, initial design, seed, optimiser budgets (default: all defaults).
        adversary: corrupts observations (default none); regret is measured on the true values.
        history_file: JSON lines, one evaluation each, appended as they happen; resumed if it exists, when
            :meth:`settings` match those stored next to it in :attr:`settings_file`.
    """

    def __init__(
        self,
        objective: Callable[[Tensor], float | Tensor],
        bounds,
        config: BayesianOptimizationConfig | None = None,
        adversary=None,
        history_file: str | Path | None = None,
        **deprecated_settings,
    ):
        self.config = _config_from(config, deprecated_settings, type(self).__name__)
        self.objective, self.bounds = objective, _checked_bounds(bounds)
        self.dim = self.bounds.shape[1]
        if getattr(objective, "dim", self.dim) != self.dim:
            raise ValueError(f"`bounds` has {self.dim} dimensions but the objective takes {objective.dim}")
        self.adversary = adversary if adversary is not None else NoCorruption()
        self.n_initial = self.config.n_initial if self.config.n_initial is not None else 2 * (self.dim + 1)
        self.history_file = None if history_file is None else Path(history_file)
        self.history: list[Evaluation] = []
        if self.history_file is not None:
            check_and_store_settings(
                self.settings_file,
                self.settings(),
                resuming=self.history_file.is_file() and self.history_file.stat().st_size > 0,
                run=f"the history {self.history_file}",
                start_fresh=f"pass another `history_file`, or delete {self.history_file} and {self.settings_file}",
            )
            self.history = read_history(self.history_file, self.dim)
        # A resumed run's corruptions count against the adversary's budget.
        self.adversary.corrupted_rounds.extend(e.round for e in self.history if e.corrupted)
        seed = self.config.seed
        self._initial = SobolEngine(self.dim, scramble=True, seed=seed).draw(self.n_initial, dtype=torch.float64)
        self.model_factory = self.config.model_factory()
        if self.history and self.history[-1].model_factory_state is not None:
            self.model_factory.load_state_dict(self.history[-1].model_factory_state)  # the warm start it left
        self.acquisition_factory = self.config.acquisition_factory(self.dim)
        self.model = None

    @property
    def settings_file(self) -> Path | None:
        """Where the settings of the run in :attr:`history_file` are stored: ``<stem>.settings.json`` next to it."""
        if self.history_file is None:
            return None
        return self.history_file.with_name(f"{self.history_file.stem}.settings.json")

    def settings(self) -> dict[str, Any]:
        """Everything that decides this run's queries and observations (JSON-serialisable)."""
        config = {f.name: getattr(self.config, f.name) for f in fields(self.config)} | {"n_initial": self.n_initial}
        return {
            "config": {name: describe(v) if callable(v) else v for name, v in config.items()},
            "bounds": self.bounds.tolist(),
            "objective": describe(self.objective),
            "adversary": describe(self.adversary),
        }

    def _to_unit(self, x: Tensor) -> Tensor:
        return (x - self.bounds[0]) / (self.bounds[1] - self.bounds[0])

    def _from_unit(self, x: Tensor) -> Tensor:
        return self.bounds[0] + x * (self.bounds[1] - self.bounds[0])

    def _training_data(self) -> tuple[Tensor, Tensor]:
        X = self._to_unit(torch.tensor([e.x for e in self.history], dtype=torch.float64))
        Y = torch.tensor([[e.observed] for e in self.history], dtype=torch.float64)
        return X, Y

    def fit_model(self):
        """The model factory's surrogate on every observation so far."""
        return self.model_factory(*self._training_data())

    def suggest(self) -> Tensor:
        """The next query in the unit cube: Sobol during the initial design, then the acquisition's choice."""
        round_index = len(self.history)
        if round_index < self.n_initial:
            return self._initial[round_index : round_index + 1]
        with seeded_global_rng(derived_seed(self.config.seed, round_index, "model")):  # a fit's retries draw
            self.model = self.fit_model()
        acquisition = self.acquisition_factory(self.model, round_index - self.n_initial + 1)
        generator = torch.Generator().manual_seed(self.config.seed * 100_003 + round_index)
        if isinstance(acquisition, SamplingStrategy):
            candidates = torch.rand(self.config.ts_candidates, self.dim, dtype=torch.float64, generator=generator)
            with seeded_global_rng(int(torch.randint(2**31, (1,), generator=generator))), torch.no_grad():
                return acquisition(candidates, num_samples=1)
        if not isinstance(acquisition, AcquisitionFunction):
            raise TypeError(
                "the acquisition factory must return a BoTorch AcquisitionFunction or SamplingStrategy, "
                f"got {type(acquisition).__name__}"
            )
        unit = torch.stack([torch.zeros(self.dim), torch.ones(self.dim)]).to(torch.float64)
        with seeded_global_rng(int(torch.randint(2**31, (1,), generator=generator))):
            candidate, _ = optimize_acqf(
                acquisition, unit, q=1, num_restarts=self.config.num_restarts, raw_samples=self.config.raw_samples
            )
        return candidate.detach()

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
        state_dict = getattr(self.model_factory, "state_dict", None)
        evaluation = Evaluation(
            len(self.history),
            self._from_unit(x).flatten().tolist(),
            observed,
            true,
            observed != true,
            state_dict() if state_dict is not None else None,
        )
        self.history.append(evaluation)
        if self.history_file is not None:
            append_evaluation(self.history_file, evaluation)
        return evaluation

    def run(self, rounds: int, callback: Callable[[Evaluation], None] | None = None) -> list[Evaluation]:
        """Evaluate until the history holds ``rounds`` evaluations (initial design included); returns it.

        ``callback`` is called with each new evaluation (to report progress, say).
        """
        if rounds < 1:
            raise ValueError(f"`rounds` must be >= 1, got {rounds}")
        while len(self.history) < rounds:
            evaluation = self.step()
            if callback is not None:
                callback(evaluation)
        return self.history


class RCGPUCB(BayesianOptimization):
    """RCGP-UCB: ``variant="stable"`` keeps ``config.c`` as the soft threshold; ``"adaptive"`` sets it from the data.

    ``config`` must leave ``model="rcgp"`` and ``acquisition="ucb"`` (its defaults); the adaptive
    variant ignores ``config.c``.
    """

    def __init__(
        self,
        objective: Callable[[Tensor], float | Tensor],
        bounds,
        variant: str = "stable",
        config: BayesianOptimizationConfig | None = None,
        adversary=None,
        history_file: str | Path | None = None,
        **deprecated_settings,
    ):
        if variant not in VARIANTS:
            raise ValueError(f"RCGPUCB: `variant` must be one of {list(VARIANTS)}, got {variant!r}")
        config = _config_from(config, deprecated_settings, "RCGPUCB")
        if (config.model, config.acquisition) != ("rcgp", "ucb"):
            raise ValueError(
                "RCGPUCB: `config.model` must be 'rcgp' and `config.acquisition` 'ucb', "
                f"got {config.model!r} and {config.acquisition!r} (use BayesianOptimization for other pairs)"
            )
        if variant == "adaptive":
            config = replace(config, c=None)
        elif config.c is None:
            raise ValueError("RCGPUCB: variant='stable' needs a fixed threshold `config.c`, got None")
        super().__init__(objective, bounds, config, adversary=adversary, history_file=history_file)
