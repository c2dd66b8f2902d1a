"""Swap a model's ``nn.Linear`` layers for :class:`ProgressiveBinaryLinear` in place.

Embeddings, norms and the LM head stay full precision by default: they are not ``nn.Linear``
(embeddings, norms) or are skipped by name (``lm_head``, which SmolLM2 ties to the embeddings).
"""

import re

import torch
from torch import nn

from .binary_linear import ProgressiveBinaryLinear


def _matches(name: str, patterns: str | list[str] | tuple[str, ...]) -> bool:
    """PEFT's convention: a string is a full-match regex, a list holds module-name suffixes."""
    if isinstance(patterns, str):
        return re.fullmatch(patterns, name) is not None
    return any(name == pattern or name.endswith("." + pattern) for pattern in patterns)


def binary_layers(model: nn.Module) -> dict[str, ProgressiveBinaryLinear]:
    """The model's binarized layers by module name."""
    return {name: module for name, module in model.named_modules() if isinstance(module, ProgressiveBinaryLinear)}


def set_binarization_mix(model: nn.Module, mix: float) -> None:
    """Set ``lambda`` of every binarized layer (0: dense, 1: binary)."""
    if not 0.0 <= mix <= 1.0:
        raise ValueError(f"set_binarization_mix: `mix` must be in [0, 1], got {mix}")
    for layer in binary_layers(model).values():
        layer.mix.fill_(mix)


def binarize_model(
    model: nn.Module,
    target_modules: str | list[str] | None = None,
    skip: str | list[str] | tuple[str, ...] = ("lm_head",),
    init: str = "svid",
    ste_clip: float | None = 1.0,
) -> dict[str, float]:
    """Replace the targeted ``nn.Linear`` layers of ``model`` in place; returns each layer's init error.

    Args:
        target_modules: which linear layers to binarize: a list of module-name suffixes
            (``["q_proj", "down_proj"]``) or a full-match regex; ``None`` takes every ``nn.Linear``.
        skip: layers left full precision even when targeted, in the same two forms.
        init: ``"svid"`` (binary-aware: rank-1 decomposition of ``|W|``) or ``"mean_abs"``
            (one-shot baseline: per-row mean ``|W|``).
        ste_clip: the straight-through estimator's clipping (see :mod:`.binary_linear`).

    Returns:
        ``{module name: ||W - B(W)||_F / ||W||_F}`` of the initial binary approximation.
    """
    linears = {
        name: module
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and not isinstance(module, ProgressiveBinaryLinear)
    }
    chosen = [
        name
        for name in linears
        if (target_modules is None or _matches(name, target_modules)) and not _matches(name, skip)
    ]
    if not chosen:
        available = sorted({name.rsplit(".", 1)[-1] for name in linears})
        raise ValueError(
            f"binarize_model: `target_modules`={target_modules!r} (minus `skip`={skip!r}) matches no "
            f"full-precision nn.Linear; the model's linear layers end in {available}"
        )
    errors = {}
    with torch.no_grad():
        for name in chosen:
            parent_name, _, attribute = name.rpartition(".")
            layer = ProgressiveBinaryLinear.from_linear(linears[name], init=init, ste_clip=ste_clip)
            setattr(model.get_submodule(parent_name), attribute, layer)
            errors[name] = layer.init_error
    return errors
