"""Checks shared by every config and trainer: a NaN or infinite number is refused by name.

A NaN coefficient passes every ``x < 0`` test and then turns the weights into NaN while the
logged loss still reads finite, so each config runs :func:`check_finite_fields` first, and the
gradient trainers run :func:`check_finite_loss` on each training loss before its backward; an optimizer that
never sees the loss runs :func:`check_finite_gradients` before it changes a weight.
:func:`check_training_arguments` refuses what ``TrainingArguments`` takes and then misreads; :func:`check_counts` a
count (of rows, steps, runs) that is not a positive integer.
"""

import dataclasses
import functools
import math
import numbers
import types
import typing
from collections.abc import Iterable, Sequence

import torch
import torch.distributed as dist

from ._checks import check_count, check_finite
from ._sharded import local, sum_across


def check_number(owner: str, name: str, value, allow_none: bool = False) -> None:
    """Raise ``TypeError`` naming ``owner``'s field ``name`` unless ``value`` is a real number (or ``None`` where
    ``allow_none``): a string read from a config would otherwise fail inside a comparison, naming nothing."""
    check_field_type(owner, name, value, float, allow_none)


def check_finite_number(owner: str, name: str, value, allow_none: bool = False) -> None:
    """:func:`check_number`, then :func:`check_finite`: a finite real number (or ``None`` where ``allow_none``), for a
    keyword argument that a config's annotations do not cover. A one-element tensor is read as its number: torch's
    optimizers take a tensor ``lr``."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    check_number(owner, name, value, allow_none)
    check_finite(owner, name, value)


def check_list(owner: str, name: str, value, kind: type | None = None) -> None:
    """Raise ``TypeError`` naming ``owner``'s field ``name`` unless ``value`` is a list (or tuple), each item of
    ``kind`` (``bool``, ``int`` or ``float``, as :func:`check_field_type`) where given: a scalar for a list fails as
    "not iterable", naming nothing, and ``1.0`` or ``True`` among integers passes an ``in`` test."""
    if not isinstance(value, list | tuple):
        kind_name = type(value).__name__
        raise TypeError(f"{owner}: `{name}` must be a list ([{value!r}] for one), got {value!r} ({kind_name})")
    if kind is not None:
        for index, item in enumerate(value):
            check_field_type(owner, f"{name}[{index}]", item, kind)


def check_params(owner: str, params) -> list:
    """``params`` (an optimizer's tensors or parameter groups) as a list, refused naming ``owner`` when it holds
    none: torch's "optimizer got an empty parameter list" names neither. A generator is read here, once; a lone
    tensor is left for torch to refuse."""
    if isinstance(params, torch.Tensor):
        return params
    params = list(params)
    if not params:
        raise ValueError(
            f"{owner}: `params` is empty; pass the tensors to optimize (model.parameters()) or parameter groups"
        )
    return params


def check_finite_fields(config, allow_infinite: Iterable[str] = ()) -> None:
    """Apply :func:`check_finite` to every field of the dataclass instance ``config``, then :func:`check_field_type`
    to each field annotated as a number or a bool.

    ``allow_infinite`` names the fields where ``inf`` means something (an unlimited budget, say).
    """
    owner = type(config).__name__
    allow_infinite = set(allow_infinite)
    values = {field.name: getattr(config, field.name) for field in dataclasses.fields(config)}
    for name, value in values.items():
        check_finite(owner, name, value, name in allow_infinite)
    check_settings_types(owner, type(config), values)


def check_settings_types(owner: str, cls: type, settings: dict) -> None:
    """:func:`check_field_type` of each of ``settings`` (keyword arguments of the dataclass ``cls``) that ``cls``
    annotates as a number or a bool; before building ``cls`` where its own ``__post_init__`` compares them first."""
    kinds = _scalar_field_kinds(cls)
    for name, value in settings.items():
        if name in kinds:
            check_field_type(owner, name, value, *kinds[name])


_ALLOWED = {bool: "True or False", int: "an integer", float: "a number"}


def check_field_type(owner: str, name: str, value, kind: type, allow_none: bool = False) -> None:
    """Raise ``TypeError`` naming ``owner``'s field ``name`` unless ``value`` is of ``kind`` (``bool``, ``int`` or
    ``float``, which takes any real number but a bool) or ``None`` where ``allow_none``: a string or a bool in a
    number's place would fail in a comparison naming nothing, or pass one (``"no"`` is true)."""
    if value is None and allow_none:
        return
    if kind is bool:
        ok = isinstance(value, bool)
    else:
        ok = isinstance(value, numbers.Integral if kind is int else numbers.Real) and not isinstance(value, bool)
    if not ok:
        allowed = _ALLOWED[kind] + (" or None" if allow_none else "")
        raise TypeError(f"{owner}: `{name}` must be {allowed}, got {value!r} ({type(value).__name__})")


@functools.cache
def _scalar_field_kinds(cls: type) -> dict[str, tuple[type, bool]]:
    """``{field: (kind, whether None is allowed)}`` for the fields of the dataclass ``cls`` annotated as a ``bool``,
    an ``int`` or a ``float`` (``int | float`` is a float), alone or optional; a class whose annotations cannot be
    resolved is skipped."""
    try:  # transformers' PreTrainedConfig annotates `dtype` as "torch.dtype" without importing torch at run time
        hints = typing.get_type_hints(cls, localns={"torch": torch})
    except Exception:
        return {}
    kinds = {}
    for name, annotation in hints.items():
        union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
        args = set(typing.get_args(annotation)) if union else {annotation}
        scalar = args - {type(None)}
        if scalar in ({bool}, {int}, {float}, {int, float}):
            kinds[name] = (float if float in scalar else scalar.pop(), type(None) in args)
    return kinds


def check_counts(config, names: Iterable[str]) -> None:
    """:func:`check_count` (at least 1) of each field of ``names``, naming ``config``'s class."""
    for name in names:
        check_count(type(config).__name__, name, getattr(config, name), least=1)


def check_finite_loss(owner: str, loss, step: int) -> None:
    """Raise ``FloatingPointError`` naming ``step`` if the training ``loss`` (a scalar tensor) is NaN or infinite.

    Call it before the backward: transformers' Trainer would log such a loss as the running mean of
    the finite ones (``logging_nan_inf_filter``) and still step on its NaN gradients.
    """
    value = float(loss.detach())
    if not math.isfinite(value):
        raise FloatingPointError(
            f"{owner}: the training loss is {value} at step {step}; stopped before its gradients reach the weights "
            "(look for NaN/inf inputs, or a learning rate or loss coefficient that is too large)"
        )


def check_finite_gradients(owner: str, param_groups: Sequence[dict], group: dist.ProcessGroup | None = None) -> None:
    """Raise ``FloatingPointError`` naming the first parameter of ``param_groups`` (an optimizer's) whose gradient
    holds NaN or inf; call it in ``step()`` before any weight or state changes.

    One fused reduction (each gradient's largest absolute entry, NaN or inf where one is) and one host sync per
    step, not one per parameter. Sharded gradients (FSDP2) are checked on this rank's shards and the verdicts
    summed over their process ``group`` (one ``all_reduce``), so that all ranks raise together.
    """
    located = [
        (g, i, p.grad) for g, pg in enumerate(param_groups) for i, p in enumerate(pg["params"]) if p.grad is not None
    ]
    if not located:
        return
    shards = [local(grad) for *_, grad in located]
    filled = [k for k, shard in enumerate(shards) if shard.numel()]  # an empty shard has no largest entry
    bad = torch.zeros(len(shards), device=shards[0].device)
    if filled:
        largest = torch.stack(torch._foreach_norm([shards[k] for k in filled], math.inf))
        bad[filled] = (~largest.isfinite()).to(bad.dtype)
    if not bool(sum_across(bad, group).any()):  # the one host sync
        return
    g, i, grad = located[int(bad.nonzero()[0])]
    names = param_groups[g].get("param_names")
    name = names[i] if names else f"param_groups[{g}]['params'][{i}] (shape {tuple(grad.shape)})"
    raise FloatingPointError(
        f"{owner}: the gradient of {name} holds NaN or inf; stopped before any weight changed (look for a NaN/inf "
        "loss or inputs, or a learning rate or loss scale that is too large)"
    )


def check_training_arguments(args) -> None:
    """Refuse what a ``TrainingArguments`` accepts and then misreads: a ``max_steps`` <= 0 other than -1 (read as
    unset, so the epochs are trained) and a negative ``learning_rate`` (refused by the optimizer once training
    starts, or by none)."""
    owner = type(args).__name__
    if args.max_steps != -1 and args.max_steps < 1:
        raise ValueError(
            f"{owner}: `max_steps` must be a number of steps >= 1, or -1 to train `num_train_epochs`, "
            f"got {args.max_steps}"
        )
    if not args.learning_rate >= 0:
        raise ValueError(f"{owner}: `learning_rate` must be >= 0, got {args.learning_rate}")
