"""SPS: the stochastic Polyak step size, capped (SPS_max), optionally with a smoothed cap.

    gamma = min((f - f*) / (c ||g||^2), gamma_b)

with ``gamma_b = lr``, or, with ``bound_growth = tau`` (the smoothed variant), ``gamma_b =
min(lr, tau * gamma_previous)`` after the first step (Loizou et al. 2021 use ``tau = 2^(b/n)``:
the cap may double per epoch). ``f* = 0`` (``f_star``) is a lower bound of every non-negative loss;
the step shrinks as the loss approaches it, which is what makes SPS far less sensitive than SGD
to a too-large ``lr``. The update itself (momentum, weight decay) is :class:`LossStepOptimizer`'s.
"""

import torch

from ..._validation import check_finite, check_number
from .base import LossStepOptimizer, ratio_or


class SPS(LossStepOptimizer):
    """Stochastic Polyak step (SPS_max) with heavy-ball momentum and decoupled weight decay.

    Args:
        params: parameters or parameter groups.
        lr: the cap ``gamma_b`` on the step size (> 0); a scheduler scales it as usual.
        c: the Polyak constant (> 0; 0.5 in the convex theory, 0.2 in the paper's deep-learning runs).
        f_star: a lower bound of the loss (default 0); a loss below it raises ``ValueError``.
            ``lr``, ``c``, ``f_star``, ``bound_growth``, ``momentum`` and ``weight_decay`` may differ per group.
        bound_growth: ``None`` for a constant cap, or ``tau > 1``: the cap is at most ``tau`` times the
            previous step size (the smoothed variant; a large ``lr`` then makes ``tau`` the only cap).
        momentum: heavy-ball ``beta`` in [0, 1) on the step (0: SPS_max itself).
        weight_decay: decoupled, scaled by the effective step size.
        norm: ``"global"``: one ``||g||^2`` over all groups and one step size; ``"per_group"``: each
            group its own norm and step size (with the same loss).
    """

    def __init__(
        self,
        params,
        lr: float = 1.0,
        c: float = 0.5,
        f_star: float = 0.0,
        bound_growth: float | None = None,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        norm: str = "global",
    ):
        super().__init__(params, lr, momentum, weight_decay, norm, c=c, f_star=f_star, bound_growth=bound_growth)

    def check_group(self, group: dict) -> None:
        super().check_group(group)
        for name in ("c", "f_star", "bound_growth"):
            check_number("SPS", name, group[name], allow_none=name == "bound_growth")
            check_finite("SPS", name, group[name])
        if not group["c"] > 0:
            raise ValueError(f"SPS: `c` must be > 0, got {group['c']}")
        if group["bound_growth"] is not None and not group["bound_growth"] > 1:
            raise ValueError(f"SPS: `bound_growth` must be None or > 1, got {group['bound_growth']}")

    def loss_floor(self, group: dict) -> float:
        return group["f_star"]

    def check_loss(self, loss: float, group: dict) -> None:
        if loss < group["f_star"]:
            raise ValueError(
                f"SPS: the loss {loss} is below `f_star` = {group['f_star']}; `f_star` must bound the loss"
            )

    def step_size(self, loss, grad_sq, group, steps, last):
        bound = group["lr"]
        if group["bound_growth"] is not None:
            bound = torch.where(steps > 0, torch.clamp(group["bound_growth"] * last, max=bound), bound)
        return torch.clamp(ratio_or(loss - group["f_star"], group["c"] * grad_sq, bound), max=bound)
