"""A library config in a recipe's parser, less the fields the recipe sets for each run.

A recipe that sweeps a config's field (portfolio's cost rates, bo_robust's seeds) parses a subclass of the
config that redeclares that field with :func:`set_per_run`. ``HfArgumentParser`` and ``hf-ext run --help``
leave such a field out, so the recipe's own list is the only way to set it (``cost=...`` is an unknown
setting, not a value silently replaced), and :func:`run_config` builds each run's config from the parsed
fields and the run's values. Every value is checked by the config's own ``__post_init__``, once.

The parser also keeps what it read: each ``TrainingArguments`` it returns carries the run's settings (every field of
every dataclass, as the defaults, the config file and the command line set it; :func:`recipe_settings`), which
``run_config`` hands on to each run's arguments, so that the shared training code can store them with the run's
checkpoints and refuse to resume under others (``hf_ext.recipes._training``).
"""

import argparse
import dataclasses
import inspect
import itertools
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from transformers import TrainingArguments
from trl import TrlParser

from hf_ext._settings import as_json
from hf_ext._validation import check_training_arguments
from hf_ext.recipes import recipes_dir

Config = TypeVar("Config")


def _declared(config_class: type, name: str) -> tuple[dataclasses.Field, dict[str, Any]]:
    """Field ``name`` of ``config_class``, and its default as ``dataclasses.field``'s keyword argument."""
    inherited = {field.name: field for field in dataclasses.fields(config_class)}[name]
    if inherited.default is dataclasses.MISSING:
        return inherited, {"default_factory": inherited.default_factory}
    return inherited, {"default": inherited.default}


def set_per_run(config_class: type, name: str, by: str) -> Any:
    """Field ``name`` of ``config_class``, redeclared for a subclass whose parser leaves it out (``init=False``).

    ``by`` says what sets it instead (shown as the field's help).
    """
    _, default = _declared(config_class, name)
    return dataclasses.field(**default, init=False, repr=False, metadata={"help": f"Set for each run by {by}."})


def library_field(config_class: type, name: str) -> Any:
    """Field ``name`` of the library's ``config_class`` as declared there (its default and help), for a recipe's
    dataclass that composes the library's setting instead of declaring its own; ``config_class`` checks it.

    Also how a subclass retypes a field for the parser: ``HfArgumentParser`` reads a ``str | list[str]`` field as a
    list and drops a string default, so agzo_finetune's ``target_modules: str = library_field(...)`` keeps both.
    """
    inherited, default = _declared(config_class, name)
    return dataclasses.field(**default, metadata=inherited.metadata)


def estimator_field(estimator_class: type, name: str) -> Any:
    """Parameter ``name`` of a scikit-learn-style estimator as a recipe's setting: its default from the estimator's
    ``__init__``, its help from the ``Parameters`` section of its docstring (numpydoc); the estimator checks it."""
    default = inspect.signature(estimator_class).parameters[name].default
    lines = inspect.getdoc(estimator_class).splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith(f"{name} :"))
    description = itertools.takewhile(lambda line: line.startswith(" "), lines[start + 1 :])
    return dataclasses.field(default=default, metadata={"help": " ".join(line.strip() for line in description)})


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
    config = config_class(**shared | per_run)
    if (recorded := recipe_settings(settings)) is not None:
        vars(config)[_SETTINGS_ATTRIBUTE] = recorded
    return config


# Where a parsed TrainingArguments keeps the run's settings: an attribute, not a field, so that no parser,
# config file or `--help` sees it; it travels with the object (pickled to a worker process, or by run_config).
_SETTINGS_ATTRIBUTE = "_hf_ext_recipe_settings"


def recipe_settings(config) -> dict[str, Any] | None:
    """The settings of the recipe run that ``config`` (its ``TrainingArguments``) was parsed for, as JSON values;
    None for arguments built outside a recipe's parser."""
    return vars(config).get(_SETTINGS_ATTRIBUTE)


class RecipeParser(TrlParser):
    """The ``TrlParser`` of a recipe's settings. Without argparse's prefix matching (``k=3`` is an unknown setting,
    not a value silently given to ``ks``); each ``TrainingArguments`` it returns carries the settings it read
    (:func:`recipe_settings`). ``check``, given the parsed dataclasses in order, refuses settings of two of them
    that contradict each other (each dataclass checks its own fields)."""

    def __init__(self, dataclass_types: Iterable[type], check: Callable[..., None] | None = None):
        super().__init__(dataclass_types, allow_abbrev=False)
        self._read: dict[str, Any] = {}
        self._check = check

    def parse_known_args(self, args=None, namespace=None) -> tuple[argparse.Namespace, list[str]]:
        parsed, remaining = super().parse_known_args(args, namespace)
        self._read = as_json(vars(parsed))  # every field: its default, the config file's value or the command line's
        return parsed, remaining

    def parse_args_and_config(self, args: Iterable[str] | None = None, *options, **keywords) -> tuple:
        parsed = super().parse_args_and_config(args, *options, **keywords)
        if self._check is not None:
            self._check(*(config for config in parsed if dataclasses.is_dataclass(config)))
        for config in parsed:
            if isinstance(config, TrainingArguments):
                check_training_arguments(config)
                vars(config)[_SETTINGS_ATTRIBUTE] = self._read
                from hf_ext.recipes._training import check_resume  # which imports this module (and the Trainer)

                check_resume(config)
        return parsed


def settings_parser(*dataclass_types: type, check: Callable[..., None] | None = None) -> RecipeParser:
    """The parser of a recipe's settings (a :class:`RecipeParser`; ``check`` refuses a contradiction between them)."""
    return RecipeParser(dataclass_types, check)


def given_settings(argv: list[str] | None = None) -> set[str]:
    """The settings a user wrote: the keys in ``argv`` (``--key value``, ``--key=value``) and those of a config file
    of their own (``--config FILE``), not of a shipped one (``recipes/configs/``), nor the defaults.

    A setting the user did not write may follow how the run is launched; one they wrote is refused if it cannot.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    keys = {item[2:].partition("=")[0] for item in argv if item.startswith("--")}
    if "--config" in argv:
        config = Path(argv[argv.index("--config") + 1]).resolve()
        if config.parent != recipes_dir() / "configs":
            keys |= set(yaml.safe_load(config.read_text()) or {})
    return keys - {"config"}
