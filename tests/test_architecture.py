"""The package map as import rules, read from the source with ``ast`` (CONTRIBUTING.md points here).

Every import counts, at any depth (inside functions too) and with relative imports resolved;
``recipes/`` is read as the package it installs as, ``hf_ext.recipes``. A second check keeps setup.cfg
honest: every third-party module the code imports belongs to a declared distribution.
"""

import ast
import configparser
import importlib.metadata
import re
import sys
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# Source folder -> the package it installs as. benchmarks/ and tests/ are scripts, never installed.
PACKAGES = {"hf_ext": "hf_ext", "recipes": "hf_ext.recipes"}
SCRIPT_FOLDERS = ("benchmarks", "tests")

# How each companion method is judged (harnesses, outside baselines, suite runners, statistics), apart from it:
# hf_ext.companion.evaluation.<the method's path>, e.g. hf_ext.companion.evaluation.es for hf_ext.companion.es.
EVALUATION = "hf_ext.companion.evaluation"
METHODS = (
    f"{EVALUATION}.*",  # each method's evaluation is a unit of that method (see _unit)
    "hf_ext.zo",
    "hf_ext.rl",
    "hf_ext.alignment",
    "hf_ext.quant",
    "hf_ext.plasticity",
    "hf_ext.optim.*",  # one unit per optimizer method: hf_ext.optim.scion, hf_ext.optim.loss_step, ...
    "hf_ext.companion.*",
)
# Packages that gather several methods: only their __init__ re-exports the methods' names, and no method imports them.
UMBRELLAS = ("hf_ext.optim",)
# What several optimizer methods share and imports none of them: their numerics.
SHARED = ("hf_ext.optim.shared",)
CORE = (
    "hf_ext.data",
    "hf_ext.models",
    "hf_ext.evaluation",
    "hf_ext.plotting",
    "hf_ext.executors",
    "hf_ext.distributed",
    "hf_ext._*",
    "hf_ext.kernels",
)


@dataclass(frozen=True)
class Rule:
    """``importers`` must not import ``forbidden`` (unless ``allowed``); patterns are dotted, ``*`` a wildcard.

    ``across_units``: only imports from one unit into another count, a unit being what the importer
    pattern names (one method package, one recipe). ``at_load``: only imports that run when the
    module loads count, followed through hf_ext's own modules. ``exempt``: importers left out.
    """

    name: str
    importers: tuple[str, ...]
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...] = ()
    across_units: bool = False
    at_load: bool = False
    exempt: tuple[str, ...] = ()  # importers the rule does not cover


RULES = (
    Rule(
        "a method package imports no other method package",
        METHODS,
        (*METHODS, *UMBRELLAS),
        allowed=SHARED,
        across_units=True,
    ),
    Rule(
        "no method, core module or CLI imports evaluation code (recipes, benchmarks and tests do)",
        importers=("hf_ext",),
        forbidden=(EVALUATION,),
        exempt=(EVALUATION, "hf_ext.recipes"),
    ),
    Rule("shared optimizer numerics import no optimizer method", SHARED, (*METHODS, *UMBRELLAS), allowed=SHARED),
    Rule("core imports no method package, recipe or CLI", CORE, (*METHODS, *UMBRELLAS, "hf_ext.recipes", "hf_ext.cli")),
    Rule(
        "kernels import nothing from hf_ext but hf_ext.kernels",
        importers=("hf_ext.kernels",),
        forbidden=("hf_ext",),
        allowed=("hf_ext.kernels",),
    ),
    Rule(
        "the companion loads without transformers, TRL or PEFT",
        importers=("hf_ext.companion",),
        forbidden=("transformers", "trl", "peft"),
        at_load=True,
    ),
    Rule(
        "a recipe imports no other recipe (shared helpers are hf_ext.recipes._*)",
        importers=("hf_ext.recipes.*",),
        forbidden=("hf_ext.recipes.*",),
        allowed=("hf_ext.recipes._*",),
        across_units=True,
    ),
    Rule("benchmarks do not import the CLI", ("benchmarks",), ("hf_ext.cli",)),
)
RULE_NAMES = [rule.name for rule in RULES]


def _matching(module: str, patterns: tuple[str, ...]) -> str | None:
    """The first pattern that names ``module`` or a package above it."""
    return next((p for p in patterns if fnmatchcase(module, p) or fnmatchcase(module, p + ".*")), None)


def _unit(module: str, pattern: str) -> str:
    """The unit of ``module`` that ``pattern`` names; a method's evaluation is a unit of the method it judges."""
    unit = ".".join(module.split(".")[: pattern.count(".") + 1])
    return unit.replace(f"{EVALUATION}.", "hf_ext.companion.", 1)


@dataclass(frozen=True)
class Import:
    target: str  # absolute module name (``from p import m`` names ``p.m`` when that is a module of ours)
    line: int
    statement: str
    at_load: bool  # runs when the module is imported (not inside a function or ``if TYPE_CHECKING:``)


@dataclass(frozen=True)
class Module:
    name: str
    path: str  # relative to the repository, for messages
    imports: tuple[Import, ...]


def module_name(path: str) -> str:
    """``recipes/pem.py`` -> ``hf_ext.recipes.pem``; ``benchmarks/_harness.py`` -> ``benchmarks._harness``."""
    folder, *rest = Path(path).with_suffix("").parts
    parts = [PACKAGES.get(folder, folder), *rest]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def parse_module(path: str, source: str, siblings: frozenset[str] = frozenset()) -> Module:
    """The imports of one source file; ``siblings`` are script-folder modules importable by their bare name."""
    name = module_name(path)
    folder = name.split(".")[0]
    tree = ast.parse(source, filename=path)
    deferred = _deferred_nodes(tree)
    imports = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(name, path.endswith("__init__.py"), node.level, node.module)
            targets = [base if alias.name == "*" else f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            if folder in SCRIPT_FOLDERS and target.split(".")[0] in siblings:
                target = f"{folder}.{target}"
            imports.append(Import(target, node.lineno, ast.unparse(node), id(node) not in deferred))
    return Module(name, path, tuple(imports))


def _deferred_nodes(tree: ast.Module) -> set[int]:
    """Ids of the nodes that do not run when the module loads: function bodies, ``if TYPE_CHECKING:`` blocks."""
    deferred = set()
    for scope in ast.walk(tree):
        if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
            deferred |= {id(node) for node in ast.walk(scope)}
        elif isinstance(scope, ast.If) and "TYPE_CHECKING" in ast.unparse(scope.test):
            deferred |= {id(node) for statement in scope.body for node in ast.walk(statement)}
    return deferred


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, name] if name else base)


def read_modules(root: Path = REPO) -> dict[str, Module]:
    """Every module of hf_ext/, recipes/, benchmarks/ and tests/ under ``root``, by module name."""
    modules = {}
    for folder in (*PACKAGES, *SCRIPT_FOLDERS):
        paths = sorted((root / folder).rglob("*.py"))
        siblings = frozenset(p.stem for p in paths) if folder in SCRIPT_FOLDERS else frozenset()
        for path in paths:
            module = parse_module(str(path.relative_to(root)), path.read_text(), siblings)
            modules[module.name] = module
    return modules


def _known(target: str, modules: dict[str, Module]) -> str | None:
    """The module of ours that ``target`` names: itself, or the package whose attribute it imports."""
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


def _loaded_by(module: Module, modules: dict[str, Module]) -> dict[str, tuple[Import, list[str]]]:
    """Imports that run when ``module`` loads, also through the hf_ext modules (and their packages) it loads.

    Maps each reached import target to (the import in ``module`` that leads there, the chain of modules).
    """
    reached: dict[str, tuple[Import, list[str]]] = {}
    stack = [(imp, imp, [module.name]) for imp in module.imports if imp.at_load]
    seen = {module.name}
    while stack:
        first, imp, chain = stack.pop()
        reached.setdefault(imp.target, (first, chain))
        ours = _known(imp.target, modules)
        parts = ours.split(".") if ours else []
        for depth in range(1, len(parts) + 1):  # importing a.b.c runs a, a.b and a.b.c
            loaded = ".".join(parts[:depth])
            if loaded in modules and loaded not in seen:
                seen.add(loaded)
                stack.extend((first, nxt, [*chain, loaded]) for nxt in modules[loaded].imports if nxt.at_load)
    return reached


def violations(rule: Rule, modules: dict[str, Module]) -> list[str]:
    """One message per import that breaks ``rule``: the importing file and line, the import, the rule."""
    messages = []
    for module in modules.values():
        importer = _matching(module.name, rule.importers)
        if importer is None or _matching(module.name, rule.exempt):
            continue
        if rule.at_load:
            reached = _loaded_by(module, modules)
            candidates = [(target, first, chain) for target, (first, chain) in reached.items()]
        else:
            candidates = [(imp.target, imp, [module.name]) for imp in module.imports]
        for target, imp, chain in candidates:
            target = _known(target, modules) or target
            forbidden = _matching(target, rule.forbidden)
            if forbidden is None or _matching(target, rule.allowed):
                continue
            if rule.across_units and _unit(module.name, importer) == _unit(target, forbidden):
                continue
            via = f" (loads {target} via {' -> '.join(chain)})" if len(chain) > 1 else ""
            messages.append(f"{module.path}:{imp.line}: `{imp.statement}`{via} breaks the rule: {rule.name}")
    return sorted(set(messages))


@pytest.fixture(scope="module")
def modules() -> dict[str, Module]:
    return read_modules()


@pytest.mark.parametrize("rule", RULES, ids=RULE_NAMES)
def test_the_code_follows_the_rule(modules, rule):
    assert not violations(rule, modules), "\n".join(violations(rule, modules))


def test_the_layers_name_real_packages(modules):
    for pattern in (*METHODS, *CORE, EVALUATION):
        assert any(_matching(name, (pattern,)) for name in modules), f"no module matches {pattern!r}"


# One small fake source tree per rule, each with exactly one import that breaks it.
BREAKING = {
    "a method package imports no other method package": {"hf_ext/zo/fake.py": "from ..rl import presets\n"},
    "no method, core module or CLI imports evaluation code (recipes, benchmarks and tests do)": {
        "hf_ext/companion/es/fake.py": "from hf_ext.companion.evaluation.es import solve\n",
        "hf_ext/companion/evaluation/es/__init__.py": "",
    },
    "shared optimizer numerics import no optimizer method": {
        "hf_ext/optim/shared/fake.py": "from ..scion import Scion\n",
        "hf_ext/optim/scion/__init__.py": "",
    },
    "core imports no method package, recipe or CLI": {"hf_ext/data/fake.py": "def f():\n    import hf_ext.quant\n"},
    "kernels import nothing from hf_ext but hf_ext.kernels": {
        "hf_ext/kernels/fake.py": "from hf_ext.models import tiny\n"
    },
    "the companion loads without transformers, TRL or PEFT": {
        "hf_ext/companion/fake/__init__.py": "from hf_ext.data import stack\n",
        "hf_ext/data/__init__.py": "from .stack import x\n",
        "hf_ext/data/stack.py": "import transformers\n",
    },
    "a recipe imports no other recipe (shared helpers are hf_ext.recipes._*)": {
        "recipes/fake.py": "from hf_ext.recipes.token_shift import main\n"
    },
    "benchmarks do not import the CLI": {"benchmarks/fake.py": "from hf_ext.cli import recipes_dir\n"},
}
# The same kinds of imports that the rules allow.
ALLOWED = {
    "a method package imports no other method package": {
        "hf_ext/zo/fake.py": "from . import config\nfrom hf_ext.data import x\nfrom hf_ext.kernels import y\n",
        "hf_ext/zo/config.py": "",
    },
    "no method, core module or CLI imports evaluation code (recipes, benchmarks and tests do)": {
        "hf_ext/companion/evaluation/es/coco.py": "from .harness import solve\nfrom hf_ext.companion.es import X\n",
        "hf_ext/companion/evaluation/es/harness.py": "",
        "recipes/fake.py": "from hf_ext.companion.evaluation.es import run_coco\n",
    },
    "shared optimizer numerics import no optimizer method": {
        "hf_ext/optim/shared/fake.py": "from .newton_schulz import newton_schulz\nfrom hf_ext._validation import x\n",
        "hf_ext/optim/shared/newton_schulz.py": "",
    },
    "core imports no method package, recipe or CLI": {"hf_ext/data/fake.py": "from hf_ext.models import tiny\n"},
    "kernels import nothing from hf_ext but hf_ext.kernels": {
        "hf_ext/kernels/fake.py": "from ._dispatch import use_triton\n"
    },
    "the companion loads without transformers, TRL or PEFT": {
        "hf_ext/companion/fake/__init__.py": "import torch\n\ndef load():\n    import transformers\n"
    },
    "a recipe imports no other recipe (shared helpers are hf_ext.recipes._*)": {
        "recipes/fake.py": "from hf_ext.recipes._results import write_results\nfrom . import fake\n"
    },
    "benchmarks do not import the CLI": {"benchmarks/fake.py": "from _harness import emit\nimport hf_ext.recipes\n"},
}


def _fake_modules(files: dict[str, str]) -> dict[str, Module]:
    siblings = frozenset(Path(path).stem for path in files) | {"_harness"}
    return {module.name: module for module in (parse_module(p, s, siblings) for p, s in files.items())}


@pytest.mark.parametrize("rule", RULES, ids=RULE_NAMES)
def test_each_rule_catches_a_breaking_import_and_names_it(rule):
    files = BREAKING[rule.name]
    (message,) = violations(rule, _fake_modules(files))
    path, source = next(iter(files.items()))
    assert message.startswith(f"{path}:") and source.strip().splitlines()[-1].strip() in message
    assert message.endswith(f"breaks the rule: {rule.name}")


@pytest.mark.parametrize("rule", RULES, ids=RULE_NAMES)
def test_each_rule_lets_the_allowed_imports_through(rule):
    assert violations(rule, _fake_modules(ALLOWED[rule.name])) == []


def test_each_optimizer_method_is_its_own_unit():
    """Scion importing SPS, or a method importing the hf_ext.optim umbrella, breaks the rule; shared numerics do not."""
    rule = RULES[0]
    breaking = _fake_modules(
        {
            "hf_ext/optim/scion/fake.py": "from ..loss_step import SPS\nfrom hf_ext.optim import NGN\n",
            "hf_ext/optim/loss_step/__init__.py": "",
            "hf_ext/optim/__init__.py": "",
        }
    )
    assert [m.split("`")[1] for m in violations(rule, breaking)] == [
        "from ..loss_step import SPS",
        "from hf_ext.optim import NGN",
    ]
    allowed = _fake_modules(
        {"hf_ext/optim/scion/fake.py": "from ..shared import newton_schulz\n", "hf_ext/optim/shared/__init__.py": ""}
    )
    assert violations(rule, allowed) == []


def test_a_methods_evaluation_imports_that_method_and_no_other():
    """The evaluation of the ES may import the ES, the core and itself; importing BO breaks the rule of methods."""
    rule = RULES[0]
    files = {
        "hf_ext/companion/evaluation/es/coco.py": (
            "from hf_ext.companion.es import ESConfig\nfrom hf_ext.executors import run_jobs\n"
            "from .harness import solve\nfrom hf_ext.companion.bo import BayesianOptimization\n"
        ),
        "hf_ext/companion/evaluation/es/harness.py": "",
        "hf_ext/companion/es/__init__.py": "",
        "hf_ext/companion/bo/__init__.py": "",
    }
    (message,) = violations(rule, _fake_modules(files))
    assert "from hf_ext.companion.bo import BayesianOptimization" in message


def _string_constants(path: Path) -> set[str]:
    """The string literals of a module's code, docstrings left out (they may name what uses the module)."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    }


def test_the_core_names_no_method(modules):
    """A method's name in the core (a registry of how to spell it) ties the core to every method: the methods'
    names live with the code that runs them (hf_ext.recipes._plotting spells them for the plots)."""
    from hf_ext.recipes._plotting import DISPLAY_NAMES

    core = [module for module in modules.values() if _matching(module.name, CORE)]
    own = {part for module in core for part in module.name.split(".")}  # a core model's own name ("rep3d")
    methods = set(DISPLAY_NAMES) - own
    named = {module.path: sorted(_string_constants(REPO / module.path) & methods) for module in core}
    assert not any(named.values()), {path: names for path, names in named.items() if names}


def _canonical(distribution: str) -> str:
    """PEP 503 normalised name: ``PyYAML`` -> ``pyyaml``, ``scikit_learn`` -> ``scikit-learn``."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def _declared_distributions() -> dict[str, set[str]]:
    """Normalised distribution names per setup.cfg section: ``install_requires`` and each extra."""
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    sections = {"install_requires": config["options"]["install_requires"], **config["options.extras_require"]}
    requirement_name = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
    return {
        section: {_canonical(requirement_name.match(line)[1]) for line in text.splitlines() if line.strip()}
        for section, text in sections.items()
    }


def _undeclared_imports(modules: dict[str, Module], declared: dict[str, set[str]]) -> list[str]:
    """Third-party imports whose distribution is not declared where that code runs.

    The library (hf_ext, kernels, recipes) may use install_requires and the method extras; benchmarks
    and tests may also use the dev extra. Import names map to distributions (``yaml`` -> ``pyyaml``)
    through the installed packages' metadata.
    """
    providers = importlib.metadata.packages_distributions()
    library = set().union(*(names for section, names in declared.items() if section != "dev"))
    everything = set().union(*declared.values())
    messages = []
    for module in modules.values():
        allowed = everything if module.name.split(".")[0] in SCRIPT_FOLDERS else library
        for imp in module.imports:
            top = imp.target.split(".")[0]
            if not top or top in sys.stdlib_module_names or top in ("hf_ext", *SCRIPT_FOLDERS):
                continue
            distributions = {_canonical(d) for d in providers.get(top, [top])}
            if not distributions & allowed:
                messages.append(
                    f"{module.path}:{imp.line}: `{imp.statement}` needs {' or '.join(sorted(distributions))}, "
                    f"which setup.cfg does not declare{'' if allowed is everything else ' outside the dev extra'}"
                )
    return sorted(set(messages))


def test_every_third_party_import_is_declared_in_setup_cfg(modules):
    problems = _undeclared_imports(modules, _declared_distributions())
    assert not problems, "\n".join(problems)


def test_an_undeclared_import_is_caught():
    fake = _fake_modules({"hf_ext/fake.py": "import yaml\nimport sklearn\n", "benchmarks/fake.py": "import sklearn\n"})
    declared = {"install_requires": {"pyyaml"}, "dev": {"scikit-learn"}}
    (problem,) = _undeclared_imports(fake, declared)
    assert problem.startswith("hf_ext/fake.py:2: `import sklearn` needs scikit-learn")
    assert problem.endswith("outside the dev extra")


def test_every_extra_lists_only_packages_the_code_imports(modules):
    providers = importlib.metadata.packages_distributions()
    imported = {
        _canonical(dist)
        for module in modules.values()
        for imp in module.imports
        for dist in providers.get(imp.target.split(".")[0], [])
    }
    for extra, names in _declared_distributions().items():
        # models: read as files, see the test below; docs: the tools `make docs` runs
        if extra not in ("install_requires", "dev", "models", "docs"):
            assert names <= imported, f"extra [{extra}] lists {sorted(names - imported)}, which nothing imports"


def _located_assets() -> set[str]:
    """The distributions hf_ext reads files from without importing them: ``asset_dir(module, distribution)``."""
    located = set()
    for path in (REPO / "hf_ext").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "asset_dir":
                located.add(_canonical(ast.literal_eval(node.args[1])))
    return located


def test_the_models_extra_lists_the_asset_packages_the_code_locates():
    """The offline model packages are never imported (their imports pull unused runtimes): ``asset_dir`` finds their
    files. The ``models`` extra lists exactly those."""
    assert _declared_distributions()["models"] == _located_assets() != set()
