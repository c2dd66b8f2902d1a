"""Recipes: accelerate-launchable training scripts with their YAML configs.

Every recipe module defines ``main(argv)`` and ``parser(argv)``, the ``TrlParser`` that ``main``
parses its settings with, so that ``hf-ext`` can check a run's settings and print a recipe's
``--help`` without running it. Importing a recipe pulls in torch and transformers (seconds);
the helpers that only list recipes read the scripts' docstrings instead.
"""

import ast
import importlib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing TRL takes seconds; `hf-ext list` must not pay for it
    from trl import TrlParser


def recipes_dir() -> Path:
    """The folder of the recipe scripts, with ``configs/`` (their YAML) and ``accelerate/`` (launch configs)."""
    return Path(__file__).resolve().parent


def recipe_docstring(name: str) -> str:
    """Recipe ``name``'s module docstring, read without importing the script."""
    script = recipes_dir() / f"{name}.py"
    return ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""


def available_recipes() -> dict[str, str]:
    """Recipe name -> first line of its docstring (fast: no recipe is imported)."""
    recipes = {}
    for script in sorted(recipes_dir().glob("*.py")):
        if not script.name.startswith("_"):
            doc = recipe_docstring(script.stem).strip()
            recipes[script.stem] = doc.splitlines()[0] if doc else ""
    return recipes


def shipped_configs() -> list[str]:
    """Names of the YAML configs in ``configs/`` (a recipe's own config has the recipe's name)."""
    return sorted(path.stem for path in (recipes_dir() / "configs").glob("*.yaml"))


def shipped_config(name: str) -> Path:
    """The path of shipped config ``name`` (``configs/NAME.yaml``)."""
    if name not in shipped_configs():
        raise ValueError(f"no shipped config {name!r}; shipped: {shipped_configs()}")
    return recipes_dir() / "configs" / f"{name}.yaml"


def recipe_script(name: str) -> Path:
    """The path of recipe ``name``'s script, the file ``accelerate launch`` runs."""
    if name not in available_recipes():
        raise ValueError(f"unknown recipe {name!r}; available: {sorted(available_recipes())}")
    return recipes_dir() / f"{name}.py"


def load_recipe(name: str) -> ModuleType:
    """Import recipe ``name`` as ``hf_ext.recipes.NAME`` (seconds: it imports the training stack)."""
    recipe_script(name)
    return importlib.import_module(f"{__name__}.{name}")


def recipe_parser(name: str, argv: list[str] | None = None) -> "TrlParser":
    """The parser recipe ``name`` reads ``argv`` (``--config FILE --key value ...``) with."""
    return load_recipe(name).parser(argv)
