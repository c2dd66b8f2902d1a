import ast
from pathlib import Path

import hf_ext.companion.bo

PACKAGE = Path(hf_ext.companion.bo.__file__).parent


def test_no_module_imports_a_private_name():
    """What two modules share is public in one of them (lilo's loop once imported the BO loop's ``_description``)."""
    private = [
        f"{path.relative_to(PACKAGE)}: from {'.' * node.level}{node.module or ''} import {alias.name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
        if alias.name.startswith("_")
    ]
    assert private == []
