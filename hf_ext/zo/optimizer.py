"""The update of zeroth-order training as a ``torch.optim.Optimizer``, so the Trainer's schedulers,
checkpointing and accelerate's wrapping work unchanged."""

import torch

from .perturbation import ZOPerturbation


class ZOOptimizer(torch.optim.Optimizer):
    """Applies ``theta <- theta - lr * (g * Z + wd * theta)`` from the projected gradients of the step.

    :meth:`accumulate` records ``(seed, g)`` pairs (from every micro-batch of a step);
    :meth:`step` regenerates each ``Z`` from its seed and applies the update, so nothing
    parameter-sized is stored. AGZO's subspaces are part of :meth:`state_dict`, which makes a
    resumed run continue exactly as an uninterrupted one.
    """

    def __init__(self, perturbation: ZOPerturbation, lr: float, weight_decay: float, decay_names: set[str]):
        named = dict(perturbation.model.named_parameters())
        names = perturbation.parameter_names()
        decay = [named[n] for n in names if n in decay_names]
        no_decay = [named[n] for n in names if n not in decay_names]
        groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        super().__init__([g for g in groups if g["params"]], {"lr": lr, "weight_decay": 0.0})
        self.perturbation = perturbation
        self._pending: list[tuple[int, float]] = []
        self._skip = False

    def accumulate(self, seeds: list[int], projected_grads: list[float], weight: float) -> None:
        """Add ``weight * g_i * Z(seed_i)`` to the pending update (weight: 1 / (q * accumulation steps))."""
        self._pending.extend((seed, weight * g) for seed, g in zip(seeds, projected_grads, strict=True))

    def skip_step(self) -> None:
        """Make the next :meth:`step` change nothing (a loss of this step was NaN or inf)."""
        self._skip = True

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            raise ValueError("ZOOptimizer.step takes no closure: the losses are computed by ZOTrainer")
        if self._skip:
            self._pending.clear()
            self._skip = False
            return
        lr = self.param_groups[0]["lr"]
        for group in self.param_groups:
            if group["weight_decay"]:
                for param in group["params"]:
                    param.mul_(1 - group["lr"] * group["weight_decay"])
        for seed, coefficient in self._pending:
            self.perturbation.add_direction_(seed, -lr * coefficient)
        self._pending.clear()

    def state_dict(self) -> dict:
        state = super().state_dict()
        state["zo_subspaces"] = {name: basis.clone() for name, basis in self.perturbation.subspaces.items()}
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        subspaces = state_dict.pop("zo_subspaces", {})
        super().load_state_dict(state_dict)
        device = self.param_groups[0]["params"][0].device
        self.perturbation.subspaces = {name: basis.to(device) for name, basis in subspaces.items()}
