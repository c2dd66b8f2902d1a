"""The base of optimizers that wrap another one: their groups, state and checkpoints are the base's."""

import torch


def _delegated(name: str) -> property:
    """A read-write attribute that lives on ``self.base_optimizer`` (it stays in step after its ``load_state_dict``)."""
    return property(
        lambda self: getattr(self.base_optimizer, name),
        lambda self, value: setattr(self.base_optimizer, name, value),
    )


class OptimizerWrapper(torch.optim.Optimizer):
    """An optimizer that steps ``base_optimizer`` and adds its own work around that step.

    ``param_groups``, ``state``, ``defaults``, ``state_dict()``, ``load_state_dict()``, ``zero_grad()``
    and ``add_param_group()`` are the base optimizer's, so learning-rate schedulers, ``Trainer``
    checkpoints and resuming work unchanged. ``Optimizer.__init__`` is not called: it would build
    groups and state of the wrapper's own.
    """

    param_groups = _delegated("param_groups")
    state = _delegated("state")
    defaults = _delegated("defaults")

    def __init__(self, base_optimizer: torch.optim.Optimizer):
        if not isinstance(base_optimizer, torch.optim.Optimizer):
            raise TypeError(
                f"{type(self).__name__}: `base_optimizer` must be a torch.optim.Optimizer, got "
                f"{type(base_optimizer).__name__}"
            )
        self.base_optimizer = base_optimizer

    def state_dict(self) -> dict:
        return self.base_optimizer.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self.base_optimizer.load_state_dict(state_dict)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.base_optimizer.zero_grad(set_to_none=set_to_none)

    def add_param_group(self, param_group: dict) -> None:
        self.base_optimizer.add_param_group(param_group)

    # torch.optim.Optimizer pickles only defaults/state/param_groups; a wrapper needs its base too.
    def __getstate__(self) -> dict:
        return self.__dict__.copy()

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
