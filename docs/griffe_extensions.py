"""Griffe extensions for the API reference (mkdocs.yml's mkdocstrings ``extensions:``): what Griffe reads from the
source tree differs in a few places from what a user imports."""

from pathlib import Path

import griffe

REPO = Path(__file__).resolve().parents[1]


class InstalledLayout(griffe.Extension):
    """Read ``recipes/`` as ``hf_ext.recipes``, where setup.cfg's ``package_dir`` installs it (Griffe reads the
    source tree, where ``hf_ext/`` has no ``recipes/``). Only the package's ``__init__``: the recipe scripts are run,
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
