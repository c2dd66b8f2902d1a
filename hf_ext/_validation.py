"""Checks shared by every config and trainer: a NaN or infinite number is refused by name.

A NaN coefficient passes every ``x < 0`` test and then turns the weights into NaN while the
logged loss still reads finite, so each config runs :func:`check_finite_fields` first, and the
gradient trainers run :func:`check_finite_loss` on each training loss before its backward.
"""

import dataclasses
import math
import numbers
from collections.abc import Iterable


def _numbers(value) -> Iterable[float]:
    if isinstance(value, bool):
        return ()
    if isinstance(value, int | float):
        return (value,)
    if isinstance(value, list | tuple):
        return [number for item in value for number in _numbers(item)]
    return ()


def check_finite(owner: str, name: str, value, allow_infinite: bool = False) -> None:
    """Raise ``ValueError`` naming ``owner``'s field ``name`` if ``value`` (a number or a list of them) is NaN,
    or infinite unless ``allow_infinite``."""
    for number in _numbers(value):
        if math.isnan(number) or (math.isinf(number) and not allow_infinite):
            allowed = "a number (inf allowed, not NaN)" if allow_infinite else "a finite number"
            raise ValueError(f"{owner}: `{name}` must be {allowed}, got {value!r}")


def check_number(owner: str, name: str, value, allow_none: bool = False) -> None:
    """Raise ``TypeError`` naming ``owner``'s field ``name`` unless ``value`` is a real number (or ``None`` where
    ``allow_none``): a string read from a config would otherwise fail inside a comparison, naming nothing."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        allowed = "a number or None" if allow_none else "a number"
        raise TypeError(f"{owner}: `{name}` must be {allowed}, got {value!r} ({type(value).__name__})")


def check_finite_fields(config, allow_infinite: Iterable[str] = ()) -> None:
    """Apply :func:`check_finite` to every field of the dataclass instance ``config``.

    ``allow_infinite`` names the fields where ``inf`` means something (an unlimited budget, say).
    """
    owner = type(config).__name__
    allow_infinite = set(allow_infinite)
    for field in dataclasses.fields(config):
        check_finite(owner, field.name, getattr(config, field.name), field.name in allow_infinite)


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
