"""The docs site's generated pages (docs/mkdocs_hooks.py), checked without building the site: the API reference
documents every public name of every package, and links to files outside docs/ reach their pages on the site."""

import configparser
import importlib
import importlib.util
import inspect
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DIRECTIVE = re.compile(r"^::: (\S+)$", flags=re.MULTILINE)
REEXPORT = re.compile(r"^\| \[(?P<name>\w+)\]\[(?P<path>[\w.]+)\] \|", flags=re.MULTILINE)


def _load_hooks():
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", REPO / "docs" / "mkdocs_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hooks = _load_hooks()


def _installed_packages() -> list[str]:
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    return config["options"]["packages"].split()


def _public_names(package) -> list[str]:
    """What a user imports from ``package``: its ``__all__``, else the functions and classes it defines."""
    if hasattr(package, "__all__"):
        return list(package.__all__)
    defined = (inspect.isfunction, inspect.isclass)
    return [
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and any(test(value) for test in defined) and value.__module__ == package.__name__
    ]


def _resolve(path: str):
    """The object at dotted ``path`` as the reference reads it: the longest importable module prefix, then
    attributes (Griffe, like ``import``, takes the sub-module ``hf_ext.alignment.token_shift`` over the function that
    ``hf_ext.alignment`` binds to the same name)."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part)
        return obj
    raise ModuleNotFoundError(path)


def _missing(package_name: str, pages: dict[str, str]) -> list[str]:
    """The public names of ``package_name`` that its reference page neither documents nor links to a page that
    documents them (compared by identity with what the import gives)."""
    package = importlib.import_module(package_name)
    page = pages.get(hooks.reference_path(package_name), "")
    documented_anywhere = {path for text in pages.values() for path in DIRECTIVE.findall(text)}
    here = [_resolve(path) for path in DIRECTIVE.findall(page) if path != package_name]
    linked = [_resolve(m["path"]) for m in REEXPORT.finditer(page) if m["path"] in documented_anywhere]
    missing = []
    for name in _public_names(package):
        value = getattr(package, name)
        if not any(value is documented for documented in (*here, *linked)):
            missing.append(f"{package_name}.{name}")
    return missing


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return hooks.reference_pages()


@pytest.mark.parametrize("package", _installed_packages())
def test_the_api_reference_documents_every_public_name_of_each_package(package, pages):
    assert _missing(package, pages) == []


def test_every_reference_page_is_in_the_nav(pages):
    def flatten(entries):
        for entry in entries:
            values = entry.values() if isinstance(entry, dict) else [entry]
            for value in values:
                yield from flatten(value) if isinstance(value, list) else [value]

    nav = list(flatten(hooks.reference_nav(_installed_packages())))
    assert sorted(nav) == sorted(pages) and len(nav) == len(set(nav))
    assert set(pages) == {hooks.reference_path(package) for package in _installed_packages()}


def test_a_name_left_out_of_the_reference_is_reported(pages):
    page = hooks.reference_path("hf_ext.zo")
    without = {**pages, page: pages[page].replace("::: hf_ext.zo.ZOTrainer\n", "")}
    assert _missing("hf_ext.zo", without) == ["hf_ext.zo.ZOTrainer"]


def test_a_reexported_name_is_linked_to_its_documentation_once(pages):
    optim = pages[hooks.reference_path("hf_ext.optim")]
    assert "| [Scion][hf_ext.optim.scion.Scion] |" in optim and "::: hf_ext.optim.scion.Scion" not in optim
    directives = [path for text in pages.values() for path in DIRECTIVE.findall(text)]
    assert directives.count("hf_ext.optim.scion.Scion") == 1


def test_links_out_of_docs_point_at_the_pages_that_show_those_files():
    markdown = (
        "[guide](../README.md#two-commands) [code](../examples/zo_trainer.py) [test](../tests/test_cli.py) "
        "[page](zo.md#quick-start) [site](https://example.org/x.md) [missing](../examples/none.py)"
    )
    assert hooks.rewrite_links(markdown, "zo.md", "docs/zo.md") == (
        "[guide](index.md#two-commands) [code](examples/zo_trainer.py.md) [test](tests/test_cli.py.md) "
        "[page](zo.md#quick-start) [site](https://example.org/x.md) [missing](../examples/none.py)"
    )
    readme = "[zo](docs/zo.md) [example](examples/zo_trainer.py) [rules](CONTRIBUTING.md)"
    assert hooks.rewrite_links(readme, "index.md", "README.md") == (
        "[zo](zo.md) [example](examples/zo_trainer.py.md) [rules](contributing.md)"
    )


def test_every_example_and_every_linked_file_has_a_page():
    generated = hooks.generated_pages()
    linked = hooks.linked_files()
    assert "examples/zo_trainer.py" in hooks.example_scripts() and "tests/optim/test_contract.py" in linked
    for path in (*hooks.example_scripts(), *linked):
        assert f"# {path}\n\n```python\n" in generated[hooks.site_path(path)]
