"""The step shared by optimizers whose step size is computed from the loss value (SPS, NGN).

Each step takes the loss ``f`` (from ``step(closure)`` or, in the ``Trainer``, from
:meth:`LossStepOptimizer.set_loss`), the squared gradient norm ``||g||^2`` (over all groups, or
per group), asks the subclass for the step size ``gamma = step_size(f, ||g||^2, group, ...)`` and moves

    x <- x (1 - gamma * weight_decay) - d,   d <- beta * d + (1 - beta) * gamma * g

(heavy-ball momentum on the step, as in NGN-M: ``x_{k+1} = x_k - (1 - beta) gamma_k g_k + beta (x_k - x_{k-1})``;
``beta = 0`` is the plain method). Weight decay is decoupled from the gradient and scaled by the
effective step size, so a too-large ``lr`` cannot blow up the decay either. As torch's optimizers
keep ``step`` in each parameter's state, so does this one, with the effective step size of the last
step (``"step_size"``): both are saved with ``state_dict()``. Every hyperparameter is per group and
checked in :meth:`LossStepOptimizer.add_param_group`; ``norm`` is one setting for all groups.

The step stays on the loss's device: the loss, ``||g||^2``, ``gamma`` and the counters are tensors there
(``step`` a float32 count, ``step_size`` float64, as torch keeps a ``capturable`` optimizer's step), so that
``torch.compile(optimizer.step)`` compiles once and a step reads one value back to the host: whether the loss is
usable (finite, and above every group's bound), so that an unusable one raises before anything changes.
``lr`` may be a tensor, as torch's optimizers take it, for a scheduler under ``torch.compile``.
"""

import torch
import torch.distributed as dist

from ..._sharded import local, shard_group, squared_norm_part, sum_across
from ..._validation import check_finite, check_finite_loss, check_number, check_params
from ..shared.first_step import check_first_step
from ..shared.state import restore_state

NORMS = ("global", "per_group")
STEP_DTYPES = {"step": torch.float32, "step_size": torch.float64}  # each parameter's counters, on its device


class LossStepOptimizer(torch.optim.Optimizer):
    """Base class: subclasses define :meth:`step_size`, :meth:`loss_floor`, :meth:`check_loss` and
    :meth:`check_group`; see the module docstring. ``norm`` lives in ``defaults`` (as torch's ``foreach`` does),
    so copies and pickles keep it."""

    _loss = None  # what set_loss handed over, for the next step only: neither saved nor copied

    def __init__(self, params, lr: float, momentum: float, weight_decay: float, norm: str, **defaults):
        params = check_params(type(self).__name__, params)
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
        lr = group["lr"]
        lr = float(lr) if isinstance(lr, torch.Tensor) else lr  # a tensor lr is read once here, never in a step
        for name, value in (("lr", lr), ("momentum", group["momentum"]), ("weight_decay", group["weight_decay"])):
            check_number(owner, name, value)
            check_finite(owner, name, value)
        if not lr > 0:
            raise ValueError(f"{owner}: `lr` must be > 0, got {lr}")
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

    def step_size(
        self, loss: torch.Tensor, grad_sq: torch.Tensor, group: dict, steps: torch.Tensor, last: torch.Tensor
    ) -> torch.Tensor:
        """``gamma`` for ``group`` (float64 tensors: the loss, its ``||g||^2``; ``steps`` and ``last``: the group's
        step count and step size before this step)."""
        raise NotImplementedError

    def loss_floor(self, group: dict) -> float:
        """The smallest loss the rule can use in ``group`` (subclasses: ``f_star``, 0)."""
        return -float("inf")

    def check_loss(self, loss: float, group: dict) -> None:
        """Raise ``ValueError`` saying why ``loss`` is below :meth:`loss_floor` in ``group`` (called only then)."""

    def last(self, group: dict, key: str, default):
        """``key`` (``"step"``, ``"step_size"``) of ``group``'s last step, from its parameters' state."""
        for p in group["params"]:
            state = self.state.get(p)
            if state and key in state:
                return state[key]
        return default

    def set_loss(self, loss: torch.Tensor | float) -> None:
        """The loss of the gradients the next :meth:`step` uses (the ``Trainer`` mixin calls this). Hand the tensor
        itself: a Python number on a GPU is copied over at each step."""
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

    def _init_group(self, group: dict, params: list, grads: list, buffers: list, steps: list, sizes: list) -> None:
        """``group``'s parameters with a gradient, their gradients, momentum buffers (none without momentum), step
        counts and step sizes, each parameter's state created at its first step (step 0, a zero buffer).

        As torch's optimizers do, in a method named so: ``torch.compile`` runs it as Python when it traces the step,
        so that the compiled step finds the state in place and compiles once."""
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if "step" not in state:
                state["step"] = torch.zeros((), dtype=STEP_DTYPES["step"], device=p.device)
                state["step_size"] = torch.zeros((), dtype=STEP_DTYPES["step_size"], device=p.device)
            params.append(p)
            grads.append(p.grad)
            steps.append(state["step"])
            sizes.append(state["step_size"])
            if group["momentum"]:
                buffers.append(state.setdefault("momentum_buffer", torch.zeros_like(p)))

    @torch.no_grad()
    def step(self, closure=None):
        if closure is None and self._loss is None and self._gradients_are_zero():
            # A zero gradient takes a zero step whatever the loss: this is the step torch.distributed.checkpoint's
            # get_optimizer_state_dict takes to lay out a fresh optimizer's state before loading into it.
            for group in self.param_groups:
                self._init_group(group, [], [], [], [], [])
            return None
        loss = self._take_loss(closure)
        check_first_step(self)
        gradients = [[p.grad for p in group["params"] if p.grad is not None] for group in self.param_groups]
        value, squares = self._loss_and_squares(loss, gradients)
        self._check_loss(value)
        if self.defaults["norm"] == "global":
            squares = squares.sum().expand(len(squares))
        for group, grad_sq in zip(self.param_groups, squares, strict=True):
            params, grads, buffers, steps, sizes = [], [], [], [], []
            self._init_group(group, params, grads, buffers, steps, sizes)
            if not params:
                continue
            gamma = self.step_size(value, grad_sq, group, steps[0], sizes[0])
            self._update(group, params, grads, buffers, gamma)
            torch._foreach_add_(steps, 1)
            torch._foreach_copy_(sizes, [gamma] * len(sizes))
        return loss

    @staticmethod
    def _update(group: dict, params: list, grads: list, buffers: list, gamma: torch.Tensor) -> None:
        """The module docstring's update of ``params`` with the step size ``gamma`` (a tensor on their device)."""
        if group["weight_decay"]:
            torch._foreach_mul_(params, 1 - gamma * group["weight_decay"])
        beta = group["momentum"]
        if beta == 0:
            torch._foreach_addcmul_(params, grads, [-gamma] * len(params))
            return
        torch._foreach_mul_(buffers, beta)
        torch._foreach_addcmul_(buffers, grads, [(1 - beta) * gamma] * len(buffers))
        torch._foreach_sub_(params, buffers)

    def _check_loss(self, loss: torch.Tensor) -> None:
        """Raise before anything changes if ``loss`` is NaN/inf (``FloatingPointError``) or below a group's
        :meth:`loss_floor` (``ValueError``, from :meth:`check_loss`). The step's one read from the device."""
        floor = max(self.loss_floor(group) for group in self.param_groups)
        if bool(torch.isfinite(loss) & (loss >= floor)):
            return
        steps = max(int(self.last(group, "step", 0)) for group in self.param_groups)
        check_finite_loss(type(self).__name__, loss, steps)
        for group in self.param_groups:
            self.check_loss(loss.item(), group)

    def load_state_dict(self, state_dict: dict) -> None:
        """torch's, with ``step`` and ``step_size`` in their own dtypes on each parameter's device (a state saved
        with Python numbers too)."""
        super().load_state_dict(state_dict)
        restore_state(self, state_dict, lambda name, p: STEP_DTYPES.get(name))

    def _gradients_are_zero(self) -> bool:
        return all(p.grad is None or not local(p.grad).any() for group in self.param_groups for p in group["params"])

    def _loss_and_squares(self, loss, grads: list[list[torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
        """The loss and each group's ``||g||^2`` (float64 tensors), over all ranks for FSDP2 shards.

        Under FSDP2 each rank has its own micro-batch's loss and shards of the averaged gradient: the
        losses are averaged and the squares summed over the shards' process group, in one ``all_reduce``.
        One process and DDP (whole gradients) need none; under DDP the loss handed over must already be
        the ranks' average, as :class:`~hf_ext.optim.LossToOptimizerTrainer` makes it.
        """
        flat = [g for group in grads for g in group]
        group = shard_group(flat, type(self).__name__)
        ranks = dist.get_world_size(group) if group is not None else 1
        device = flat[0].device if flat else None
        mean_part = torch.as_tensor(loss, dtype=torch.float64, device=device).detach() / ranks
        squares = [squared_norm_part(g, group) if g else mean_part.new_zeros(()) for g in grads]
        parts = sum_across(torch.stack([mean_part, *squares]), group)
        return parts[0], parts[1:]

    def step_sizes(self) -> list[float]:
        """The effective step size of the last step, per parameter group (0 before the first), read from the
        device: call it to log, not inside a step."""
        return [float(self.last(group, "step_size", 0.0)) for group in self.param_groups]


def ratio_or(numerator: torch.Tensor, denominator: torch.Tensor, otherwise) -> torch.Tensor:
    """``numerator / denominator``, or ``otherwise`` where the denominator is 0 (a zero gradient)."""
    return torch.where(denominator > 0, numerator / denominator, otherwise)
