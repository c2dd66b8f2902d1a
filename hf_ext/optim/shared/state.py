"""Optimizer state that torch's ``load_state_dict`` would change: entries kept in a dtype of their own."""

from collections.abc import Callable
from itertools import chain

import torch


def restore_state(
    optimizer: torch.optim.Optimizer, state_dict: dict, dtype: Callable[[str, torch.Tensor], torch.dtype | None]
) -> None:
    """After torch's ``load_state_dict(state_dict)``: each saved state entry ``name`` of a parameter ``p`` for which
    ``dtype(name, p)`` is a dtype, copied again from ``state_dict`` in that dtype onto ``p``'s device.

    torch casts every floating entry but ``step`` to its parameter's dtype (float32 statistics of a bfloat16 model
    would be rounded at every resume) and keeps ``step`` where it was saved; the copies also keep the optimizer's
    state apart from the dict it was loaded from, which its in-place updates would otherwise change."""
    saved = chain.from_iterable(group["params"] for group in state_dict["param_groups"])
    params = dict(zip(saved, chain.from_iterable(group["params"] for group in optimizer.param_groups), strict=True))
    for key, entries in state_dict["state"].items():
        p = params.get(key)
        if p is None or not isinstance(entries, dict):
            continue
        for name, value in entries.items():
            wanted = dtype(name, p)
            if wanted is not None:
                optimizer.state[p][name] = torch.as_tensor(value).to(device=p.device, dtype=wanted, copy=True)
