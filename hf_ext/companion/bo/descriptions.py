"""What identifies an object in a run's stored settings, for the BO and LILO loops' resume checks.

An objective, adversary, factory, LLM backend or decision maker is stored as its type and the
fields it was built with, so that resuming with another one is refused by name
(``hf_ext._settings.check_and_store_settings``).
"""

from dataclasses import fields, is_dataclass
from typing import Any

from botorch.test_functions.base import BaseTestProblem


def describe(thing: Any) -> dict[str, Any]:
    """``thing``'s type and its init fields (a dataclass), ``negate`` and ``noise_std`` (a BoTorch test problem).

    The fields a dataclass names in its ``TRANSPORT_FIELDS`` class attribute (a timeout, a retry count) are left
    out: they change how an answer is fetched, not the answer, so a resume may change them.
    """
    if isinstance(thing, BaseTestProblem):
        return {"type": type(thing).__qualname__, "negate": thing.negate, "noise_std": thing.noise_std}
    if is_dataclass(thing):
        transport = getattr(thing, "TRANSPORT_FIELDS", ())
        return {"type": type(thing).__qualname__} | {
            f.name: getattr(thing, f.name) for f in fields(thing) if f.init and f.name not in transport
        }
    return {"type": getattr(thing, "__qualname__", type(thing).__qualname__)}
