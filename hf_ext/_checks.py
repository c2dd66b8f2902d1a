"""The checks of plain numbers, which need no torch: :mod:`hf_ext._validation` hands them on with the rest, and
:mod:`hf_ext.executors`, which loads without torch, takes its count of workers from here."""

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


def check_count(owner: str, name: str, value, least: int = 0, most: float = math.inf) -> None:
    """Raise naming ``owner``'s argument ``name`` unless ``value`` is an integer in ``least..most``: ``TypeError`` for
    another type (a bool, a float, a string, None), ``ValueError`` out of range. For sizes, counts and seeds, where a
    float would fail deep inside numpy or torch and a None seed would draw what no rerun can reproduce."""
    check_finite(owner, name, value)
    allowed = f">= {least}" if most == math.inf else f"in {least}..{most}"
    message = f"{owner}: `{name}` must be an integer {allowed}, got {value!r}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(message)
    if not least <= value <= most:
        raise ValueError(message)
