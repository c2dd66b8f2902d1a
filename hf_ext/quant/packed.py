"""Packed 1-bit export: each binarized weight as bits (8 per byte) plus its two scale vectors.

``save_packed`` writes ``config.json`` and one safetensors file; ``load_packed`` rebuilds the
architecture from that config (or checks a model you pass), swaps the binarized layers for their packed
forms and loads everything else as it was. The packed model computes what the unpacked binary model
computes: a :class:`PackedBinaryLinear` reads the bits directly in the matmul; the other binarized weights
(GPT-2's ``Conv1D``, expert stacks, routers) keep their module, whose weight becomes the bits parametrized by
:class:`PackedBinaryWeight`, unpacked to the dense binary weight when the module's forward reads it.

Every weight is stored as its ``(..., out, in)`` maps (a ``Conv1D``'s transposed, an expert stack's per
expert): ``<name>.packed`` ``(..., out, ceil(in / 8))``, ``<name>.row_scale`` ``(..., out)``,
``<name>.col_scale`` ``(..., in)`` and an ``nn.Linear``'s ``<name>.bias``; ``<name>`` is the module's name,
or the parameter's for a weight not called ``weight`` (``mlp.experts.gate_up_proj``).

A sharded model (FSDP2) is saved by all its ranks together: each tensor is gathered whole, one at a
time, onto the first rank's CPU, which writes the files one process would write (byte for byte);
every rank returns the sizes. The first rank thus holds the whole model in CPU memory while writing.
"""

import copy
import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import transformers
from safetensors.torch import save_file
from torch import nn
from torch.nn.utils import parametrize
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedModel
from transformers.utils import CONFIG_NAME

from hf_ext.kernels import pack_signs, packed_binary_matmul, unpack_signs

from .._files import open_safetensors, read_json
from .._sharded import gathered, local, shard_group, sum_across
from .._tied import split_tied
from ..models.layout import model_layout
from .binary_linear import ProgressiveBinaryLinear, ProgressiveBinaryWeight, scale_signs
from .convert import binary_layers, layer_name, parametrized_weights

FORMAT = "hf_ext.packed_binary/1"
PACKED_FILE = "packed_binary.safetensors"


class PackedBinaryLinear(nn.Module):
    """Inference-only ``diag(a) sign(W) diag(b)`` linear layer stored as packed sign bits.

    ``weight`` answers what code written for ``nn.Linear`` reads of it (shape, dtype, device, values: T5 checks
    ``wo.weight.dtype`` in every forward): the dense binary weight ``(out, in)``, unpacked at each read. The
    forward never reads it. It cannot be assigned, and writing into it changes nothing: the layer is 1-bit, so
    merging an adapter into it (PEFT's ``merge``) has no packed form; merge before binarizing.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool, dtype=None, device=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.register_buffer(
            "packed", torch.zeros(out_features, (in_features + 7) // 8, dtype=torch.uint8, device=device)
        )
        self.register_buffer("row_scale", torch.ones(out_features, dtype=dtype, device=device))
        self.register_buffer("col_scale", torch.ones(in_features, dtype=dtype, device=device))
        self.register_buffer("bias", torch.zeros(out_features, dtype=dtype, device=device) if bias else None)

    @property
    def weight(self) -> torch.Tensor:
        """The dense binary weight ``diag(a) S diag(b)``, unpacked from the bits (a new tensor at each read)."""
        signs = unpack_signs(self.packed, self.in_features, self.row_scale.dtype)
        return scale_signs(signs, self.row_scale, self.col_scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return packed_binary_matmul(x, self.packed, self.row_scale, self.col_scale, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class PackedBinaryWeight(nn.Module):
    """The parametrization of a packed weight that is not an ``nn.Linear``'s (``Conv1D``, expert stacks, routers).

    The module holds the sign bits ``(..., out, ceil(in / 8))`` in place of its weight; reading the weight unpacks
    them to ``diag(a) S diag(b)`` in the stored orientation (``transposed`` for a ``Conv1D``), the values the
    unpacked binary model multiplies by, bit for bit.
    """

    def __init__(self, row_scale: torch.Tensor, col_scale: torch.Tensor, transposed: bool):
        super().__init__()
        self.transposed = transposed
        self.register_buffer("row_scale", row_scale)
        self.register_buffer("col_scale", col_scale)

    def forward(self, packed: torch.Tensor) -> torch.Tensor:
        in_features = self.col_scale.shape[-1]
        signs = unpack_signs(packed.reshape(-1, packed.shape[-1]), in_features, self.row_scale.dtype)
        binary = scale_signs(signs.view(*packed.shape[:-1], in_features), self.row_scale, self.col_scale)
        return binary.mT if self.transposed else binary


@dataclass(frozen=True)
class _StateKeys:
    """Where a binarized weight's tensors are in the model's ``state_dict``. ``prefix`` starts each key that is
    not saved as it is (weight, scales, mix; an ``nn.Linear``'s ``bias``, which its packed layer holds: a
    ``Conv1D`` keeps its bias, saved as any other tensor)."""

    weight: str
    row_scale: str
    col_scale: str
    bias: str | None
    prefix: str
    transposed: bool


def _state_keys(model: nn.Module) -> dict[str, _StateKeys]:
    """Each binarized weight's :class:`_StateKeys`, by the name the packed file gives it."""
    keys = {}
    for name, layer in binary_layers(model).items():
        if isinstance(layer, ProgressiveBinaryLinear):
            bias = None if layer.bias is None else f"{name}.bias"
            keys[name] = _StateKeys(f"{name}.weight", f"{name}.row_scale", f"{name}.col_scale", bias, f"{name}.", False)
    for module_name, tensor_name, index, parametrization in parametrized_weights(model):
        if isinstance(parametrization, ProgressiveBinaryWeight):
            prefix = _parametrization_prefix(module_name, tensor_name)
            weight, scales = f"{prefix}original", (f"{prefix}{index}.row_scale", f"{prefix}{index}.col_scale")
            name = layer_name(module_name, tensor_name)
            keys[name] = _StateKeys(weight, *scales, None, prefix, parametrization.transposed)
    return keys


def _parametrization_prefix(module_name: str, tensor_name: str) -> str:
    """What the state-dict keys of a parametrized weight start with (its latent or bits, its parametrizations')."""
    return ".".join(part for part in (module_name, "parametrizations", tensor_name) if part) + "."


def _maps(weight: torch.Tensor, transposed: bool) -> torch.Tensor:
    """A stored weight as its ``(..., out, in)`` maps."""
    return weight.mT if transposed else weight


def _pack(maps: torch.Tensor) -> torch.Tensor:
    """The sign bits of ``(..., out, in)`` maps, ``(..., out, ceil(in / 8))``: every row packed at once."""
    return pack_signs(maps.reshape(-1, maps.shape[-1])).view(*maps.shape[:-1], -1)


def _layer_tensors(name: str, keys: _StateKeys, whole: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A binarized weight's entries of the file, from its whole tensors (``whole``: by state-dict key)."""
    tensors = {
        f"{name}.packed": _pack(_maps(whole[keys.weight].detach(), keys.transposed)),
        f"{name}.row_scale": whole[keys.row_scale].detach(),
        f"{name}.col_scale": whole[keys.col_scale].detach(),
    }
    if keys.bias is not None:
        tensors[f"{name}.bias"] = whole[keys.bias].detach()
    return tensors


def save_packed(model: PreTrainedModel, save_directory: str | Path) -> dict[str, int]:
    """Write ``model`` with its binarized weights packed to 1 bit; returns sizes in bytes.

    Every binarized weight must be fully binary (``mix`` 1): a partly mixed one has no 1-bit
    form. Returns ``packed_linear_bytes`` (bits + scales + biases of the binarized weights),
    ``fp16_linear_bytes`` (the same weights and biases in fp16) and ``file_bytes``.
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
    state_keys = _state_keys(model)
    prefixes = tuple(keys.prefix for keys in state_keys.values())
    rest, aliases = split_tied({key: local(t) for key, t in state.items() if not key.startswith(prefixes)})
    own = [key for k in state_keys.values() for key in (k.weight, k.row_scale, k.col_scale, k.bias) if key is not None]
    keys = own + list(rest)
    writer = group is None or dist.get_rank(group) == 0
    whole = {key: gathered(state[key], keep=writer) for key in keys}  # every rank takes part in each gather
    sizes = [_write(model, state_keys, whole, rest, aliases, Path(save_directory)) if writer else None]
    if group is not None:
        dist.broadcast_object_list(sizes, group=group, group_src=0)
    return sizes[0]


def _saved_config(model: PreTrainedModel):
    """The model's config naming its transformers class in ``architectures``, as ``save_pretrained`` does, for
    :func:`load_packed` (past the subclass FSDP2 makes; a PEFT model's config is left as it is)."""
    config = copy.deepcopy(model.config)
    names = [cls.__name__ for cls in type(model).__mro__ if getattr(transformers, cls.__name__, None) is cls]
    if names and isinstance(model, PreTrainedModel):
        config.architectures = names[:1]
    return config


def _write(model: PreTrainedModel, state_keys: dict, whole: dict, rest: dict, aliases: dict, directory: Path) -> dict:
    """Write the config and the packed file from the whole tensors; the sizes :func:`save_packed` returns."""
    tensors = {}
    for name, keys in state_keys.items():
        tensors |= _layer_tensors(name, keys, whole)
    tensors |= {key: whole[key].detach() for key in rest}
    shapes = {}
    for name, keys in state_keys.items():
        maps = _maps(whole[keys.weight], keys.transposed)
        shapes[name] = [maps.shape[-1], maps.shape[-2], f"{name}.bias" in tensors]  # in, out, bias (a Conv1D's too)
    metadata = {"format": FORMAT, "binary_layers": json.dumps(shapes), "aliases": json.dumps(aliases)}
    directory.mkdir(parents=True, exist_ok=True)
    _saved_config(model).save_pretrained(directory)
    save_file({key: t.contiguous().cpu() for key, t in tensors.items()}, directory / PACKED_FILE, metadata)
    prefixes = tuple(f"{name}." for name in state_keys)  # bits, scales and biases
    packed_bytes = sum(t.numel() * t.element_size() for key, t in tensors.items() if key.startswith(prefixes))
    biases = [tensors[f"{name}.bias"] for name in state_keys if f"{name}.bias" in tensors]
    dense = [whole[keys.weight] for keys in state_keys.values()] + biases
    return {
        "packed_linear_bytes": packed_bytes,
        "fp16_linear_bytes": sum(2 * t.numel() for t in dense),
        "file_bytes": (directory / PACKED_FILE).stat().st_size,
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


def _model_from_config(path: Path) -> PreTrainedModel:
    """The architecture saved with the packed file: the class its config names (T5's, a classifier's), else a
    causal LM (files written before save_packed recorded the class)."""
    read_json(path / CONFIG_NAME, "load_packed")  # AutoConfig would blame a missing file on its model_type
    config = AutoConfig.from_pretrained(path)
    model_class = getattr(transformers, (config.architectures or [""])[0], None)
    return model_class(config) if model_class is not None else AutoModelForCausalLM.from_config(config)


def _pack_linear(model: nn.Module, name: str, in_features: int, out_features: int, bias: bool, tensors: dict) -> None:
    """Swap the ``nn.Linear`` ``name`` for a :class:`PackedBinaryLinear` (its tensors are loaded with the rest)."""
    module = model.get_submodule(name)
    if (module.in_features, module.out_features) != (in_features, out_features):
        raise ValueError(
            f"load_packed: the file's binary layer {name!r} is Linear({in_features}, {out_features}) but `model` "
            f"has Linear({module.in_features}, {module.out_features}): the packed file was saved from a different "
            "architecture"
        )
    packed = PackedBinaryLinear(in_features, out_features, bias, dtype=tensors[f"{name}.row_scale"].dtype)
    parent, _, attribute = name.rpartition(".")
    setattr(model.get_submodule(parent), attribute, packed)


def _pack_weight(model: nn.Module, name: str, module_name: str, tensor_name: str, layouts: dict, tensors: dict) -> str:
    """Replace the weight ``tensor_name`` of ``module_name`` by the file's bits, parametrized by
    :class:`PackedBinaryWeight`; the prefix of the state-dict keys it now has."""
    module = model.get_submodule(module_name)
    weight = getattr(module, tensor_name)
    layout = layouts[id(weight)]
    bits = tensors.pop(f"{name}.packed")
    maps = _maps(weight, layout.transposed).shape
    if tuple(bits.shape) != (*maps[:-1], (maps[-1] + 7) // 8):
        raise ValueError(
            f"load_packed: the file's binary weight {name!r} packs maps of shape {tuple(bits.shape[:-1])} x "
            f"{tensors[f'{name}.col_scale'].shape[-1]} but `model` has {tuple(maps)}: the packed file was saved "
            "from a different architecture"
        )
    scales = tensors.pop(f"{name}.row_scale"), tensors.pop(f"{name}.col_scale")
    delattr(module, tensor_name)
    module.register_buffer(tensor_name, bits.to(weight.device))
    packed = PackedBinaryWeight(*(scale.to(weight.device) for scale in scales), transposed=layout.transposed)
    parametrize.register_parametrization(module, tensor_name, packed, unsafe=True)
    return _parametrization_prefix(module_name, tensor_name)


def _install_packed(model: nn.Module, name: str, shape: list, layouts: dict, tensors: dict) -> str | None:
    """Give the binarized weight ``name`` its packed form in ``model``, taking from ``tensors`` what it loads itself;
    the prefix of the state-dict keys it then has that the file does not (a parametrized weight's)."""
    in_features, out_features, bias = shape
    for module_name, tensor_name in ((name, "weight"), name.rpartition(".")[::2]):
        try:
            module = model.get_submodule(module_name)
        except AttributeError:
            continue
        if isinstance(module, nn.Linear) and tensor_name == "weight":
            _pack_linear(model, name, in_features, out_features, bias, tensors)
            return None
        if isinstance(getattr(module, tensor_name, None), nn.Parameter):
            return _pack_weight(model, name, module_name, tensor_name, layouts, tensors)
    raise ValueError(
        f"load_packed: the file's binary layer {name!r} is Linear({in_features}, {out_features}) but `model` "
        "has None: the packed file was saved from a different architecture"
    )


def load_packed(path: str | Path, model: PreTrainedModel | None = None) -> PreTrainedModel:
    """Rebuild the binary model saved by :func:`save_packed`, in eval mode.

    Without ``model``, the architecture is built from the saved ``config.json``. A given
    ``model`` (full precision, same architecture: a PEFT model needs it) is converted in place; a model whose
    layers or shapes do not match the file is refused.
    """
    path = Path(path)
    tensors, metadata = _read(path)
    model = _model_from_config(path) if model is None else model
    layouts = {id(model.get_parameter(n)): layout for n, layout in model_layout(model, trainable_only=False).items()}
    layers = json.loads(metadata["binary_layers"])
    installed = [_install_packed(model, name, shape, layouts, tensors) for name, shape in layers.items()]
    parametrized = tuple(prefix for prefix in installed if prefix is not None)
    aliases = json.loads(metadata["aliases"])
    expected = {key for key in model.state_dict() if not key.startswith(parametrized)}
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
    model.load_state_dict(tensors | {key: tensors[owner] for key, owner in aliases.items()}, strict=False)
    return model.eval()
