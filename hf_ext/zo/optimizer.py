"""The update of zeroth-order training as a ``torch.optim.Optimizer``, so the Trainer's schedulers,
checkpointing and accelerate's wrapping work unchanged."""

import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable

import torch

from .._sharded import local
from .._validation import check_field_type, check_finite, check_finite_number
from ..optim.shared.batching import scale_
from .estimator import estimate_projected_gradients
from .perturbation import ZOPerturbation, derive_seed

# Besides torch's defaults/state/param_groups, what a copy or a pickle must keep to go on stepping.
_COPIED_ATTRIBUTES = ("perturbation", "seed", "_steps", "_pending", "_skip", "_warned_rounding")


class ZOOptimizer(torch.optim.Optimizer):
    """Applies ``theta <- theta - lr * (g * Z + wd * theta)`` from the projected gradients of the step.

    Each parameter group uses its own ``lr`` and ``weight_decay``, so schedulers and per-group
    settings work as in ``torch.optim``. The groups hold exactly the perturbed parameters:
    :meth:`add_param_group` makes the perturbation include the new parameters (they must belong
    to the model), since a step can only move what its forwards perturbed.

    Two ways to step:

    - ``loss = opt.step(closure)``: ``closure()`` returns the loss of the model on the current
      batch, *without* calling ``backward``; the step calls it ``2q`` times (``q + 1`` one-point)
      under ``torch.no_grad()`` at perturbed weights, draws the seeds from ``seed`` and its step
      count, refreshes AGZO's subspaces every ``subspace_refresh_interval`` steps, and returns
      the mean loss. A NaN or inf loss makes the step change nothing.
    - :meth:`accumulate` records ``(seed, g)`` pairs (``ZOTrainer`` does it for every micro-batch)
      and ``step()`` applies them; :meth:`zero_grad` drops them, as torch's drops gradients.

    ``step`` regenerates each ``Z`` from its seed, so nothing parameter-sized is stored. The step
    count and AGZO's subspaces are part of :meth:`state_dict` (per parameter, as torch keeps
    ``step``, so FSDP2's distributed checkpoints hold them too), which makes a resumed run continue
    exactly as an uninterrupted one; the pending pairs are not (they are the gradient, not state).

    Host syncs: ``step(closure)`` reads the closure's losses once, together after its last forward (each direction's
    coefficient is a host number that the seeded kernels take, and a NaN loss skips the step on the host); ``step()``
    reads none. Under ``torch.compile(optimizer.step)`` the step runs eagerly, so it never recompiles: its forwards
    are the closure's (compile the model instead; the perturbation hooks run eagerly inside it), and its update is
    seeded draws keyed by host integers, which a graph would either specialize on (a new graph every step) or replace
    with inductor's own random numbers; what is left, the weight decay, is one ``foreach`` multiply per group.
    """

    def __init__(
        self,
        perturbation: ZOPerturbation,
        lr: float = 1e-3,
        weight_decay: float | None = None,
        decay_names: Iterable[str] | None = None,
        seed: int = 0,
    ):
        """
        Args:
            perturbation: the model's perturbations; its parameters become the optimizer's.
            lr: learning rate of every group.
            weight_decay: decoupled decay of the ``decay_names`` group; ``None`` takes the config's.
            decay_names: parameter names that decay; ``None``: the targeted matrices (linear weights, MoE tensors).
            seed: seeds of the perturbations drawn by ``step(closure)`` (step ``t`` draws from ``(seed, t)``).
        """
        if not isinstance(perturbation, ZOPerturbation):
            raise TypeError(f"ZOOptimizer: `perturbation` must be a ZOPerturbation, got {type(perturbation).__name__}")
        weight_decay = perturbation.config.weight_decay if weight_decay is None else weight_decay
        check_finite("ZOOptimizer", "seed", seed)
        check_field_type("ZOOptimizer", "seed", seed, int)
        named = perturbation.named_parameters()
        if decay_names is None:
            decay_names = list(perturbation.matrix_names.values())
        decay_names = set(decay_names)
        decay = [param for name, param in named.items() if name in decay_names]
        no_decay = [param for name, param in named.items() if name not in decay_names]
        groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        self.perturbation = perturbation  # before Optimizer.__init__, whose add_param_group reads it
        self.seed = seed
        self._steps = 0
        self._pending: list[tuple[int, float]] = []
        self._skip = False
        self._warned_rounding = False
        super().__init__([g for g in groups if g["params"]], {"lr": lr, "weight_decay": 0.0})

    def add_param_group(self, param_group: dict) -> None:
        """Add a group with its own ``lr``/``weight_decay``; its parameters join the perturbation."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        try:
            for name in ("lr", "weight_decay"):
                check_finite_number("ZOOptimizer", name, group[name])
                if not group[name] >= 0:
                    raise ValueError(f"ZOOptimizer: `{name}` must be >= 0, got {group[name]}")
            self.perturbation.include(group["params"], owner="ZOOptimizer.add_param_group")
        except (TypeError, ValueError):
            self.param_groups.pop()
            raise
        self._record_steps()

    def accumulate(self, seeds: list[int], projected_grads: list[float], weight: float) -> None:
        """Add ``weight * g_i * Z(seed_i)`` to the pending update (weight: 1 / (q * accumulation steps))."""
        self._pending.extend((seed, weight * g) for seed, g in zip(seeds, projected_grads, strict=True))

    def skip_step(self) -> None:
        """Make the next :meth:`step` change nothing (a loss of this step was NaN or inf)."""
        self._skip = True

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop the pending update (and a pending skip), as torch optimizers drop accumulated gradients."""
        super().zero_grad(set_to_none)
        self._pending.clear()
        self._skip = False

    @torch.compiler.disable  # see the class docstring: nothing here for a graph to hold
    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        """Apply the pending update; with ``closure``, estimate it first from the closure's losses (see the class)."""
        loss = None
        if closure is not None:
            if self._pending:
                raise RuntimeError(
                    "ZOOptimizer.step(closure) estimates the step from the closure, but accumulate() already "
                    "recorded estimates for it: call step() without a closure, or zero_grad() first"
                )
            loss = self._estimate(closure)
        if not self._skip:
            self._apply_pending()
        self._pending.clear()
        self._skip = False
        self._steps += 1
        self._record_steps()
        return loss

    def _record_steps(self) -> None:
        """``state`` as torch keeps it, ``step`` per parameter, for the parameters the groups hold now (accelerate's
        FSDP2 preparation swaps them for their shards). Never empty: ``torch.distributed.checkpoint`` steps an
        optimizer without state once to create it, which would advance the seed stream."""
        params = [param for group in self.param_groups for param in group["params"]]
        self.state = defaultdict(dict, {param: {"step": torch.tensor(float(self._steps))} for param in params})

    def _estimate(self, closure: Callable[[], torch.Tensor]) -> torch.Tensor:
        config = self.perturbation.config
        refresh = self.perturbation.is_subspace and self._steps % config.subspace_refresh_interval == 0
        estimate = estimate_projected_gradients(
            self.perturbation, closure, step_seed=derive_seed(self.seed, self._steps), refresh_subspaces=refresh
        )
        if estimate.finite:
            self.accumulate(estimate.seeds, estimate.projected_grads, 1 / len(estimate.seeds))
        else:
            self.skip_step()
        return torch.tensor(estimate.loss, dtype=torch.float64)

    def _apply_pending(self) -> None:
        names = {id(param): name for name, param in self.perturbation.named_parameters().items()}
        for group in self.param_groups:
            lr, weight_decay = group["lr"], group["weight_decay"]
            if not lr:
                continue
            params = [(names[id(param)], param) for param in group["params"]]
            probes = {name: self._rounding_probe(name, param) for name, param in params}
            if weight_decay:
                scale_([local(param) for _, param in params], 1 - lr * weight_decay)
            for name, param in params:
                for seed, coefficient in self._pending:
                    self.perturbation.add_direction_(seed, -lr * coefficient, names=(name,))
                probe = probes[name]
                if probe is not None and not self._warned_rounding and torch.equal(probe, local(param)):
                    self._warn_rounding(name, param.dtype)

    def _rounding_probe(self, name: str, param: torch.Tensor) -> torch.Tensor | None:
        """A copy of a low-precision parameter that this step should move, until one update has rounded to nothing."""
        moving = any(coefficient for _, coefficient in self._pending) and self.perturbation.moves(name)
        if self._warned_rounding or not moving or param.dtype.itemsize >= 4:
            return None
        return local(param).clone()

    def _warn_rounding(self, name: str, dtype: torch.dtype) -> None:
        """Say once that a step left a parameter exactly as it was: its update is below half its dtype's resolution."""
        self._warned_rounding = True
        warnings.warn(
            f"ZOOptimizer: the update of `{name}` ({dtype}) rounded to exactly zero at step {self._steps}, so the step "
            "left it unchanged; keep float32 master weights (load the model in float32, run the forwards under "
            "autocast) or raise the learning rate",
            stacklevel=2,
        )

    def state_dict(self) -> dict:
        """torch's layout: per parameter its ``step`` and, for a targeted matrix (AGZO), its ``subspace``.

        Kept per parameter so that ``torch.distributed.checkpoint`` (FSDP2 checkpoints) saves and restores them:
        it keeps only ``state`` and ``param_groups``. A basis is padded to ``(in, min(rank, in))`` columns, with
        ``subspace_rank`` its true width (-1: not captured yet), so that the template a new process loads into
        has the saved shapes.
        """
        self._record_steps()
        state = super().state_dict()
        if not self.perturbation.is_subspace:
            return state
        weights = {id(self.perturbation.matrix_parameter(key)): key for key in self.perturbation.matrix_names}
        for index, param in enumerate(param for group in self.param_groups for param in group["params"]):
            if id(param) in weights:
                state["state"].setdefault(index, {}).update(self._saved_subspace(weights[id(param)]))
        return state

    def _saved_subspace(self, key: str) -> dict[str, torch.Tensor]:
        basis = self.perturbation.subspaces.get(key)
        padded = torch.zeros(self.perturbation.subspace_shape(key))
        if basis is not None:
            padded[..., : basis.shape[-1]] = basis.cpu()
        return {"subspace": padded, "subspace_rank": torch.tensor(-1 if basis is None else basis.shape[-1])}

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = {**state_dict, "state": {index: dict(entry) for index, entry in state_dict["state"].items()}}
        # As torch matches them: the saved groups' keys (indices, or names from torch.distributed.checkpoint) in order.
        saved_keys = [key for group in state_dict["param_groups"] for key in group["params"]]
        params = dict(zip(saved_keys, (param for group in self.param_groups for param in group["params"]), strict=True))
        names = {id(self.perturbation.matrix_parameter(key)): key for key in self.perturbation.matrix_names}
        subspaces = {}
        for key, entry in state_dict["state"].items():
            basis, width = entry.pop("subspace", None), entry.pop("subspace_rank", None)
            if basis is not None and int(width) >= 0:  # popped before torch casts it to the weight's dtype
                # column-major, as torch.linalg.qr returned it: the update's matmul rounds differently by layout
                basis = basis[..., : int(width)].mT.contiguous().mT
                subspaces[names[id(params[key])]] = basis.to(local(params[key]).device)
        super().load_state_dict(state_dict)
        steps = [entry["step"] for entry in state_dict["state"].values() if "step" in entry]
        self._steps = int(steps[0]) if steps else 0
        self._record_steps()
        self.perturbation.subspaces = subspaces

    # torch.optim.Optimizer pickles only defaults/state/param_groups: a copy would lose the perturbation.
    def __getstate__(self) -> dict:
        return super().__getstate__() | {name: self.__dict__[name] for name in _COPIED_ATTRIBUTES}
