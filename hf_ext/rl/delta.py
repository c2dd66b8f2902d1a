"""Sparse delta checkpoints: store only the parameter entries that training changed.

RLVR with plain SGD is reported to leave almost every entry of a bf16 model bit-identical to
the base, so a checkpoint of the changed entries (flat index + new value per tensor) is a small
fraction of a full one. A tensor in which most entries changed is stored whole, so a delta is
never much larger than a full checkpoint (an fp32 run, where nearly every entry moves, gets no
saving). Loading writes the stored values back into the base, bit-exactly; the base's
fingerprint is stored with the delta, and a different base is refused.
"""

import hashlib
import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import TrainerCallback

from .._files import open_safetensors
from .._tied import split_tied

FORMAT = "hf_ext.sparse_delta/1"
DELTA_FILE = "sparse_delta.safetensors"
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bit_pattern(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's raw bit patterns, so that comparisons are exact (NaN == NaN, -0.0 != 0.0)."""
    tensor = tensor.detach().contiguous()
    return tensor.view(_BITS[tensor.element_size()]) if tensor.is_floating_point() else tensor


def state_fingerprint(state: dict[str, torch.Tensor]) -> str:
    """SHA-256 over the names, dtypes, shapes and bytes of a state dict."""
    digest = hashlib.sha256()
    for name in sorted(state):
        tensor = state[name].detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(bit_pattern(tensor).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _state(model_or_state) -> dict[str, torch.Tensor]:
    return model_or_state if isinstance(model_or_state, dict) else model_or_state.state_dict()


def changed_entries(current: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
    """Flat indices of the entries whose bits differ between ``current`` and ``base``."""
    return (bit_pattern(current).flatten() != bit_pattern(base).to(current.device).flatten()).nonzero().squeeze(1)


def save_sparse_delta(model, base, path: str | Path) -> dict[str, int]:
    """Write the entries of ``model`` that differ from ``base`` (models or state dicts) to ``path``.

    Returns counts: ``changed`` entries, ``total`` entries and the file's ``bytes``. Raises if
    the two do not have the same tensors, or if a changed value is NaN/inf.
    """
    current, reference = _state(model), _state(base)
    if current.keys() != reference.keys():
        differing = sorted(current.keys() ^ reference.keys())[:5]
        raise ValueError(f"save_sparse_delta: `model` and `base` have different tensors, e.g. {differing}")
    tensors, changed, total = {}, 0, 0
    unique, aliases = split_tied(current)
    for name, tensor in unique.items():
        if tensor.shape != reference[name].shape or tensor.dtype != reference[name].dtype:
            raise ValueError(
                f"save_sparse_delta: {name!r} is {tuple(tensor.shape)} {tensor.dtype} in `model` but "
                f"{tuple(reference[name].shape)} {reference[name].dtype} in `base`"
            )
        indices = changed_entries(tensor, reference[name])
        total += tensor.numel()
        if indices.numel() == 0:
            continue
        values = tensor.detach().flatten()[indices].cpu()
        if values.is_floating_point() and not torch.isfinite(values).all():
            raise ValueError(f"save_sparse_delta: {name!r} has non-finite changed values; refusing to save them")
        index_dtype = torch.int32 if tensor.numel() <= torch.iinfo(torch.int32).max else torch.int64
        sparse_bytes = indices.numel() * (index_dtype.itemsize + tensor.element_size())
        if sparse_bytes < tensor.numel() * tensor.element_size():
            tensors[f"{name}::indices"], tensors[f"{name}::values"] = indices.to(index_dtype).cpu(), values
        else:  # most entries changed: the whole tensor is smaller than indices + values
            tensors[f"{name}::dense"] = tensor.detach().cpu().contiguous()
        changed += indices.numel()
    metadata = {
        "format": FORMAT,
        "base_fingerprint": state_fingerprint(reference),
        "changed": str(changed),
        "aliases": json.dumps(aliases),
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata=metadata)
    return {"changed": changed, "total": total, "bytes": path.stat().st_size}


def apply_sparse_delta(base, path: str | Path):
    """Write the delta at ``path`` into ``base`` (a model or state dict, in place) and return it.

    Refuses, before touching anything, a ``base`` whose fingerprint differs from the one the
    delta was saved against, and a file that is missing, truncated or not a sparse delta.
    """
    with open_safetensors(path, "apply_sparse_delta") as handle:
        metadata = handle.metadata() or {}
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
    if metadata.get("format") != FORMAT:
        raise ValueError(f"apply_sparse_delta: {str(path)!r} is not a sparse delta (format {metadata.get('format')!r})")
    state = _state(base)
    fingerprint = state_fingerprint(state)
    if fingerprint != metadata["base_fingerprint"]:
        raise ValueError(
            f"apply_sparse_delta: `base` does not match the model the delta was saved against (fingerprint "
            f"{fingerprint[:12]} != {metadata['base_fingerprint'][:12]})"
        )
    with torch.no_grad():
        for key, stored in tensors.items():
            name, kind = key.rsplit("::", 1)
            target = state[name]
            if kind == "dense":
                target.copy_(stored)
            elif kind == "indices":
                target.view(-1)[stored.to(target.device, torch.int64)] = tensors[f"{name}::values"].to(target.device)
        for alias, owner in json.loads(metadata["aliases"]).items():
            if state[alias].data_ptr() != state[owner].data_ptr():  # not tied in this base: copy
                state[alias].copy_(state[owner])
    return base


class SparseDeltaCallback(TrainerCallback):
    """Writes ``sparse_delta.safetensors`` into each checkpoint, against ``base``.

    ``base`` (a model or state dict) defaults to a CPU copy of the model taken when training
    starts; pass the original base explicitly when resuming from a checkpoint.
    """

    def __init__(self, base=None):
        self.base = None if base is None else _state(base)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.base is None:
            self.base = {name: tensor.detach().cpu().clone() for name, tensor in model.state_dict().items()}

    def on_save(self, args, state, control, model=None, **kwargs):
        if state.is_world_process_zero:
            checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            save_sparse_delta(model, self.base, checkpoint / DELTA_FILE)
