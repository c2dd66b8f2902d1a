"""The Python standard library's own source files and docstrings: real text on every machine."""

import ast
import functools
import sysconfig
from dataclasses import dataclass
from pathlib import Path

# Test suites, vendored or generated code and install helpers are not library text.
_SKIPPED_DIRS = frozenset(
    {"site-packages", "test", "tests", "idle_test", "__pycache__", "lib2to3", "turtledemo", "ensurepip", "lib-dynload"}
)


@dataclass(frozen=True)
class Docstring:
    """One docstring and where it comes from (``family`` is the top-level package, or None)."""

    text: str
    path: str
    family: str | None


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_source_files() -> list[Path]:
    """The standard library's ``.py`` files in a fixed (sorted) order."""
    root = stdlib_root()
    files = []
    for path in sorted(root.rglob("*.py")):
        folders = path.relative_to(root).parts[:-1]
        if not any(part in _SKIPPED_DIRS or part.startswith("config-") for part in folders):
            files.append(path)
    if not files:
        raise FileNotFoundError(f"no standard-library sources found under {root}")
    return files


def read_source(path: Path) -> str | None:
    """File text, or None for the rare file that is not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


@functools.cache
def stdlib_docstrings(min_chars: int = 40) -> tuple[Docstring, ...]:
    """Module, class and function docstrings of at least ``min_chars`` characters (parsed once)."""
    return tuple(_iter_docstrings(min_chars))


def _iter_docstrings(min_chars: int):
    root = stdlib_root()
    for path in stdlib_source_files():
        source = read_source(path)
        if source is None:
            continue
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        relative = path.relative_to(root)
        family = relative.parts[0] if len(relative.parts) > 1 else None
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                text = ast.get_docstring(node)
                if text and len(text) >= min_chars:
                    yield Docstring(text=text, path=str(relative), family=family)
