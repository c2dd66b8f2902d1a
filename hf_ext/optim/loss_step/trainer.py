"""Hands the training loss to a loss-based optimizer (SPS, NGN) inside the stock ``Trainer`` loop.

``Trainer`` calls ``optimizer.step()`` without a closure, and no callback sees the loss before
that call, so :class:`LossToOptimizerMixin` overrides ``training_step``, the narrowest method
that sees it: it adds up the loss each micro-batch returns (already divided for gradient
accumulation, or normalised by the global token count), and on the micro-batch after which the
``Trainer`` steps (``accelerator.sync_gradients``) it averages that sum over processes, the same
average DDP takes of the gradients, and calls ``set_loss`` on the optimizer inside accelerate's
wrapper. The optimizer thus sees the loss of exactly the gradient it steps with: the same as one
process with the whole batch in one micro-batch.
"""

import torch
from transformers import Trainer

from .base import LossStepOptimizer


class LossToOptimizerMixin:
    """Mix into any ``Trainer`` subclass (TRL's too): ``class MySFT(LossToOptimizerMixin, SFTTrainer)``.

    Works with ``optimizers=(SPS(...), None)`` and ``optimizer_cls_and_kwargs=(NGN, {...})``; an
    optimizer that takes no loss is refused at the first step, and gradient clipping
    (``max_grad_norm``, 1.0 by default) at construction. Logs the last effective step size
    as ``step_size`` (``step_size/<group>`` with ``norm="per_group"``).
    """

    _accumulated_loss: torch.Tensor | None = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if (self.args.max_grad_norm or 0) > 0:  # where the Trainer clips
            raise ValueError(
                f"{type(self).__name__}: `max_grad_norm` must be 0.0 (no clipping), got {self.args.max_grad_norm}: "
                "SPS and NGN size each step from the loss and ||g||^2, and clipping would hand them the clipped "
                "gradient instead"
            )

    def _loss_optimizer(self) -> LossStepOptimizer:
        optimizer = getattr(self.optimizer, "optimizer", self.optimizer)  # inside accelerate's AcceleratedOptimizer
        if not isinstance(optimizer, LossStepOptimizer):
            raise TypeError(
                f"{type(self).__name__}: the optimizer must take the loss (SPS, NGN: a LossStepOptimizer), got "
                f"{type(optimizer).__name__}; use the plain Trainer for it"
            )
        return optimizer

    def training_step(self, model, inputs, num_items_in_batch=None):
        loss = super().training_step(model, inputs, num_items_in_batch)
        self._accumulated_loss = loss if self._accumulated_loss is None else self._accumulated_loss + loss
        if self.accelerator.sync_gradients:
            step_loss = self.accelerator.reduce(self._accumulated_loss.clone(), reduction="mean")
            self._loss_optimizer().set_loss(step_loss)
            self._accumulated_loss = None
        return loss

    def log(self, logs: dict[str, float], *args, **kwargs) -> None:
        if "loss" in logs and self.optimizer is not None:
            sizes = self._loss_optimizer().step_sizes()
            if len(set(sizes)) == 1:
                logs["step_size"] = sizes[0]
            else:
                logs.update({f"step_size/{index}": size for index, size in enumerate(sizes)})
        super().log(logs, *args, **kwargs)


class LossToOptimizerTrainer(LossToOptimizerMixin, Trainer):
    """The stock ``Trainer`` with the loss hand-off: a drop-in for ``Trainer(...)`` with SPS or NGN."""
