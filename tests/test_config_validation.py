"""Every config, optimizer and callback of hf_ext refuses a NaN or infinite number by field name, at construction.

The configs are collected, not listed: every dataclass named ``*Config``/``*Arguments`` exported by an hf_ext
sub-package and every recipe's ``*Arguments`` class, so a new config is covered without editing this file. Fields
(and keyword arguments) are numeric when their annotation holds ``int``/``float``, alone, optional or in a list.
A field whose help says what ``inf`` means there may take ``inf``; NaN is refused everywhere.
"""

import collections.abc
import dataclasses
import importlib
import inspect
import math
import pkgutil
import re
import types
import typing

import pytest
import torch
from datasets import Dataset
from torch import nn
from transformers import TrainerCallback, TrainingArguments
from trl import GRPOConfig

import hf_ext
import hf_ext.recipes
from hf_ext.optim import (
    NGN,
    SPS,
    BatchSchedule,
    DecentralizedMetricsCallback,
    DecentralizedSGD,
    GradientSmoothing,
    Scion,
    ShardedMuon,
    SymmetryCurvature,
    Topology,
)
from hf_ext.plasticity import PlasticityCallback
from hf_ext.quant import (
    ProgressiveBinarizationCallback,
    ProgressiveBinaryLinear,
    ProgressiveBinaryWeight,
    binarize_model,
)
from hf_ext.rl import UpdateSparsityCallback, grpo_preset
from hf_ext.zo import MeZOConfig, ZOOptimizer, ZOPerturbation

NAN, INF = float("nan"), float("inf")
# Values for fields that have no default (the recipes' required arguments), by field name.
REQUIRED_VALUES = {"policy": "tiny"}
CPU_TRAINING_ARGUMENTS = {"use_cpu": True, "bf16": False, "report_to": "none"}
INF_DOCUMENTED = re.compile(r"\binf(inite|inity)?\b", re.IGNORECASE)


def _numeric_kind(annotation) -> str | None:
    """'scalar' for int/float (possibly optional), 'sequence' for a list/tuple/Sequence of them, else None."""
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    for arg in typing.get_args(annotation) if union else (annotation,):
        if arg in (int, float):
            return "scalar"
        is_sequence = typing.get_origin(arg) in (list, tuple, collections.abc.Sequence)
        if is_sequence and {int, float} & set(typing.get_args(arg)):
            return "sequence"
    return None


def _exported(predicate) -> dict[str, object]:
    """Public names of every hf_ext sub-package (and every recipe module) whose object satisfies ``predicate``."""
    infos = [
        *pkgutil.walk_packages(hf_ext.__path__, "hf_ext."),
        *pkgutil.iter_modules(hf_ext.recipes.__path__, "hf_ext.recipes."),  # installed from recipes/
    ]
    modules = [importlib.import_module(info.name) for info in infos]
    found = {}
    for module in modules:
        names = getattr(module, "__all__", None)
        if module.__name__.startswith("hf_ext.recipes."):
            names = [name for name, obj in vars(module).items() if getattr(obj, "__module__", "") == module.__name__]
        for name in names or ():
            obj = getattr(module, name)
            if predicate(name, obj):
                found[name] = obj
    return found


def _is_config(name, obj) -> bool:
    return isinstance(obj, type) and dataclasses.is_dataclass(obj) and name.endswith(("Config", "Arguments"))


CONFIGS = _exported(_is_config)


def _build_config(cls):
    def build(**fields):
        base = CPU_TRAINING_ARGUMENTS if issubclass(cls, TrainingArguments) else {}
        required = {
            f.name: REQUIRED_VALUES[f.name]
            for f in dataclasses.fields(cls)
            if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        }
        return cls(**base | required | fields)

    return build


def _sgd_preset(**overrides):
    return grpo_preset("sgd", **CPU_TRAINING_ARGUMENTS | overrides)


# name -> (the dataclass whose fields are set, a function building it from fields)
CONFIG_BUILDERS = {name: (cls, _build_config(cls)) for name, cls in CONFIGS.items()} | {
    "grpo_preset": (GRPOConfig, _sgd_preset)
}


def _config_cases():
    for name, (cls, _) in CONFIG_BUILDERS.items():
        # transformers' PreTrainedConfig annotates `dtype` as "torch.dtype" without importing torch at run time
        hints = typing.get_type_hints(cls, localns={"torch": torch})
        for field in dataclasses.fields(cls):
            kind = _numeric_kind(hints[field.name]) if field.init else None
            if kind:
                allows_inf = bool(INF_DOCUMENTED.search(field.metadata.get("help", "")))
                yield pytest.param(name, field.name, kind, allows_inf, id=f"{name}.{field.name}")


def _values(kind: str, allows_inf: bool) -> list:
    numbers = [NAN] if allows_inf else [NAN, INF, -INF]
    return [number if kind == "scalar" else [number] for number in numbers]


def _refusal(name: str) -> str:
    return rf"`{name}` must be a (finite number|number \(inf allowed)"


def test_configs_are_collected_from_every_sub_package_and_recipe():
    expected = {"AGZOConfig", "RegularizedDPOConfig", "RegularizedSimPOConfig", "LogitDistillationConfig"}
    assert expected <= CONFIGS.keys()
    assert {"AGZOFinetuneArguments", "PreferenceRecipeArguments", "TokenShiftArguments"} <= CONFIGS.keys()


@pytest.mark.parametrize("name", sorted(CONFIG_BUILDERS))
def test_defaults_are_accepted(name):
    config_class, build = CONFIG_BUILDERS[name]
    assert isinstance(build(), config_class)


@pytest.mark.parametrize(("name", "field", "kind", "allows_inf"), list(_config_cases()))
def test_config_refuses_a_non_finite_number_by_field_name(name, field, kind, allows_inf):
    _, build = CONFIG_BUILDERS[name]
    for value in _values(kind, allows_inf):
        with pytest.raises(ValueError, match=_refusal(field)):
            build(**{field: value})


def _own_scalar_cases():
    """Fields our own config classes declare as a bool, an int or a float (alone or optional)."""
    for name, cls in CONFIGS.items():
        hints = typing.get_type_hints(cls, localns={"torch": torch})
        own = {
            n
            for base in cls.__mro__
            if base.__module__.startswith("hf_ext")
            for n in vars(base).get("__annotations__", {})
        }
        for field in dataclasses.fields(cls):
            union = typing.get_origin(hints[field.name]) in (typing.Union, types.UnionType)
            kinds = set(typing.get_args(hints[field.name]) if union else (hints[field.name],)) - {type(None)}
            if field.init and field.name in own and kinds in ({bool}, {int}, {float}, {int, float}):
                wrong = {"bool": "no", "int": 2.5}.get(next(iter(kinds)).__name__ if len(kinds) == 1 else "float", "1")
                yield pytest.param(name, field.name, wrong, id=f"{name}.{field.name}")


@pytest.mark.parametrize(("name", "field", "wrong"), list(_own_scalar_cases()))
def test_config_refuses_a_value_of_another_type_by_field_name(name, field, wrong):
    """Issue 72: a string in a number's field failed in a comparison naming nothing (``'<' not supported between
    instances of 'str' and 'int'``), and ``"no"`` in a bool's field or 2.5 in an integer's was taken."""
    _, build = CONFIG_BUILDERS[name]
    with pytest.raises(TypeError, match=rf"{name}: `{field}` must be (True or False|an integer|a number)"):
        build(**{field: wrong})
    with pytest.raises(TypeError, match=rf"{name}: `{field}` must be"):
        build(**{field: "1"})


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_field_a_config_declares_has_help(name):
    """The config rule: our own fields carry ``metadata={"help": ...}`` for HfArgumentParser/TrlParser."""
    cls = CONFIGS[name]
    own = {
        field_name
        for base in cls.__mro__
        if base.__module__.startswith("hf_ext")
        for field_name in vars(base).get("__annotations__", {})
    }
    fields = {field.name: field for field in dataclasses.fields(cls)}
    undocumented = sorted(n for n in own & fields.keys() if not fields[n].metadata.get("help"))
    assert not undocumented


def _smoothed(**kwargs):
    model = nn.Module()
    model.layers = nn.ModuleList(nn.Linear(2, 2) for _ in range(3))
    return GradientSmoothing(torch.optim.SGD(model.parameters(), lr=0.1), model, **kwargs)


def _plasticity(**kwargs):
    probes = Dataset.from_dict({"input_ids": [[1, 2]] * 4, "label": [0, 1, 0, 1]})
    return PlasticityCallback(probes, **kwargs)


# Optimizers, callbacks and module/model converters, built from their keyword arguments.
KWARG_BUILDERS = {
    "DecentralizedMetricsCallback": (DecentralizedMetricsCallback, DecentralizedMetricsCallback),
    "DecentralizedSGD": (
        DecentralizedSGD,
        lambda **kwargs: DecentralizedSGD(torch.optim.SGD(nn.Linear(2, 2).parameters()), **kwargs),
    ),
    "GradientSmoothing": (GradientSmoothing, _smoothed),
    "NGN": (NGN, lambda **kwargs: NGN([nn.Parameter(torch.zeros(2))], **kwargs)),
    "SPS": (SPS, lambda **kwargs: SPS([nn.Parameter(torch.zeros(2))], **kwargs)),
    "PlasticityCallback": (PlasticityCallback, _plasticity),
    "ProgressiveBinarizationCallback": (ProgressiveBinarizationCallback, ProgressiveBinarizationCallback),
    "ProgressiveBinaryLinear": (ProgressiveBinaryLinear, lambda **kwargs: ProgressiveBinaryLinear(4, 3, **kwargs)),
    "ProgressiveBinaryWeight": (
        ProgressiveBinaryWeight,
        lambda **kwargs: ProgressiveBinaryWeight(torch.ones(3, 4), **kwargs),
    ),
    "Scion": (Scion, lambda **kwargs: Scion([nn.Parameter(torch.ones(3, 2))], **kwargs)),
    "ShardedMuon": (ShardedMuon, lambda **kwargs: ShardedMuon([nn.Parameter(torch.ones(3, 2))], **kwargs)),
    "SymmetryCurvature": (
        SymmetryCurvature,
        lambda **kwargs: SymmetryCurvature([nn.Parameter(torch.ones(3, 2))], **kwargs),
    ),
    "UpdateSparsityCallback": (UpdateSparsityCallback, UpdateSparsityCallback),
    "binarize_model": (binarize_model, lambda **kwargs: binarize_model(nn.Sequential(nn.Linear(4, 3)), **kwargs)),
    "ZOOptimizer": (
        ZOOptimizer,
        lambda **kwargs: ZOOptimizer(ZOPerturbation(nn.Sequential(nn.Linear(2, 2)), MeZOConfig()), **kwargs),
    ),
}


def _numeric_keywords(target) -> dict[str, str]:
    """Keyword arguments (those with a default) whose annotation is numeric, with their kind."""
    function = target.__init__ if isinstance(target, type) else target
    hints = typing.get_type_hints(function)
    return {
        name: kind
        for name, parameter in inspect.signature(function).parameters.items()
        if parameter.default is not inspect.Parameter.empty and (kind := _numeric_kind(hints.get(name)))
    }


def test_every_exported_optimizer_and_callback_with_numeric_arguments_is_checked():
    def takes_numbers(name, obj):
        is_kind = isinstance(obj, type) and issubclass(obj, TrainerCallback | torch.optim.Optimizer)
        return is_kind and bool(_numeric_keywords(obj))

    assert set(_exported(takes_numbers)) <= KWARG_BUILDERS.keys()


@pytest.mark.parametrize("name", sorted(KWARG_BUILDERS))
def test_default_keyword_arguments_are_accepted(name):
    """The NaN checks must not refuse the defaults: building with them raises nothing."""
    _, build = KWARG_BUILDERS[name]
    assert build() is not None


@pytest.mark.parametrize(
    ("name", "keyword", "kind"),
    [
        pytest.param(name, keyword, kind, id=f"{name}.{keyword}")
        for name, (target, _) in KWARG_BUILDERS.items()
        for keyword, kind in _numeric_keywords(target).items()
    ],
)
def test_keyword_argument_refuses_a_non_finite_number_by_name(name, keyword, kind):
    _, build = KWARG_BUILDERS[name]
    for value in _values(kind, allows_inf=False):
        with pytest.raises(ValueError, match=_refusal(keyword)):
            build(**{keyword: value})


def _typed_keywords(target) -> dict[str, str]:
    """Keyword arguments (those with a default) annotated as a number or a bool, alone or optional, with a value
    of another type for each: a string for a number, a string that reads as false for a bool."""
    function = target.__init__ if isinstance(target, type) else target
    hints = typing.get_type_hints(function)
    wrong = {}
    for name, parameter in inspect.signature(function).parameters.items():
        annotation = hints.get(name)
        union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
        kinds = set(typing.get_args(annotation) if union else (annotation,)) - {type(None)}
        if parameter.default is not inspect.Parameter.empty and kinds and kinds <= {bool, int, float}:
            wrong[name] = "no" if kinds == {bool} else "1"
    return wrong


@pytest.mark.parametrize(
    ("name", "keyword", "wrong"),
    [
        pytest.param(name, keyword, wrong, id=f"{name}.{keyword}")
        for name, (target, _) in KWARG_BUILDERS.items()
        if isinstance(target, type) and issubclass(target, torch.optim.Optimizer)
        for keyword, wrong in _typed_keywords(target).items()
    ],
)
def test_an_optimizer_refuses_a_keyword_argument_of_another_type_by_name(name, keyword, wrong):
    """Issue 72: a string in a number's place failed in a comparison naming nothing (``'<' not supported``) or
    inside torch, and ``"no"`` in a bool's place was taken as true."""
    _, build = KWARG_BUILDERS[name]
    with pytest.raises(TypeError, match=rf"{name}: `{keyword}` must be"):
        build(**{keyword: wrong})


def _params():
    return [nn.Parameter(torch.ones(3, 2))]


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda: ShardedMuon(_params(), eps=-1.0), ValueError, "ShardedMuon: `eps` must be >= 0, got -1.0"),
        (lambda: ShardedMuon(_params(), lr=-1.0), ValueError, "ShardedMuon: `lr` must be >= 0, got -1.0"),
        (lambda: ShardedMuon(_params(), ns_coefficients=(1.0,)), TypeError, "`ns_coefficients` must be three numbers"),
        (lambda: ShardedMuon(_params(), ns_steps=0), ValueError, "ShardedMuon: `ns_steps` must be an integer >= 1"),
        (
            lambda: ShardedMuon(_params(), adjust_lr_fn="bogus"),
            ValueError,
            r"ShardedMuon: `adjust_lr_fn` must be one of \[None, 'original', 'match_rms_adamw'\], got 'bogus'",
        ),
        (
            lambda: SymmetryCurvature(_params(), betas=0.9),
            TypeError,
            r"`betas` must be two numbers in \[0, 1\), got 0.9",
        ),
        (lambda: _smoothed(weights="ab"), TypeError, "GradientSmoothing: `weights` must be a sequence of numbers"),
        (lambda: _smoothed(blocks=3), TypeError, "GradientSmoothing: `blocks` must be a submodule's name, a sequence"),
        (lambda: _smoothed(weights=["a"]), TypeError, "GradientSmoothing: `weights` must be a number, got 'a'"),
        (lambda: BatchSchedule(5, 8, 16), TypeError, "BatchSchedule: `budgets` must be a list of token counts, got 5"),
        (lambda: BatchSchedule(["1e6"], 8, 16), TypeError, "BatchSchedule: `budgets` must be a number, got '1e6'"),
        (lambda: BatchSchedule([10**6], 8, 16, max_seq_len=INF), TypeError, "`max_seq_len` must be an integer or None"),
        (
            lambda: BatchSchedule([10**6], True, 16),
            TypeError,
            "BatchSchedule: `batch_size` must be an integer, got True",
        ),
        (lambda: Topology("ring", True), ValueError, "Topology: `world_size` must be a positive integer, got True"),
    ],
)
def test_the_optimizers_structured_arguments_are_refused_by_name(build, error, message):
    """Issue 72: each of these was taken (``eps=-1``, ``ns_coefficients=(1.0,)``, ``max_seq_len=inf``,
    ``batch_size=True``, ``world_size=True``) or failed naming nothing (``'int' object is not iterable``, torch's
    ``Adjust learning rate function bogus is not supported``)."""
    with pytest.raises(error, match=message):
        build()


def test_nan_regularizer_coefficient_is_refused_as_reported():
    """Issue 16: ``RegularizedDPOConfig(regularizer_coef=nan)`` was accepted and trained NaN weights."""
    cls, build = CONFIG_BUILDERS["RegularizedDPOConfig"]
    with pytest.raises(ValueError, match="RegularizedDPOConfig: `regularizer_coef` must be a finite number"):
        build(regularizer_coef=math.nan)
