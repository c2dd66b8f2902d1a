"""NGN: the non-negative Gauss-Newton step size, with heavy-ball momentum (NGN-M).

    gamma = sigma / (1 + sigma ||g||^2 / (2 f)) = 2 f sigma / (2 f + sigma ||g||^2),   f >= 0

NGN linearises ``sqrt(f)`` instead of ``f``: the step is ``sigma`` where the gradient is small
relative to the loss and shrinks smoothly to the Polyak-like ``2 f / ||g||^2`` where it is large,
so a too-large ``sigma`` (``lr``) costs far less than it does SGD. Needs ``f >= 0``. The update
itself (momentum, weight decay) is :class:`LossStepOptimizer`'s.
"""

from .base import LossStepOptimizer, ratio_or


class NGN(LossStepOptimizer):
    """NGN step size with heavy-ball momentum (``momentum > 0``: NGN-M) and decoupled weight decay.

    Args:
        params: parameters or parameter groups.
        lr: ``sigma`` (> 0), the step size where the loss dominates the gradient; a scheduler scales it.
        momentum: heavy-ball ``beta`` in [0, 1) on the step (0: NGN; NGN-M uses 0.9).
        weight_decay: decoupled, scaled by the effective step size.
        norm: ``"global"`` (one ``||g||^2`` and step size for all groups) or ``"per_group"``.

    A negative loss raises ``ValueError`` (shift the loss by a lower bound).
    """

    def __init__(self, params, lr: float = 1.0, momentum: float = 0.0, weight_decay: float = 0.0, norm: str = "global"):
        super().__init__(params, lr, momentum, weight_decay, norm)

    def loss_floor(self, group: dict) -> float:
        return 0.0

    def check_loss(self, loss: float, group: dict) -> None:
        if loss < 0:
            raise ValueError(f"NGN: the loss must be >= 0, got {loss} (add a constant that bounds it from below)")

    def step_size(self, loss, grad_sq, group, steps, last):
        sigma = group["lr"]
        return ratio_or(2 * loss * sigma, 2 * loss + sigma * grad_sq, sigma)
