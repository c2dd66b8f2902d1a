"""Binarize a model's weights in place: ``nn.Linear`` layers, GPT-2's ``Conv1D`` and mixture-of-experts matrices.

An ``nn.Linear`` becomes a :class:`ProgressiveBinaryLinear`. The other weights stay where they are and are
parametrized by :class:`ProgressiveBinaryWeight` (``torch.nn.utils.parametrize``), so that their module's own
forward uses the mixed weight: a ``Conv1D``'s ``(in, out)`` weight, each expert stack ``(experts, out, in)`` of a
mixture-of-experts block (binarized per expert, batched) and its router's ``(experts, hidden)`` matrix (a linear
map like any other). Embeddings, norms and biases stay full precision, the LM head is skipped by name
(``lm_head``, which SmolLM2 ties to the embeddings), and a PEFT model's adapters are never binarized: they train
in full precision on top of the binarized base, whose new scales stay frozen when the base is.
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils import parametrize

from .._validation import check_list
from ..models.layout import ParamLayout, is_conv1d, model_layout
from .binary_linear import ProgressiveBinaryLinear, ProgressiveBinaryWeight


def _matches(name: str, patterns: str | list[str] | tuple[str, ...]) -> bool:
    """PEFT's convention: a string is a full-match regex, a list holds module-name suffixes."""
    if isinstance(patterns, str):
        return re.fullmatch(patterns, name) is not None
    return any(name == pattern or name.endswith("." + pattern) for pattern in patterns)


def layer_name(module_name: str, tensor_name: str) -> str:
    """A binarized weight's name: its module's for a ``weight``, else the parameter's (``mlp.experts.down_proj``)."""
    return module_name if tensor_name == "weight" else f"{module_name}.{tensor_name}"


def _target_name(name: str) -> str:
    """The name ``target_modules``/``skip`` see: a PEFT-wrapped layer's (``q_proj``), not its ``base_layer``'s."""
    return name.replace(".base_layer", "")


@dataclass(frozen=True)
class _Binarizable:
    module: nn.Module
    tensor_name: str
    layout: ParamLayout


def _is_moe_matrix(module: nn.Module, param: torch.Tensor, layout: ParamLayout) -> bool:
    """An expert stack ``(experts, ...)`` or a router's ``(experts, hidden)`` weight: a module with ``num_experts``.

    A module with expert stacks keeps its other parameters (per-expert biases ``(experts, out)``) full precision.
    """
    experts = getattr(module, "num_experts", None)
    if not isinstance(experts, int) or param.shape[0] != experts:
        return False
    if layout.stacked:
        return True
    holds_stacks = any(p.dim() == 3 for p in module.parameters(recurse=False))
    return param.dim() == 2 and not holds_stacks


def _binarizable_weights(model: nn.Module) -> dict[str, _Binarizable]:
    """The full-precision weights :func:`binarize_model` can binarize, by name, PEFT adapters left out."""
    every = model_layout(model, trainable_only=False)
    layouts = {id(model.get_parameter(name)): layout for name, layout in every.items()}
    found = {}
    for module_name, module in model.named_modules():
        if isinstance(module, ProgressiveBinaryLinear):
            continue
        for tensor_name, param in module.named_parameters(recurse=False):
            layout = layouts[id(param)]
            if layout.adapter or not layout.is_matrix:
                continue
            linear = isinstance(module, nn.Linear) or is_conv1d(module)
            if (linear and tensor_name == "weight") or _is_moe_matrix(module, param, layout):
                found[layer_name(module_name, tensor_name)] = _Binarizable(module, tensor_name, layout)
    return found


def parametrized_weights(model: nn.Module) -> Iterator[tuple[str, str, int, nn.Module]]:
    """``(module name, tensor name, index, parametrization)`` of each ``torch.nn.utils.parametrize`` parametrization."""
    for module_name, module in model.named_modules():
        if parametrize.is_parametrized(module):
            for tensor_name, parametrizations in module.parametrizations.items():
                for index, parametrization in enumerate(parametrizations):
                    yield module_name, tensor_name, index, parametrization


def binary_layers(model: nn.Module) -> dict[str, ProgressiveBinaryLinear | ProgressiveBinaryWeight]:
    """The model's binarized weights by name: each ``ProgressiveBinaryLinear``, and each ``ProgressiveBinaryWeight``
    under the name of the weight it parametrizes (its module's name for a ``weight``)."""
    layers = {name: module for name, module in model.named_modules() if isinstance(module, ProgressiveBinaryLinear)}
    for module_name, tensor_name, _, parametrization in parametrized_weights(model):
        if isinstance(parametrization, ProgressiveBinaryWeight):
            layers[layer_name(module_name, tensor_name)] = parametrization
    return layers


def set_binarization_mix(model: nn.Module, mix: float) -> None:
    """Set ``lambda`` of every binarized weight (0: dense, 1: binary)."""
    if not 0.0 <= mix <= 1.0:
        raise ValueError(f"set_binarization_mix: `mix` must be in [0, 1], got {mix}")
    for layer in binary_layers(model).values():
        layer.mix.fill_(mix)


def _binarize(model: nn.Module, name: str, weight: _Binarizable, init: str, ste_clip: float | None) -> float:
    """Binarize one weight in place; its initial relative error."""
    if isinstance(weight.module, nn.Linear):
        layer = ProgressiveBinaryLinear.from_linear(weight.module, init=init, ste_clip=ste_clip)
        parent_name, _, attribute = name.rpartition(".")
        setattr(model.get_submodule(parent_name), attribute, layer)
        return layer.init_error
    param = getattr(weight.module, weight.tensor_name)
    binarizer = ProgressiveBinaryWeight(param, transposed=weight.layout.transposed, init=init, ste_clip=ste_clip)
    parametrize.register_parametrization(weight.module, weight.tensor_name, binarizer)
    return binarizer.init_error


def binarize_model(
    model: nn.Module,
    target_modules: str | list[str] | None = None,
    skip: str | list[str] | tuple[str, ...] = ("lm_head",),
    init: str = "svid",
    ste_clip: float | None = 1.0,
) -> dict[str, float]:
    """Binarize the targeted weights of ``model`` in place; returns each one's init error.

    Args:
        target_modules: which weights to binarize: a list of name suffixes (``["q_proj", "down_proj"]``; an
            expert stack is named by its parameter, ``mlp.experts.down_proj``; a PEFT-wrapped layer by its own
            name, not its ``base_layer``'s) or a full-match regex; ``None`` takes every ``nn.Linear``, ``Conv1D``
            and mixture-of-experts matrix (expert stacks and routers).
        skip: weights left full precision even when targeted, in the same two forms.
        init: ``"svid"`` (binary-aware: rank-1 decomposition of ``|W|``, per expert) or ``"mean_abs"``
            (one-shot baseline: per-row mean ``|W|``).
        ste_clip: the straight-through estimator's clipping (see :mod:`.binary_linear`).

    Returns:
        ``{name: ||W - B(W)||_F / ||W||_F}`` of the initial binary approximation (over all experts of a stack).
    """
    for name, patterns in (("target_modules", target_modules), ("skip", skip)):
        if patterns is not None and not isinstance(patterns, str):  # a regex string, or a list of name suffixes
            check_list("binarize_model", name, patterns)
    weights = _binarizable_weights(model)
    chosen = [
        name
        for name in weights
        if (target_modules is None or _matches(_target_name(name), target_modules))
        and not _matches(_target_name(name), skip)
    ]
    if not chosen:
        available = sorted({_target_name(name).rsplit(".", 1)[-1] for name in weights})
        raise ValueError(
            f"binarize_model: `target_modules`={target_modules!r} (minus `skip`={skip!r}) matches no "
            f"full-precision nn.Linear, Conv1D or mixture-of-experts matrix (PEFT adapters are never binarized); "
            f"the model's binarizable weights end in {available}"
        )
    with torch.no_grad():
        return {name: _binarize(model, name, weights[name], init, ste_clip) for name in chosen}
