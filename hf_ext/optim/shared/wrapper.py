"""The base of optimizers that wrap another one: their groups, state and checkpoints are the base's."""

from collections import OrderedDict

import torch

from ..._validation import check_finite_number

# What torch.optim.Optimizer.__init__ sets up for hooks; torch's pickling leaves these out and recreates them empty.
_HOOKS = (
    "_optimizer_step_pre_hooks",
    "_optimizer_step_post_hooks",
    "_optimizer_state_dict_pre_hooks",
    "_optimizer_state_dict_post_hooks",
    "_optimizer_load_state_dict_pre_hooks",
    "_optimizer_load_state_dict_post_hooks",
)


def _delegated(name: str) -> property:
    """A read-write attribute that lives on ``self.base_optimizer`` (it stays in step after its ``load_state_dict``)."""
    return property(
        lambda self: getattr(self.base_optimizer, name),
        lambda self, value: setattr(self.base_optimizer, name, value),
    )


class OptimizerWrapper(torch.optim.Optimizer):
    """An optimizer that steps ``base_optimizer`` and adds its own work around that step.

    ``param_groups``, ``state``, ``defaults``, ``zero_grad()`` and ``add_param_group()`` are the base
    optimizer's, and ``state_dict()`` is the base's plus :meth:`wrapper_state_dict`, so learning-rate
    schedulers, ``Trainer`` checkpoints and resuming work unchanged. ``Optimizer.__init__`` is not called (it
    would build groups and state of the wrapper's own); the wrapper sets up torch's hooks itself, so step and
    state-dict hooks registered on it run as on any optimizer.
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
        self._init_hooks()

    def _init_hooks(self) -> None:
        for name in _HOOKS:
            setattr(self, name, OrderedDict())
        self._patch_step_function()  # torch's step wrapper, which runs the step hooks

    def wrapper_state_dict(self) -> dict:
        """Entries of the wrapper's own that ``state_dict()`` adds to the base's (none here)."""
        return {}

    def load_wrapper_state_dict(self, state_dict: dict) -> None:
        """Restore what :meth:`wrapper_state_dict` saved (its keys, taken out of the loaded dict)."""

    def state_dict(self) -> dict:
        for hook in self._optimizer_state_dict_pre_hooks.values():
            hook(self)
        state_dict = {**self.base_optimizer.state_dict(), **self.wrapper_state_dict()}
        for hook in self._optimizer_state_dict_post_hooks.values():
            state_dict = hook(self, state_dict) or state_dict
        return state_dict

    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        for hook in self._optimizer_load_state_dict_pre_hooks.values():
            state_dict = hook(self, state_dict) or state_dict
        own = {key: state_dict.pop(key) for key in self.wrapper_state_dict() if key in state_dict}
        self.base_optimizer.load_state_dict(state_dict)
        self.load_wrapper_state_dict(own)
        for hook in self._optimizer_load_state_dict_post_hooks.values():
            hook(self)

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.base_optimizer.zero_grad(set_to_none=set_to_none)

    def add_param_group(self, param_group: dict) -> None:
        """The base's, after checking ``lr`` (torch's own optimizers check it only at construction)."""
        lr = param_group.get("lr", self.defaults.get("lr", 0.0))
        check_finite_number(type(self).__name__, "lr", lr)
        if not lr >= 0:
            raise ValueError(f"{type(self).__name__}: `lr` of a param group must be >= 0, got {lr}")
        self.base_optimizer.add_param_group(param_group)

    # torch.optim.Optimizer pickles only defaults/state/param_groups; a wrapper needs its base and settings too,
    # and, as torch does, leaves its hooks out.
    def __getstate__(self) -> dict:
        return {key: value for key, value in self.__dict__.items() if key not in _HOOKS}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._init_hooks()
