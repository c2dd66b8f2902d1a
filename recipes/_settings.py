"""A library config in a recipe's parser, less the fields the recipe sets for each run.

A recipe that sweeps a config's field (portfolio's cost rates, bo_robust's seeds) parses a subclass of the
config that redeclares that field with :func:`set_per_run`. ``HfArgumentParser`` and ``hf-ext run --help``
leave such a field out, so the recipe's own list is the only way to set it (``cost=...`` is an unknown
setting, not a value silently replaced), and :func:`run_config` builds each run's config from the parsed
fields and the run's values. Every value is checked by the config's own ``__post_init__``, once.
"""

import dataclasses
from typing import Any, TypeVar

from trl import TrlParser

Config = TypeVar("Config")


def set_per_run(config_class: type, name: str, by: str) -> Any:
    """Field ``name`` of ``config_class``, redeclared for a subclass whose parser leaves it out (``init=False``).

    ``by`` says what sets it instead (shown as the field's help).
    """
    inherited = {field.name: field for field in dataclasses.fields(config_class)}[name]
    default = {"default": inherited.default}
    if inherited.default is dataclasses.MISSING:
        default = {"default_factory": inherited.default_factory}
    return dataclasses.field(**default, init=False, repr=False, metadata={"help": f"Set for each run by {by}."})


def one_string(config_class: type, name: str) -> Any:
    """Field ``name`` of ``config_class`` (a string or a list of strings) redeclared as one string, its default kept.

    ``HfArgumentParser`` reads a ``str | list[str]`` field as a list and drops a string default (the field would
    parse as None); as one string it keeps its default and takes any string the config accepts.
    """
    inherited = {field.name: field for field in dataclasses.fields(config_class)}[name]
    return dataclasses.field(default=inherited.default, metadata=inherited.metadata)


def shared_settings(settings) -> dict[str, Any]:
    """The fields of ``settings`` its parser sets: what a recipe reports and stores (no per-run field)."""
    return {field.name: getattr(settings, field.name) for field in dataclasses.fields(settings) if field.init}


def run_config(config_class: type[Config], settings, **per_run) -> Config:
    """A ``config_class`` with the fields it shares with ``settings``, and ``per_run`` for the others.

    Every field ``settings`` takes out of its parser (:func:`set_per_run`) that ``config_class`` has must be in
    ``per_run``: a run never falls back to the placeholder default.
    """
    own = {field.name for field in dataclasses.fields(config_class) if field.init}
    hidden = {field.name for field in dataclasses.fields(settings) if not field.init} & own
    if missing := sorted(hidden - per_run.keys()):
        raise TypeError(f"run_config: {type(settings).__name__} sets {missing} per run; pass them")
    shared = {name: value for name, value in shared_settings(settings).items() if name in own}
    return config_class(**shared | per_run)


def settings_parser(*dataclass_types: type) -> TrlParser:
    """The ``TrlParser`` of a recipe's settings, without argparse's prefix matching: ``k=3`` is an unknown
    setting, not a value silently given to ``ks``."""
    return TrlParser(dataclass_types, allow_abbrev=False)
