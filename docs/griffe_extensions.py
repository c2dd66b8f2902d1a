"""Griffe extensions for the API reference (mkdocs.yml's mkdocstrings ``extensions:``): what Griffe reads from the
source differs in a few places from what a user of hf-ext imports and reads."""

import ast
import html
import re
from functools import cache
from pathlib import Path

import griffe

REPO = Path(__file__).resolve().parents[1]
# A Sphinx cross-reference role in a docstring: :class:`MeZOConfig`, :func:`~hf_ext.kernels.depth_smooth`.
ROLE = re.compile(r":(?:class|func|meth|attr|mod|obj|data|exc):`(?P<short>~?)(?P<name>[^`]+)`")


class InstalledLayout(griffe.Extension):
    """Read ``recipes/`` as ``hf_ext.recipes``, where setup.cfg's ``package_dir`` installs it (Griffe reads the
    source tree, whose ``hf_ext/`` has no ``recipes/``). Only the package's ``__init__``: the recipe scripts are run,
    not imported."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs) -> None:
        if pkg.name != "hf_ext":
            return
        path = REPO / "recipes" / "__init__.py"
        recipes = griffe.visit(
            "recipes",
            filepath=path,
            code=path.read_text(encoding="utf-8"),
            parent=pkg,
            docstring_parser=loader.docstring_parser,
            docstring_options=loader.docstring_options,
            lines_collection=loader.lines_collection,
            modules_collection=loader.modules_collection,
        )
        pkg.set_member("recipes", recipes)


class FieldHelp(griffe.Extension):
    """List a dataclass's fields with their ``metadata={"help": ...}`` (what ``HfArgumentParser`` and ``--help``
    show) in an ``Attributes`` section of its docstring: the configuration reference of each config class."""

    def on_class_members(self, *, node: ast.AST, cls: griffe.Class, agent: griffe.Visitor, **kwargs) -> None:
        helps = {}
        for statement in getattr(node, "body", []):
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                text = field_help(statement.value, agent.filepath)
                if text:
                    helps[statement.target.id] = text
        if not helps:
            return
        section = "Attributes:\n" + "\n".join(f"    {name}: {text}" for name, text in helps.items())
        if cls.docstring is None:
            cls.docstring = griffe.Docstring(
                section, parent=cls, parser=agent.docstring_parser, parser_options=agent.docstring_options
            )
        else:
            cls.docstring.value = f"{cls.docstring.value}\n\n{section}"


def field_help(value: ast.expr | None, filepath: Path) -> str | None:
    """The help text of a ``field(..., metadata={"help": ...})`` call, or None; an f-string is evaluated against
    the literal constants it names (``f"one of {list(MODES)}"``), else shown with its expressions."""
    if not (isinstance(value, ast.Call) and getattr(value.func, "id", None) == "field"):
        return None
    for keyword in value.keywords:
        if keyword.arg == "metadata" and isinstance(keyword.value, ast.Dict):
            for key, text in zip(keyword.value.keys, keyword.value.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "help":
                    try:
                        help_text = eval(compile(ast.Expression(text), "<help>", "eval"), module_constants(filepath))
                    except NameError:
                        help_text = ast.unparse(text).removeprefix("f")[1:-1]
                    return " ".join(str(help_text).split())
    return None


@cache
def module_constants(filepath: Path) -> dict[str, object]:
    """The top-level constants of a module that its help f-strings may name (``MODES = ("a", "b")``,
    ``METHODS = (*OURS, *BASELINES)``, the keys of ``POLICIES = {"random": random_policy}``), also those it imports
    from sibling modules; evaluated with a few builtins and nothing else."""
    constants: dict[str, object] = {"__builtins__": {"list": list, "tuple": tuple, "sorted": sorted}}
    for node in ast.parse(filepath.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            sibling = filepath.parent / f"{node.module.replace('.', '/')}.py"
            imported = module_constants(sibling) if sibling.is_file() else {}
            constants.update(
                {alias.asname or alias.name: imported[alias.name] for alias in node.names if alias.name in imported}
            )
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                constants[node.targets[0].id] = eval(
                    compile(ast.Expression(node.value), str(filepath), "eval"), constants
                )
            except Exception:  # not a constant: a dict of functions keeps its literal keys
                keys = getattr(node.value, "keys", [])
                if keys and all(isinstance(key, ast.Constant) for key in keys):
                    constants[node.targets[0].id] = dict.fromkeys(key.value for key in keys)
    return constants


class SphinxRoles(griffe.Extension):
    """Turn the docstrings' Sphinx roles (``:class:`MeZOConfig```) into links to the object's entry in the
    reference, resolved in the docstring's scope; a name with no entry stays plain code."""

    def on_object(self, *, obj: griffe.Object, loader: griffe.GriffeLoader, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(lambda match: cross_reference(obj, match), obj.docstring.value)


def cross_reference(obj: griffe.Object, match: re.Match) -> str:
    """An optional autorefs link (plain code when the target is not documented) for one role in ``obj``'s
    docstring; ``~`` shows the last part of the name only, as in Sphinx."""
    name = match["name"].strip().removesuffix("()")
    first, _, rest = name.partition(".")
    if name.startswith("."):  # a module of the same package: :mod:`.backends`
        package = obj.module if obj.module.is_init_module else obj.module.parent
        identifier = package.path + name
    else:
        try:
            identifier = ".".join(filter(None, (obj.resolve(first), rest)))
        except griffe.NameResolutionError:
            identifier = name
    title = name.rpartition(".")[2] if match["short"] else name
    return f'<autoref identifier="{html.escape(identifier)}" optional><code>{html.escape(title)}</code></autoref>'
