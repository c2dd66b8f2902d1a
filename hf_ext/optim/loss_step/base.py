"""The step shared by optimizers whose step size is computed from the loss value (SPS, NGN).

Each step takes the loss ``f`` (from ``step(closure)`` or, in the ``Trainer``, from
:meth:`LossStepOptimizer.set_loss`), the squared gradient norm ``||g||^2`` (over all groups, or
per group), asks the subclass for the step size ``gamma = step_size(f, ||g||^2, lr)`` and moves

    x <- x (1 - gamma * weight_decay) - d,   d <- beta * d + (1 - beta) * gamma * g

(heavy-ball momentum on the step, as in NGN-M: ``x_{k+1} = x_k - (1 - beta) gamma_k g_k + beta (x_k - x_{k-1})``;
``beta = 0`` is the plain method). Weight decay is decoupled from the gradient and scaled by the
effective step size, so a too-large ``lr`` cannot blow up the decay either. As torch's optimizers
keep ``step`` in each parameter's state, so does this one, with the effective step size of the last
step (``"step_size"``): both are saved with ``state_dict()``. Every hyperparameter is per group and
checked in :meth:`LossStepOptimizer.add_param_group`; ``norm`` is one setting for all groups.
"""

import torch
import torch.distributed as dist

from ..._sharded import local, shard_group, squared_norm_part, sum_across
from ..._validation import check_finite, check_finite_loss, check_number
from ..shared.first_step import check_first_step

NORMS = ("global", "per_group")


class LossStepOptimizer(torch.optim.Optimizer):
    """Base class: subclasses define :meth:`step_size`, :meth:`check_loss` and :meth:`check_group`; see the module
    docstring. ``norm`` lives in ``defaults`` (as torch's ``foreach`` does), so copies and pickles keep it."""

    _loss = None  # what set_loss handed over, for the next step only: neither saved nor copied

    def __init__(self, params, lr: float, momentum: float, weight_decay: float, norm: str, **defaults):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, norm=norm, **defaults))

    def add_param_group(self, param_group: dict) -> None:
        """torch's, then :meth:`check_group` (at construction too); a refused group is not kept."""
        super().add_param_group(param_group)
        try:
            self.check_group(self.param_groups[-1])
        except ValueError:
            self.param_groups.pop()
            raise

    def check_group(self, group: dict) -> None:
        """Raise ``ValueError`` naming the field for a bad setting of ``group`` (subclasses add theirs)."""
        owner = type(self).__name__
        for name in ("lr", "momentum", "weight_decay"):
            check_number(owner, name, group[name])
            check_finite(owner, name, group[name])
        if not group["lr"] > 0:
            raise ValueError(f"{owner}: `lr` must be > 0, got {group['lr']}")
        if not 0 <= group["momentum"] < 1:
            raise ValueError(f"{owner}: `momentum` must be in [0, 1), got {group['momentum']}")
        if group["weight_decay"] < 0:
            raise ValueError(f"{owner}: `weight_decay` must be >= 0, got {group['weight_decay']}")
        if group["norm"] not in NORMS:
            raise ValueError(f"{owner}: `norm` must be one of {list(NORMS)}, got {group['norm']!r}")
        if group["norm"] != self.defaults["norm"]:
            raise ValueError(
                f"{owner}: `norm` is one setting for all groups ({self.defaults['norm']!r}), got {group['norm']!r}"
            )

    def step_size(self, loss: float, grad_sq: float, group: dict) -> float:
        raise NotImplementedError

    def check_loss(self, loss: float, group: dict) -> None:
        """Raise ``ValueError`` for a finite loss the rule cannot use in ``group`` (called before anything changes)."""

    def last(self, group: dict, key: str, default):
        """``key`` (``"step"``, ``"step_size"``) of ``group``'s last step, from its parameters' state."""
        for p in group["params"]:
            state = self.state.get(p)
            if state and key in state:
                return state[key]
        return default

    def set_loss(self, loss: torch.Tensor | float) -> None:
        """The loss of the gradients the next :meth:`step` uses (the ``Trainer`` mixin calls this)."""
        self._loss = loss

    def _take_loss(self, closure) -> torch.Tensor | float:
        if closure is not None:
            with torch.enable_grad():
                return closure()
        if self._loss is None:
            raise RuntimeError(
                f"{type(self).__name__}.step() needs the loss: call step(closure), or set_loss(loss) before step() "
                "(hf_ext.optim.LossToOptimizerTrainer does it for the Trainer)"
            )
        loss, self._loss = self._loss, None
        return loss

    @torch.no_grad()
    def step(self, closure=None):
        if closure is None and self._loss is None and self._gradients_are_zero():
            # A zero gradient takes a zero step whatever the loss: this is the step torch.distributed.checkpoint's
            # get_optimizer_state_dict takes to lay out a fresh optimizer's state before loading into it.
            for group in self.param_groups:
                self._state(group, [p for p in group["params"] if p.grad is not None])
            return None
        loss = self._take_loss(closure)
        check_first_step(self)
        grads = [[p.grad for p in group["params"] if p.grad is not None] for group in self.param_groups]
        value, *squares = self._loss_and_squares(loss, grads)
        steps = max(self.last(group, "step", 0) for group in self.param_groups)
        check_finite_loss(type(self).__name__, torch.tensor(value), steps)
        for group in self.param_groups:
            self.check_loss(value, group)
        if self.defaults["norm"] == "global":
            squares = [sum(squares)] * len(squares)
        for group, group_grads, grad_sq in zip(self.param_groups, grads, squares, strict=True):
            gamma = self.step_size(value, grad_sq, group)
            params = [p for p in group["params"] if p.grad is not None]
            buffers = self._state(group, params)
            for p in params:
                self.state[p]["step"] += 1
                self.state[p]["step_size"] = gamma
            if not params:
                continue
            if group["weight_decay"]:
                torch._foreach_mul_(params, 1 - gamma * group["weight_decay"])
            beta = group["momentum"]
            if beta == 0:
                torch._foreach_add_(params, group_grads, alpha=-gamma)
                continue
            torch._foreach_mul_(buffers, beta)
            torch._foreach_add_(buffers, group_grads, alpha=(1 - beta) * gamma)
            torch._foreach_sub_(params, buffers)
        return loss

    def _state(self, group: dict, params: list[torch.Tensor]) -> list[torch.Tensor]:
        """Each parameter's state, created as step 0 (and, with momentum, a zero heavy-ball buffer); returns the
        buffers (none without momentum)."""
        for p in params:
            self.state[p].setdefault("step", 0)
            self.state[p].setdefault("step_size", 0.0)
        if not group["momentum"]:
            return []
        return [self.state[p].setdefault("momentum_buffer", torch.zeros_like(p)) for p in params]

    def _gradients_are_zero(self) -> bool:
        return all(p.grad is None or not local(p.grad).any() for group in self.param_groups for p in group["params"])

    def _loss_and_squares(self, loss, grads: list[list[torch.Tensor]]) -> list[float]:
        """The loss and each group's ``||g||^2`` (float64), over all ranks for FSDP2 shards.

        Under FSDP2 each rank has its own micro-batch's loss and shards of the averaged gradient: the
        losses are averaged and the squares summed over the shards' process group, in one ``all_reduce``.
        One process and DDP (whole gradients) need none; under DDP the loss handed over must already be
        the ranks' average, as :class:`~hf_ext.optim.LossToOptimizerTrainer` makes it.
        """
        flat = [g for group in grads for g in group]
        group = shard_group(flat, type(self).__name__)
        ranks = dist.get_world_size(group) if group is not None else 1
        device = flat[0].device if flat else None
        mean_part = torch.tensor(float(loss) / ranks, dtype=torch.float64, device=device)
        parts = torch.stack([mean_part, *(squared_norm_part(g, group) for g in grads)])
        return sum_across(parts, group).tolist()

    def step_sizes(self) -> list[float]:
        """The effective step size of the last step, per parameter group (0 before the first)."""
        return [self.last(group, "step_size", 0.0) for group in self.param_groups]


def ratio_or(numerator: float, denominator: float, otherwise: float) -> float:
    """``numerator / denominator``, or ``otherwise`` when the denominator is 0 (a zero gradient)."""
    return numerator / denominator if denominator > 0 else otherwise
