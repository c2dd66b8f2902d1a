"""The BO loop: a model factory and an acquisition factory on BoTorch, with a history on disk, on any executor.

GP-UCB, RCGP-UCB (stable and adaptive), GP-TS and RCGP-TS are its ready-made settings
(:mod:`hf_ext.companion.bo.factories`); any ``(X, Y) -> Model`` and ``(model, t) ->
AcquisitionFunction`` plug in the same way.

Evaluations run on an ``executor`` (:mod:`hf_ext.executors`; default: this process). With
``config.q > 1`` each round proposes q points jointly and evaluates them together; with ``config.asynchronous``
q evaluations run at all times and each new point is proposed, as soon as one finishes, with the others as
``X_pending``. Proposals are numbered (``query``) as they are made; the Sobol design is the first
``n_initial`` queries (continued while no evaluation has returned yet), and every fit and acquisition step
draws from seeds derived from ``config.seed`` and the number of the first query it proposes
(:mod:`hf_ext._random`), never from the process's global generators. A batch run therefore proposes the same
points on every executor: models see the evaluations in query order, whatever order they finished in.

Every evaluation is appended to ``history_file`` (JSON lines) the moment it finishes, and a loop created on an
existing file resumes from it; the points proposed and not yet finished are kept in ``<stem>.pending.json``
beside it (with the model factory's warm start, ``model_factory_state``), and a resumed run evaluates them
first, so a run killed at any point and resumed in a new process makes the same queries as the uninterrupted
one (asynchronous runs depend on which evaluation finishes first, and are only resumed, not reproduced). The
objective raising, or returning NaN, stops the run once the other evaluations in flight have finished and been
recorded; the error names the query and where the history is, and the point stays pending for the resume. An
evaluation whose worker dies is submitted again (``retries`` times), then recorded as failed (``failed``, no
values); an executor that refuses new work stops the run, its points pending. The run's settings are stored
next to the history (``<name>.settings.json``) and a resume under others is refused.
"""

import json
import math
import os
import warnings
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

import torch
from botorch.acquisition import AcquisitionFunction
from botorch.acquisition.monte_carlo import MCAcquisitionFunction
from botorch.exceptions.errors import OptimizationGradientError
from botorch.generation.sampling import SamplingStrategy
from botorch.optim import optimize_acqf
from botorch.optim.initializers import gen_batch_initial_conditions
from torch import Tensor
from torch.quasirandom import SobolEngine

from hf_ext._files import read_json
from hf_ext._random import derived_seed, seeded_global_rng
from hf_ext._settings import check_and_store_settings
from hf_ext.executors import Dispatcher, Lost, Raised, check_executor

from .adversary import NoCorruption
from .config import BayesianOptimizationConfig
from .descriptions import describe
from .history import Evaluation, append_evaluation, read_history

VARIANTS = ("stable", "adaptive")
# Config fields that arrived with parallel BO: stored with a run's settings only away from their defaults, so
# that sequential histories written before them still resume.
PARALLEL_DEFAULTS = {"q": 1, "asynchronous": False}


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


@dataclass
class Proposal:
    """A proposed point (in the objective's units) not yet recorded, with the model factory's state after the fit
    that proposed it."""

    query: int
    x: list[float]
    model_factory_state: dict[str, Any] | None = None


def evaluate_point(objective: Callable[[Tensor], float | Tensor], x: list[float]) -> float:
    """``objective`` at ``x`` (a ``1 x d`` float64 tensor) as a float: what each executor's worker runs."""
    value = objective(torch.tensor([x], dtype=torch.float64))
    return float(value.reshape(-1)[0]) if isinstance(value, Tensor) else float(value)


class BayesianOptimization:
    """Maximise ``objective`` over the box ``bounds`` with the config's model and acquisition factories.

    The settings that choose the queries are one :class:`BayesianOptimizationConfig` (its ``model``
    and ``acquisition`` a ready-made name or a factory of your own); what the
    loop is run on (the objective, its domain, an adversary, where the history goes, the executor) are separate
    arguments, as a BoTorch model takes its data and a settings object apart. Earlier versions
    took the config's fields as keyword arguments: those still work, with a ``FutureWarning``.

    Args:
        objective: maps a ``1 x d`` tensor (in ``bounds``' units) to its value (a float or 1-element tensor);
            picklable (a module-level function, a BoTorch test function) for an executor of other processes.
        bounds: ``2 x d``, lower row then upper row.
        config: model, acquisition, thresholds, initial design, seed, optimiser budgets, ``q`` and
            ``asynchronous`` (default: all defaults).
        adversary: corrupts observations (default none); regret is measured on the true values.
        history_file: JSON lines, one evaluation each, appended as they finish; resumed if it exists, when
            :meth:`settings` match those stored next to it in :attr:`settings_file`.
        executor: a ``concurrent.futures.Executor`` that runs the evaluations (default: this process); not
            shut down by the loop. It does not decide the queries of a batch run, so it may change on resume.
        retries: how many times an evaluation whose worker died is submitted again before it is recorded as
            failed (>= 0).
    """

    def __init__(
        self,
        objective: Callable[[Tensor], float | Tensor],
        bounds,
        config: BayesianOptimizationConfig | None = None,
        adversary=None,
        history_file: str | Path | None = None,
        executor: Executor | None = None,
        retries: int = 1,
        **deprecated_settings,
    ):
        owner = type(self).__name__
        self.config = _config_from(config, deprecated_settings, owner)
        self.objective, self.bounds = objective, _checked_bounds(bounds)
        self.dim = self.bounds.shape[1]
        if getattr(objective, "dim", self.dim) != self.dim:
            raise ValueError(f"`bounds` has {self.dim} dimensions but the objective takes {objective.dim}")
        self.executor = check_executor(executor, owner)
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
            raise ValueError(f"{owner}: `retries` must be an integer >= 0, got {retries!r}")
        self.retries = retries
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
        self.pending: dict[int, Proposal] = self._read_pending()
        # A resumed run's corruptions count against the adversary's budget.
        self.adversary.corrupted_rounds.extend(e.query for e in self.history if e.corrupted)
        made = [*self.history, *self.pending.values()]
        self._next_query = 1 + max((p.query for p in made), default=-1)
        self.model_factory = self.config.model_factory()
        latest = max(made, key=lambda p: p.query, default=None)
        if latest is not None and latest.model_factory_state is not None:
            self.model_factory.load_state_dict(latest.model_factory_state)  # the warm start the last fit left
        self.acquisition_factory = self.config.acquisition_factory(self.dim)
        self.model = None

    @property
    def settings_file(self) -> Path | None:
        """Where the settings of the run in :attr:`history_file` are stored: ``<stem>.settings.json`` next to it."""
        if self.history_file is None:
            return None
        return self.history_file.with_name(f"{self.history_file.stem}.settings.json")

    @property
    def pending_file(self) -> Path | None:
        """Where the proposals not yet finished are kept: ``<stem>.pending.json`` next to the history."""
        if self.history_file is None:
            return None
        return self.history_file.with_name(f"{self.history_file.stem}.pending.json")

    def settings(self) -> dict[str, Any]:
        """Everything that decides this run's queries and observations (JSON-serialisable)."""
        config = {f.name: getattr(self.config, f.name) for f in fields(self.config)} | {"n_initial": self.n_initial}
        config = {k: v for k, v in config.items() if PARALLEL_DEFAULTS.get(k, object()) != v}
        return {
            "config": {name: describe(v) if callable(v) else v for name, v in config.items()},
            "bounds": self.bounds.tolist(),
            "objective": describe(self.objective),
            "adversary": describe(self.adversary),
        }

    def _read_pending(self) -> dict[int, Proposal]:
        """The proposals a killed run left unfinished (none without a history: the design would propose them
        again); those already in the history are dropped."""
        path = self.pending_file
        if path is None:
            return {}
        path.with_name(path.name + ".partial").unlink(missing_ok=True)
        if not path.is_file() or not self.history:
            path.unlink(missing_ok=True)
            return {}
        records = read_json(path, type(self).__name__)
        try:
            proposals = [Proposal(**record) for record in records]
            if any(len(p.x) != self.dim or not isinstance(p.query, int) for p in proposals):
                raise TypeError(f"every `x` must have {self.dim} coordinates and every `query` be an integer")
        except TypeError as error:
            raise ValueError(f"{path}: not a list of proposals (query, x, model_factory_state): {error}") from error
        recorded = {e.query for e in self.history}
        return {p.query: p for p in proposals if p.query not in recorded}

    def _write_pending(self) -> None:
        path = self.pending_file
        if path is None:
            return
        if not self.pending:
            path.unlink(missing_ok=True)
            return
        partial = path.with_name(path.name + ".partial")
        partial.write_text(json.dumps([asdict(p) for p in sorted(self.pending.values(), key=lambda p: p.query)]))
        os.replace(partial, path)  # a killed writer leaves the old file or the new one

    def _to_unit(self, x: Tensor) -> Tensor:
        return (x - self.bounds[0]) / (self.bounds[1] - self.bounds[0])

    def _from_unit(self, x: Tensor) -> Tensor:
        return self.bounds[0] + x * (self.bounds[1] - self.bounds[0])

    def _training_data(self) -> tuple[Tensor, Tensor]:
        done = sorted((e for e in self.history if e.failed is None), key=lambda e: e.query)
        X = self._to_unit(torch.tensor([e.x for e in done], dtype=torch.float64))
        Y = torch.tensor([[e.observed] for e in done], dtype=torch.float64)
        return X, Y

    def fit_model(self):
        """The model factory's surrogate on every observation so far (in query order)."""
        return self.model_factory(*self._training_data())

    def suggest(self, count: int = 1, X_pending: Tensor | None = None) -> Tensor:
        """The next ``count`` queries in the unit cube (fewer where the Sobol design ends first).

        Sobol points for the first ``n_initial`` queries (and while no evaluation has returned), then the
        acquisition's choice given ``X_pending`` (unit-cube points still being evaluated).
        """
        first = self._next_query
        if first < self.n_initial or not any(e.failed is None for e in self.history):
            count = min(count, self.n_initial - first) if first < self.n_initial else count
            engine = SobolEngine(self.dim, scramble=True, seed=self.config.seed)
            return engine.draw(first + count, dtype=torch.float64)[first:]
        with seeded_global_rng(derived_seed(self.config.seed, first, "model")):  # a fit's retries draw
            self.model = self.fit_model()
        make = self.acquisition_factory
        if self.config.parallel:
            make = getattr(make, "batch", make)
        acquisition = make(self.model, first - self.n_initial + 1)
        generator = torch.Generator().manual_seed(self.config.seed * 100_003 + first)
        if isinstance(acquisition, SamplingStrategy):
            candidates = torch.rand(self.config.ts_candidates, self.dim, dtype=torch.float64, generator=generator)
            with seeded_global_rng(int(torch.randint(2**31, (1,), generator=generator))), torch.no_grad():
                return acquisition(candidates, num_samples=count)
        if not isinstance(acquisition, AcquisitionFunction):
            raise TypeError(
                "the acquisition factory must return a BoTorch AcquisitionFunction or SamplingStrategy, "
                f"got {type(acquisition).__name__}"
            )
        if self.config.parallel and not isinstance(acquisition, MCAcquisitionFunction):
            raise TypeError(
                f"q = {self.config.q}{' (asynchronous)' if self.config.asynchronous else ''} needs a batch "
                "acquisition: a Monte-Carlo one (qUpperConfidenceBound, qLogNoisyExpectedImprovement, ...) or a "
                f"SamplingStrategy; the acquisition factory returned {type(acquisition).__name__} (give it a "
                "`batch(model, t)` method)"
            )
        if X_pending is not None and len(X_pending):
            acquisition.set_X_pending(X_pending)
        unit = torch.stack([torch.zeros(self.dim), torch.ones(self.dim)]).to(torch.float64)
        with seeded_global_rng(int(torch.randint(2**31, (1,), generator=generator))):
            try:
                candidate, _ = optimize_acqf(
                    acquisition,
                    unit,
                    q=count,
                    num_restarts=self.config.num_restarts,
                    raw_samples=self.config.raw_samples,
                )
            except OptimizationGradientError as error:
                # a surrogate wrecked by a huge or infinite observation can have NaN gradients (whether it does
                # depends on the CPU's rounding): the best raw sample is still a proposal, a crash is not
                warnings.warn(
                    f"query {first}: the acquisition's gradient is NaN ({error}); taking its best raw sample",
                    stacklevel=2,
                )
                candidate = gen_batch_initial_conditions(
                    acquisition, unit, q=count, num_restarts=1, raw_samples=self.config.raw_samples
                )[0]
        return candidate.detach()

    def _propose(self, count: int, in_flight: set[int]) -> list[Proposal]:
        """Up to ``count`` new proposals, kept pending (and on disk) before any is evaluated."""
        pending = [self.pending[query].x for query in sorted(in_flight)]
        X_pending = self._to_unit(torch.tensor(pending, dtype=torch.float64)) if pending else None
        unit = self.suggest(count, X_pending)
        state_dict = getattr(self.model_factory, "state_dict", None)
        state = state_dict() if state_dict is not None else None
        proposals = []
        for x in self._from_unit(unit):
            proposal = Proposal(self._next_query, x.tolist(), state)
            self.pending[proposal.query] = proposal
            self._next_query += 1
            proposals.append(proposal)
        self._write_pending()
        return proposals

    def _kept(self) -> str:
        where = self.history_file or "BayesianOptimization.history"
        return f"the {len(self.history)} evaluations so far are in {where}"

    @staticmethod
    def _stops(outcome) -> bool:
        """Whether ``outcome`` stops the run: the objective raised or returned NaN, or the executor refused."""
        return isinstance(outcome, Raised) or (
            outcome.refused if isinstance(outcome, Lost) else math.isnan(outcome)
        )

    def _outcome_error(self, proposal: Proposal, outcome) -> Exception:
        """The error that reports a stopping outcome (see :meth:`_stops`)."""
        where = f"round {proposal.query} (x = {proposal.x})"
        if isinstance(outcome, Raised):
            error = RuntimeError(f"the objective raised at {where}; {self._kept()}")
            error.__cause__ = outcome.error
            return error
        if isinstance(outcome, Lost) and outcome.refused:
            return RuntimeError(
                f"the executor refused the evaluation of {where} ({outcome.reason}); {self._kept()}, the points not "
                f"yet evaluated in {self.pending_file or 'BayesianOptimization.pending'}: resume on a working executor"
            )
        return ValueError(f"the objective returned NaN at {where}; {self._kept()}")

    def _record(self, proposal: Proposal, outcome: float | Lost) -> Evaluation:
        """The proposal's evaluation, its observation corrupted by the adversary, appended to the history."""
        if isinstance(outcome, Lost):
            failed = f"lost {outcome.attempts} times: {outcome.reason}"
            evaluation = Evaluation(
                len(self.history), proposal.x, None, None, False, proposal.model_factory_state, proposal.query, failed
            )
        else:
            best = max((e.true for e in self.history if e.failed is None), default=-math.inf)
            observed = self.adversary.corrupt(proposal.query, outcome, best)
            evaluation = Evaluation(
                len(self.history),
                proposal.x,
                observed,
                outcome,
                observed != outcome,
                proposal.model_factory_state,
                proposal.query,
            )
        self.history.append(evaluation)
        if self.history_file is not None:
            append_evaluation(self.history_file, evaluation)
        del self.pending[proposal.query]
        self._write_pending()  # after the history: a kill in between leaves a pending point already recorded
        return evaluation

    def _fill(self, dispatcher: Dispatcher, in_flight: set[int], rounds: int) -> None:
        """Submit the pending points, then new proposals, while the config and ``rounds`` leave room."""
        room = rounds - len(self.history) - len(in_flight)
        for query in sorted(self.pending.keys() - in_flight)[: max(room, 0)]:
            dispatcher.submit(query, self.objective, self.pending[query].x)
            in_flight.add(query)
            room -= 1
        if self.config.asynchronous:
            while room > 0 and len(in_flight) < self.config.q:
                (proposal,) = self._propose(1, in_flight)
                dispatcher.submit(proposal.query, self.objective, proposal.x)
                in_flight.add(proposal.query)
                room -= 1
        elif room > 0 and not in_flight:
            for proposal in self._propose(min(self.config.q, room), in_flight):
                dispatcher.submit(proposal.query, self.objective, proposal.x)
                in_flight.add(proposal.query)

    def run(self, rounds: int, callback: Callable[[Evaluation], None] | None = None) -> list[Evaluation]:
        """Evaluate until the history holds ``rounds`` evaluations (initial design and failed ones included).

        ``callback`` is called with each evaluation as it is recorded (to report progress, say). Returns the
        history, in the order the evaluations finished.
        """
        if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
            raise ValueError(f"{type(self).__name__}.run: `rounds` must be an integer >= 1, got {rounds!r}")
        dispatcher = Dispatcher(self.executor, evaluate_point, self.retries, owner=type(self).__name__)
        in_flight: set[int] = set()
        stop = None
        while True:
            if stop is None:
                self._fill(dispatcher, in_flight, rounds)
            if not in_flight:
                break
            query, outcome = dispatcher.next_done()
            in_flight.discard(query)
            proposal = self.pending[query]
            if self._stops(outcome):
                stop = stop or (proposal, outcome)  # the point stays pending; the others in flight are still recorded
                continue
            evaluation = self._record(proposal, outcome)
            if callback is not None:
                callback(evaluation)
        if stop is not None:
            raise self._outcome_error(*stop)
        return self.history

    def step(self) -> Evaluation:
        """Evaluate one more point (proposed as the config says) and record it; returns its evaluation."""
        return self.run(len(self.history) + 1)[-1]


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
        executor: Executor | None = None,
        retries: int = 1,
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
        super().__init__(
            objective, bounds, config, adversary, history_file=history_file, executor=executor, retries=retries
        )
