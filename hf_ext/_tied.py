"""Tied weights (e.g. embeddings and LM head) appear under several names in a state dict; store them once."""

import torch

from ._sharded import local


def split_tied(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """The tensors of ``state`` under their first name, and ``{other name: first name}`` for the tied rest."""
    owners, unique, aliases = {}, {}, {}
    for name, tensor in state.items():
        part = local(tensor)  # a DTensor has no storage; tied ones share their local shard's
        key = (part.untyped_storage().data_ptr(), part.storage_offset(), tuple(tensor.shape))
        if key in owners:
            aliases[name] = owners[key]
        else:
            owners[key] = name
            unique[name] = tensor
    return unique, aliases
