"""The tensors an optimizer holds, to tell when accelerate's FSDP2 ``prepare`` has put others in their place.

The ``Trainer`` builds its optimizer on the whole model; accelerate's ``prepare`` then shards the model with
``fully_shard`` and writes each parameter's ``DTensor`` into the optimizer's ``param_groups`` in place of the tensor
it was built on (no ``add_param_group``). What an optimizer worked out from those tensors when it was built (owner
ranks, which tensors are sharded, work buffers shaped like them) describes tensors it no longer steps: it must work
it out again, or it takes each shard for a whole matrix or steps the old tensors.
"""

import torch


def held_tensors(optimizer: torch.optim.Optimizer) -> tuple[torch.Tensor, ...]:
    """The tensors in ``optimizer``'s ``param_groups``, in order."""
    return tuple(p for group in optimizer.param_groups for p in group["params"])


def replaced(optimizer: torch.optim.Optimizer, held: tuple[torch.Tensor, ...]) -> bool:
    """Whether ``optimizer`` holds other tensors than ``held`` (:func:`held_tensors` when it made its plan): one
    identity check a parameter."""
    now = held_tensors(optimizer)
    return len(now) != len(held) or any(p is not q for p, q in zip(now, held, strict=True))
