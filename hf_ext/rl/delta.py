"""Sparse delta checkpoints: store only the parameter entries that training changed.

Two modes. ``"exact"`` stores every entry whose bits changed and restores the trained model
bit-exactly; but with fp32 (or mixed-precision master) weights nearly every entry moves, so it
saves nothing, and a warning says so. ``"visible"`` stores what a bf16 (or fp16) copy of the model
sees: the entries whose rounded value changed, rounded; applied to the base rounded the same way,
it restores the bf16 model bit-exactly. A tensor in which most entries changed is stored whole,
so a delta is never much larger than a full checkpoint. Each delta records its mode, its dtype
and a fingerprint of every base tensor (as rounded): a different base is refused, naming the tensor.

Sharded models (FSDP2 ``DTensor`` parameters) work on every rank: a delta holds whole tensors, their
entries numbered as in the unsharded tensor and their fingerprints taken of the whole tensor, so a
delta saved from a sharded run applies to an unsharded model and the reverse. Saving gathers one
tensor at a time and writes from rank 0; applying writes into each rank's own shard.
"""

import hashlib
import json
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
from safetensors.torch import save_file
from torch.distributed.tensor import DTensor
from transformers import TrainerCallback

from .._files import open_safetensors
from .._sharded import flat_shard, local, whole
from .._tied import split_tied

FORMAT = "hf_ext.sparse_delta/2"
LEGACY_FORMAT = "hf_ext.sparse_delta/1"  # exact mode, one fingerprint of the whole base state
DELTA_FILE = "sparse_delta.safetensors"
MODES = ("exact", "visible")
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
LARGE_FRACTION = 0.5  # an exact delta above this fraction of a full checkpoint gets a warning
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bit_pattern(tensor: torch.Tensor) -> torch.Tensor:
    """The tensor's raw bit patterns, so that comparisons are exact (NaN == NaN, -0.0 != 0.0)."""
    tensor = tensor.detach().contiguous()
    return tensor.view(_BITS[tensor.element_size()]) if tensor.is_floating_point() else tensor


def _feed(digest, prefix: str, tensor: torch.Tensor) -> None:
    tensor = tensor.detach().cpu().contiguous()
    digest.update(f"{prefix}{tensor.dtype}|{tuple(tensor.shape)}|".encode())
    digest.update(bit_pattern(tensor).view(torch.uint8).numpy().tobytes())


def state_fingerprint(state: dict[str, torch.Tensor]) -> str:
    """SHA-256 over the names, dtypes, shapes and bytes of a state dict."""
    digest = hashlib.sha256()
    for name in sorted(state):
        _feed(digest, f"{name}|", state[name])
    return digest.hexdigest()


def tensor_fingerprint(tensor: torch.Tensor) -> str:
    """SHA-256 over one tensor's dtype, shape and bytes."""
    digest = hashlib.sha256()
    _feed(digest, "", tensor)
    return digest.hexdigest()


def delta_dtype(owner: str, mode: str, dtype=None) -> torch.dtype | None:
    """The dtype a delta in ``mode`` rounds to (``None`` for exact; bf16 by default), checking both."""
    if mode not in MODES:
        raise ValueError(f"{owner}: `mode` must be one of {list(MODES)}, got {mode!r}")
    if mode == "exact":
        if dtype is not None:
            raise ValueError(f"{owner}: `dtype` applies to mode='visible' only, got dtype={dtype!r} with mode='exact'")
        return None
    name = "bfloat16" if dtype is None else str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise ValueError(f"{owner}: `dtype` must be one of {list(DTYPES)} (names or torch dtypes), got {dtype!r}")
    return DTYPES[name]


def _rounded(tensor: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """``tensor`` as a ``dtype`` copy of the model holds it (exact mode and integer tensors: as is)."""
    return tensor.detach().to(dtype) if dtype is not None and tensor.is_floating_point() else tensor.detach()


def _state(model_or_state) -> dict[str, torch.Tensor]:
    return model_or_state if isinstance(model_or_state, dict) else model_or_state.state_dict()


def _is_sharded(state: dict[str, torch.Tensor]) -> bool:
    return any(isinstance(tensor, DTensor) for tensor in state.values())


def changed_entries(current: torch.Tensor, base: torch.Tensor) -> torch.Tensor:
    """Flat indices of the entries whose bits differ between ``current`` and ``base``."""
    return (bit_pattern(current).flatten() != bit_pattern(base).to(current.device).flatten()).nonzero().squeeze(1)


def _warn_if_large(counts: dict[str, int], mode: str) -> bool:
    """Warn, naming the measured fraction and the fix, when an exact delta is over half a full checkpoint."""
    fraction, changed = counts["bytes"] / max(counts["full_bytes"], 1), counts["changed"] / max(counts["total"], 1)
    if mode != "exact" or fraction <= LARGE_FRACTION:
        return False
    warnings.warn(
        f"sparse delta: this exact delta is {fraction:.0%} of a full checkpoint ({changed:.1%} of the entries "
        "changed bitwise; with fp32 or mixed-precision master weights nearly all do). "
        "mode='visible' (dtype=torch.bfloat16) stores only the changes a bf16 copy of the model sees; "
        "training with bf16 parameters also makes the exact delta small.",
        UserWarning,
        stacklevel=3,
    )
    return True


def save_sparse_delta(model, base, path: str | Path, mode: str = "exact", dtype=None, warn: bool = True) -> dict:
    """Write the entries of ``model`` that differ from ``base`` (models or state dicts) to ``path``.

    ``mode="exact"`` compares bits in the parameters' own dtype; ``mode="visible"`` compares both
    rounded to ``dtype`` (bf16 by default) and stores the rounded values. Returns counts:
    ``changed`` and ``total`` entries, the file's ``bytes`` and ``full_bytes``, the tensor bytes of a
    full checkpoint of ``model``. Raises if the two do not have the same tensors, or if a changed
    value is NaN/inf; warns if an exact delta is over half a full checkpoint (``warn=False``: never).
    A sharded ``model`` or ``base`` is saved by every rank together, written by rank 0.
    """
    dtype = delta_dtype("save_sparse_delta", mode, dtype)
    current, reference = _state(model), _state(base)
    if current.keys() != reference.keys():
        differing = sorted(current.keys() ^ reference.keys())[:5]
        raise ValueError(f"save_sparse_delta: `model` and `base` have different tensors, e.g. {differing}")
    tensors, fingerprints, changed, total, full_bytes = {}, {}, 0, 0, 0
    unique, aliases = split_tied(current)
    for name, tensor in unique.items():
        if tensor.shape != reference[name].shape or tensor.dtype != reference[name].dtype:
            raise ValueError(
                f"save_sparse_delta: {name!r} is {tuple(tensor.shape)} {tensor.dtype} in `model` but "
                f"{tuple(reference[name].shape)} {reference[name].dtype} in `base`"
            )
        new, old = _rounded(whole(tensor), dtype), _rounded(whole(reference[name]), dtype)
        fingerprints[name] = tensor_fingerprint(old)
        indices = changed_entries(new, old)
        total += tensor.numel()
        full_bytes += tensor.numel() * tensor.element_size()
        if indices.numel() == 0:
            continue
        values = new.flatten()[indices].cpu()
        if values.is_floating_point() and not torch.isfinite(values).all():
            raise ValueError(f"save_sparse_delta: {name!r} has non-finite changed values ({new.dtype}); refusing them")
        index_dtype = torch.int32 if tensor.numel() <= torch.iinfo(torch.int32).max else torch.int64
        sparse_bytes = indices.numel() * (index_dtype.itemsize + new.element_size())
        if sparse_bytes < new.numel() * new.element_size():
            tensors[f"{name}::indices"], tensors[f"{name}::values"] = indices.to(index_dtype).cpu(), values
        else:  # most entries changed: the whole tensor is smaller than indices + values
            tensors[f"{name}::dense"] = new.cpu().contiguous()
        changed += indices.numel()
    metadata = {
        "format": FORMAT,
        "mode": mode,
        "base_fingerprints": json.dumps(fingerprints),
        "changed": str(changed),
        "aliases": json.dumps(aliases),
    }
    if dtype is not None:
        metadata["dtype"] = str(dtype).removeprefix("torch.")
    path = Path(path)
    counts = {"changed": changed, "total": total, "bytes": 0, "full_bytes": full_bytes}
    sharded = _is_sharded(current) or _is_sharded(reference)
    if not sharded or dist.get_rank() == 0:
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(path), metadata=metadata)
        counts["bytes"] = path.stat().st_size
    if sharded:  # every rank returns the writer's counts
        shared = [counts]
        dist.broadcast_object_list(shared, src=0)
        counts = shared[0]
    if warn:
        _warn_if_large(counts, mode)
    return counts


def _check_base(state: dict[str, torch.Tensor], metadata: dict[str, str], dtype: torch.dtype | None) -> None:
    """Refuse a base other than the one the delta was saved against, naming the first tensors that differ."""
    prefix = "apply_sparse_delta: `base` does not match the model the delta was saved against"
    if metadata["format"] == LEGACY_FORMAT:
        fingerprint = state_fingerprint({name: whole(tensor) for name, tensor in state.items()})
        if fingerprint != metadata["base_fingerprint"]:
            raise ValueError(f"{prefix} (fingerprint {fingerprint[:12]} != {metadata['base_fingerprint'][:12]})")
        return
    fingerprints, aliases = json.loads(metadata["base_fingerprints"]), json.loads(metadata["aliases"])
    missing_or_extra = sorted(state.keys() ^ (fingerprints.keys() | aliases.keys()))
    if missing_or_extra:
        raise ValueError(f"{prefix}: different tensors, e.g. {missing_or_extra[:5]}")
    rounding = "" if dtype is None else f" rounded to {dtype}"
    differing = [n for n, f in fingerprints.items() if tensor_fingerprint(_rounded(whole(state[n]), dtype)) != f]
    if differing:
        raise ValueError(f"{prefix}: {differing[:5]} differ{rounding} ({len(differing)} of {len(fingerprints)})")


def apply_sparse_delta(base, path: str | Path, mode: str | None = None, dtype=None):
    """Write the delta at ``path`` into ``base`` (a model or state dict, in place) and return it.

    An exact delta restores the trained weights bit-exactly. A visible delta first rounds ``base``
    to its dtype (``model.to(dtype)``; a state dict's entries are replaced) and then restores the
    ``dtype``-rounded trained model bit-exactly. ``mode``/``dtype``, if given, must be what the delta
    was saved with. Refuses, before touching anything, a ``base`` that differs from the one the
    delta was saved against (as rounded), and a file that is missing, truncated or not a sparse
    delta. Deltas written before modes existed load as exact. A sharded ``base`` is updated by every
    rank together, each writing its own shard.
    """
    with open_safetensors(path, "apply_sparse_delta") as handle:
        metadata = handle.metadata() or {}
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
    if metadata.get("format") not in (FORMAT, LEGACY_FORMAT):
        raise ValueError(f"apply_sparse_delta: {str(path)!r} is not a sparse delta (format {metadata.get('format')!r})")
    saved_mode = metadata.get("mode", "exact")
    saved_dtype = DTYPES[metadata["dtype"]] if saved_mode == "visible" else None
    if mode is not None or dtype is not None:
        wanted = (mode or "visible", delta_dtype("apply_sparse_delta", mode or "visible", dtype))
        if wanted != (saved_mode, saved_dtype):
            raise ValueError(
                f"apply_sparse_delta: {str(path)!r} was saved with mode={saved_mode!r}, dtype={saved_dtype}; "
                f"asked for mode={wanted[0]!r}, dtype={wanted[1]}"
            )
    state = _state(base)
    _check_base(state, metadata, saved_dtype)
    if saved_dtype is not None:
        if isinstance(base, dict):
            base.update({name: _rounded(tensor, saved_dtype) for name, tensor in base.items()})
        else:
            base.to(saved_dtype)
            state = base.state_dict()
    with torch.no_grad():
        for key, stored in tensors.items():
            name, kind = key.rsplit("::", 1)
            entries, start, _ = flat_shard(state[name], repr(name))
            if kind == "dense":
                entries.copy_(stored.view(-1)[start : start + entries.numel()])
            elif kind == "indices":
                indices = stored.to(torch.int64) - start
                here = (indices >= 0) & (indices < entries.numel())
                entries[indices[here].to(entries.device)] = tensors[f"{name}::values"][here].to(entries.device)
        for alias, owner in json.loads(metadata["aliases"]).items():
            if local(state[alias]).data_ptr() != local(state[owner]).data_ptr():  # not tied in this base: copy
                state[alias].copy_(state[owner])
    return base


class SparseDeltaCallback(TrainerCallback):
    """Writes ``sparse_delta.safetensors`` into each checkpoint, against ``base``.

    ``base`` (a model or state dict) defaults to a CPU copy of the model taken when training
    starts (this rank's shards, for a sharded model); pass the original base explicitly when resuming
    from a checkpoint. ``mode`` and ``dtype`` are ``save_sparse_delta``'s; an exact delta over half a
    full checkpoint is warned about once per run.
    """

    def __init__(self, base=None, mode: str = "exact", dtype=None):
        self.dtype = delta_dtype("SparseDeltaCallback", mode, dtype)
        self.mode = mode
        if not (base is None or isinstance(base, dict | torch.nn.Module)):
            raise TypeError(
                "SparseDeltaCallback: `base` must be the base model, its state_dict or None (the weights at the "
                f"start of training), got {type(base).__name__}"
            )
        self.base = None if base is None else _state(base)
        self._warned = False

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self.base is None:
            self.base = {name: tensor.detach().cpu().clone() for name, tensor in model.state_dict().items()}

    def on_save(self, args, state, control, model=None, **kwargs):
        if state.is_world_process_zero or _is_sharded(self.base):  # a sharded model is gathered by every rank
            checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            counts = save_sparse_delta(model, self.base, checkpoint / DELTA_FILE, self.mode, self.dtype, warn=False)
            self._warned = self._warned or _warn_if_large(counts, self.mode)
