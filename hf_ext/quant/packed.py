"""Packed 1-bit export: each binarized weight as bits (8 per byte) plus its two scale vectors.

``save_packed`` writes ``config.json`` and one safetensors file; ``load_packed`` rebuilds the
architecture from that config (or checks a model you pass), swaps the binarized layers for
:class:`PackedBinaryLinear` and loads everything else as it was. The packed model computes
what the unpacked binary model computes, reading the bits directly in the matmul.

A sharded model (FSDP2) is saved by all its ranks together: each tensor is gathered whole, one at a
time, onto the first rank's CPU, which writes the files one process would write (byte for byte);
every rank returns the sizes. The first rank thus holds the whole model in CPU memory while writing.
"""

import json
from pathlib import Path

import torch
import torch.distributed as dist
from safetensors.torch import save_file
from torch import nn
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel
from transformers.utils import CONFIG_NAME

from hf_ext.kernels import pack_signs, packed_binary_matmul

from .._files import open_safetensors, read_json
from .._sharded import gathered, local, shard_group, sum_across
from .._tied import split_tied
from .convert import binary_layers

FORMAT = "hf_ext.packed_binary/1"
PACKED_FILE = "packed_binary.safetensors"


class PackedBinaryLinear(nn.Module):
    """Inference-only ``diag(a) sign(W) diag(b)`` linear layer stored as packed sign bits."""

    def __init__(self, in_features: int, out_features: int, bias: bool, dtype=None, device=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.register_buffer(
            "packed", torch.zeros(out_features, (in_features + 7) // 8, dtype=torch.uint8, device=device)
        )
        self.register_buffer("row_scale", torch.ones(out_features, dtype=dtype, device=device))
        self.register_buffer("col_scale", torch.ones(in_features, dtype=dtype, device=device))
        self.register_buffer("bias", torch.zeros(out_features, dtype=dtype, device=device) if bias else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return packed_binary_matmul(x, self.packed, self.row_scale, self.col_scale, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


LAYER_TENSORS = ("weight", "row_scale", "col_scale", "bias")


def _layer_tensors(name: str, whole: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A binarized layer's entries of the file, from its whole tensors (``whole``: by state-dict key)."""
    tensors = {f"{name}.packed": pack_signs(whole[f"{name}.weight"].detach())}
    for part in LAYER_TENSORS[1:]:
        if f"{name}.{part}" in whole:
            tensors[f"{name}.{part}"] = whole[f"{name}.{part}"].detach()
    return tensors


def save_packed(model: PreTrainedModel, save_directory: str | Path) -> dict[str, int]:
    """Write ``model`` with its binarized layers packed to 1 bit; returns sizes in bytes.

    Every binarized layer must be fully binary (``mix`` 1): a partly mixed layer has no 1-bit
    form. Returns ``packed_linear_bytes`` (bits + scales + biases of the binarized layers),
    ``fp16_linear_bytes`` (the same layers' weights and biases in fp16) and ``file_bytes``.
    Every rank of an FSDP2-sharded model calls it; the first one writes (see the module docstring).
    """
    layers = binary_layers(model)
    if not layers:
        raise ValueError("save_packed: `model` has no binarized layer; call binarize_model and train it first")
    unfinished = {name: layer.mix.item() for name, layer in layers.items() if layer.mix.item() != 1.0}
    if unfinished:
        name, mix = next(iter(unfinished.items()))
        raise ValueError(
            f"save_packed: {len(unfinished)} binarized layers are not fully binary (e.g. {name!r} has mix {mix}); "
            "finish the schedule (or call set_binarization_mix(model, 1.0)) before exporting"
        )
    state = model.state_dict()
    group = shard_group(state.values(), "save_packed")
    nonfinite = [float(t.is_floating_point() and not torch.isfinite(local(t)).all()) for t in state.values()]
    if sum_across(torch.tensor(nonfinite, device=local(next(iter(state.values()))).device), group).any():
        raise ValueError("save_packed: the model has NaN/inf values; refusing to export them")
    prefixes = tuple(f"{name}." for name in layers)
    rest, aliases = split_tied({key: local(t) for key, t in state.items() if not key.startswith(prefixes)})
    keys = [f"{name}.{part}" for name in layers for part in LAYER_TENSORS if f"{name}.{part}" in state] + list(rest)
    writer = group is None or dist.get_rank(group) == 0
    whole = {key: gathered(state[key], keep=writer) for key in keys}  # every rank takes part in each gather
    sizes = [_write(model, layers, whole, rest, aliases, Path(save_directory)) if writer else None]
    if group is not None:
        dist.broadcast_object_list(sizes, group=group, group_src=0)
    return sizes[0]


def _write(model: PreTrainedModel, layers: dict, whole: dict, rest: dict, aliases: dict, save_directory: Path) -> dict:
    """Write the config and the packed file from the whole tensors; the sizes :func:`save_packed` returns."""
    tensors = {}
    for name in layers:
        tensors |= _layer_tensors(name, whole)
    prefixes = tuple(f"{name}." for name in layers)
    tensors |= {key: whole[key].detach() for key in rest}
    shapes = {name: [layer.in_features, layer.out_features, layer.bias is not None] for name, layer in layers.items()}
    metadata = {"format": FORMAT, "binary_layers": json.dumps(shapes), "aliases": json.dumps(aliases)}
    save_directory.mkdir(parents=True, exist_ok=True)
    model.config.save_pretrained(save_directory)
    save_file({key: t.contiguous().cpu() for key, t in tensors.items()}, save_directory / PACKED_FILE, metadata)
    packed_bytes = sum(t.numel() * t.element_size() for key, t in tensors.items() if key.startswith(prefixes))
    fp16_bytes = sum(
        2 * (layer.weight.numel() + (0 if layer.bias is None else layer.bias.numel())) for layer in layers.values()
    )
    return {
        "packed_linear_bytes": packed_bytes,
        "fp16_linear_bytes": fp16_bytes,
        "file_bytes": (save_directory / PACKED_FILE).stat().st_size,
    }


def _read(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    file = path / PACKED_FILE
    if not file.is_file():
        raise ValueError(f"load_packed: no {PACKED_FILE} in {str(path)!r}; write one with save_packed")
    with open_safetensors(file, "load_packed") as handle:
        metadata = handle.metadata() or {}
        if metadata.get("format") != FORMAT:
            raise ValueError(f"load_packed: {str(file)!r} is not a {FORMAT} file (format {metadata.get('format')!r})")
        return {key: handle.get_tensor(key) for key in handle.keys()}, metadata


def load_packed(path: str | Path, model: PreTrainedModel | None = None) -> PreTrainedModel:
    """Rebuild the binary model saved by :func:`save_packed`, in eval mode.

    Without ``model``, the architecture is built from the saved ``config.json``. A given
    ``model`` (full precision, same architecture) is converted in place; a model whose layers or
    shapes do not match the file is refused.
    """
    path = Path(path)
    tensors, metadata = _read(path)
    if model is None:
        read_json(path / CONFIG_NAME, "load_packed")  # AutoConfig would blame a missing file on its model_type
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path))
    layers = json.loads(metadata["binary_layers"])
    for name, (in_features, out_features, bias) in layers.items():
        try:
            module = model.get_submodule(name)
        except AttributeError:
            module = None
        if not isinstance(module, nn.Linear) or (module.in_features, module.out_features) != (
            in_features,
            out_features,
        ):
            found = None if module is None else type(module).__name__
            if isinstance(module, nn.Linear):
                found = f"Linear({module.in_features}, {module.out_features})"
            raise ValueError(
                f"load_packed: the file's binary layer {name!r} is Linear({in_features}, {out_features}) but `model` "
                f"has {found}: the packed file was saved from a different architecture"
            )
        packed = PackedBinaryLinear(in_features, out_features, bias, dtype=tensors[f"{name}.row_scale"].dtype)
        parent, _, attribute = name.rpartition(".")
        setattr(model.get_submodule(parent), attribute, packed)
    aliases = json.loads(metadata["aliases"])
    expected = set(model.state_dict())
    if set(tensors) | set(aliases) != expected:
        differing = sorted((set(tensors) | set(aliases)) ^ expected)[:5]
        raise ValueError(f"load_packed: the file and `model` have different tensors, e.g. {differing}")
    mismatched = [
        f"{key}: file {tuple(tensors[key].shape)}, model {tuple(value.shape)}"
        for key, value in model.state_dict().items()
        if key in tensors and tensors[key].shape != value.shape
    ]
    if mismatched:
        raise ValueError(f"load_packed: shapes differ from `model`'s, e.g. {mismatched[:3]}")
    model.load_state_dict(tensors | {key: tensors[owner] for key, owner in aliases.items()})
    return model.eval()
