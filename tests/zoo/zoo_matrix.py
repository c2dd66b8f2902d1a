"""The supported-models matrix: for each method, the check it must pass on each architecture, or its refusal.

Each method's zoo module (``zoo_check_<method>.py``) declares :class:`MethodCheck` entries. ``test_zoo.py`` runs
every (method, architecture) cell, and ``docs/models.md`` is rendered from the same entries
(``python tests/zoo/render_models_doc.py``), so the table the users read is the one the tests enforce.
"""

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from zoo_architectures import ARCHITECTURES


@dataclass(frozen=True)
class MethodCheck:
    """A method's zoo entry.

    ``check(architecture)`` builds the tiny model and asserts the method's equivalence on it (``proves`` says
    which, in one line for the docs). ``refused`` maps an architecture to the phrase its refusal must contain:
    ``check`` must then raise ``ValueError`` or ``TypeError`` with that phrase, before any work.
    """

    method: str
    entry_point: str
    proves: str
    check: Callable[[str], None]
    refused: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        unknown = sorted(set(self.refused) - set(ARCHITECTURES))
        if unknown:
            raise ValueError(f"{self.method}: `refused` names unknown architectures {unknown}")


def method_checks() -> list[MethodCheck]:
    """Every ``MethodCheck`` of the ``zoo_check_*.py`` modules beside this file, in file order."""
    checks = []
    for path in sorted(Path(__file__).parent.glob("zoo_check_*.py")):
        checks.extend(importlib.import_module(path.stem).CHECKS)
    return checks


def cells() -> list[tuple[MethodCheck, str]]:
    return [(entry, architecture) for entry in method_checks() for architecture in ARCHITECTURES]
