"""MkDocs hooks (mkdocs.yml's ``hooks:``) that build the site from the repository as it is.

They add the pages nobody writes by hand: the README as the home page, CONTRIBUTING.md, one API reference page per
package of hf_ext (what its ``__all__`` exports, so a new public name appears without editing the docs) and one
page per example script. The Markdown keeps the relative links that work on GitHub and in a clone; a link from a
page to a file outside docs/ is pointed at that file's page on the site (the README and CONTRIBUTING rendered, any
other file shown as code), so the site shows the very files it was built from and needs no hosting URL.

The functions above the hooks need no MkDocs: tests/test_docs_site.py checks the reference without building it.
"""

from __future__ import annotations

import ast
import configparser
import posixpath
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Repository files that the site renders as Markdown pages, and the page each becomes.
RENDERED = {"README.md": "index.md", "CONTRIBUTING.md": "contributing.md"}
REFERENCE = "reference"
EXAMPLES = "examples"
# A Markdown link or image target: ](path#anchor "title"); a target with a scheme or only an anchor is left alone.
LINK = re.compile(r'\]\((?P<path>[^)\s#]+)(?P<rest>(?:#[^)\s]*)?(?:\s+"[^"]*")?)\)')
LANGUAGES = {".py": "python", ".yaml": "yaml", ".yml": "yaml", ".sh": "bash", ".toml": "toml", ".json": "json"}


def packages() -> dict[str, Path]:
    """Every package that setup.cfg installs, with its folder (``hf_ext.recipes`` lives in ``recipes/``)."""
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    options = config["options"]
    folders = dict(
        (part.strip() for part in line.split("=", 1)) for line in options["package_dir"].splitlines() if "=" in line
    )
    return {name: REPO / folders.get(name, name.replace(".", "/")) for name in options["packages"].split()}


def exported_names(folder: Path) -> list[str]:
    """The public names of the package in ``folder``: its ``__all__``, else the functions and classes its
    ``__init__.py`` defines without a leading underscore. Read from the source, without importing the package."""
    tree = ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "__all__":
            return list(ast.literal_eval(node.value))
    defined = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [node.name for node in tree.body if isinstance(node, defined) and not node.name.startswith("_")]


def top_level_names(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level: imports, functions, classes and assignments."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {target.id for target in targets if isinstance(target, ast.Name)}
    return names


def object_path(package: str, folder: Path, name: str) -> str:
    """The dotted path the reference reads ``package.name`` from: the package when its ``__init__.py`` binds the
    name, else the package's module that defines it (a name served lazily by the package's ``__getattr__``)."""
    if name in top_level_names(ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))):
        return f"{package}.{name}"
    for module in sorted(folder.glob("*.py")):
        if name in top_level_names(ast.parse(module.read_text(encoding="utf-8"))):
            return f"{package}.{module.stem}.{name}"
    raise ValueError(f"{package} exports {name!r}, which neither its __init__.py nor its modules define")


def documenting_package(name: str, package: str, exports: dict[str, list[str]]) -> str:
    """The package whose page documents ``package.name``: the deepest package at or under ``package`` that exports
    it (``hf_ext.optim.Scion`` is documented once, on ``hf_ext.optim.scion``'s page)."""
    owners = [other for other in exports if name in exports[other] and (other + ".").startswith(package + ".")]
    return max(sorted(owners), key=lambda other: other.count("."))


def summary_line(folder: Path) -> str:
    """The first line of a package's docstring, for the reference's table of packages."""
    docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))) or ""
    return docstring.strip().split("\n")[0].replace("|", "\\|")


def reference_page(package: str, folders: dict[str, Path], exports: dict[str, list[str]]) -> str:
    """The Markdown of ``package``'s reference page: its docstring, then each name it exports, documented here or
    linked to the page of the sub-package that documents it."""
    lines = [
        f"# {package}",
        "",
        f"::: {package}",
        "    options:",
        "      show_root_heading: false",
        "      members: false",
    ]
    owners = {name: documenting_package(name, package, exports) for name in exports[package]}
    elsewhere = {name: owner for name, owner in owners.items() if owner != package}
    if elsewhere:
        lines += ["", "## Re-exported here", "", "| name | documented in |", "| --- | --- |"]
        for name, owner in elsewhere.items():
            lines.append(f"| [`{name}`][{object_path(owner, folders[owner], name)}] | [{owner}]({owner}.md) |")
    lines += [
        f"\n::: {object_path(package, folders[package], name)}" for name in exports[package] if name not in elsewhere
    ]
    return "\n".join(lines) + "\n"


def reference_pages() -> dict[str, str]:
    """Site path -> Markdown of the API reference: an index of the packages and one page per package."""
    folders = packages()
    exports = {package: exported_names(folder) for package, folder in folders.items()}
    index = [
        "# API reference",
        "",
        "Every public name of hf-ext, one page per package: what its `__all__` exports, with the signatures and "
        "docstrings of the code. A name that a package re-exports from a sub-package is documented on the "
        "sub-package's page.",
        "",
        "| package | what it holds |",
        "| --- | --- |",
    ]
    index += [f"| [{package}]({package}.md) | {summary_line(folders[package])} |" for package in sorted(folders)]
    pages = {f"{REFERENCE}/index.md": "\n".join(index) + "\n"}
    pages.update(
        {f"{REFERENCE}/{package}.md": reference_page(package, folders, exports) for package in sorted(folders)}
    )
    return pages


def file_page(path: str) -> str:
    """The Markdown of a page that shows repository file ``path`` as code."""
    text = (REPO / path).read_text(encoding="utf-8")
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return f"# {path}\n\n{fence}{LANGUAGES.get(Path(path).suffix, 'text')}\n{text.rstrip()}\n{fence}\n"


def examples_index(examples: list[str]) -> str:
    """The Markdown of the examples' index: each script with the first line of its docstring."""
    lines = ["# Examples", "", "Every example is a whole script that a test runs as it is shown here.", ""]
    for path in examples:
        docstring = ast.get_docstring(ast.parse((REPO / path).read_text(encoding="utf-8"))) or ""
        lines.append(f"- [{Path(path).name}]({Path(path).name}.md): {docstring.strip().split(chr(10))[0]}")
    return "\n".join(lines) + "\n"


def page_source(src_uri: str) -> str:
    """The repository path of the Markdown behind site page ``src_uri``."""
    rendered = {page: source for source, page in RENDERED.items()}
    return rendered.get(src_uri, f"docs/{src_uri}")


def outside_target(source: str, target: str) -> str | None:
    """The repository path that link ``target`` in file ``source`` names, when it is a file outside docs/."""
    if "://" in target or target.startswith(("/", "mailto:")):
        return None
    path = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
    if path.startswith(("docs/", "../")) or not (REPO / path).is_file():
        return None
    return path


def site_path(repo_path: str) -> str:
    """The site page of a repository file: under docs/ itself, the home page, CONTRIBUTING, or its file page."""
    if repo_path.startswith("docs/"):
        return repo_path.removeprefix("docs/")
    return RENDERED.get(repo_path, f"{repo_path}.md")


def rewrite_links(markdown: str, src_uri: str) -> str:
    """Links of page ``src_uri`` (written relative to its repository file) made relative to its site page."""
    source = page_source(src_uri)

    def rewrite(match: re.Match) -> str:
        path = posixpath.normpath(posixpath.join(posixpath.dirname(source), match["path"]))
        if "://" in match["path"] or not (REPO / path).exists() or path.startswith("../"):
            return match[0]
        relative = posixpath.relpath(site_path(path), posixpath.dirname(src_uri) or ".")
        return f"]({relative}{match['rest']})"

    return LINK.sub(rewrite, markdown)


def linked_files() -> list[str]:
    """Repository files outside docs/ that a page links to, other than those rendered as pages."""
    sources = [*RENDERED, *(str(p.relative_to(REPO)) for p in sorted((REPO / "docs").rglob("*.md")))]
    found = set()
    for source in sources:
        for match in LINK.finditer((REPO / source).read_text(encoding="utf-8")):
            path = outside_target(source, match["path"])
            if path is not None and path not in RENDERED:
                found.add(path)
    return sorted(found)


def example_scripts() -> list[str]:
    """The example scripts, as repository paths."""
    return [str(p.relative_to(REPO)) for p in sorted((REPO / EXAMPLES).glob("*.py"))]


def generated_pages() -> dict[str, str]:
    """Site path -> Markdown of every generated page."""
    pages = {page: (REPO / source).read_text(encoding="utf-8") for source, page in RENDERED.items()}
    pages.update(reference_pages())
    pages[f"{EXAMPLES}/index.md"] = examples_index(example_scripts())
    pages.update({site_path(path): file_page(path) for path in sorted({*example_scripts(), *linked_files()})})
    return pages


def generated_nav(pages: dict[str, str]) -> dict[str, list]:
    """The nav entries that mkdocs.yml leaves to the hooks: its entry for an index page becomes that section."""
    sections = {}
    for folder in (REFERENCE, EXAMPLES):
        index = f"{folder}/index.md"
        children = sorted(page for page in pages if page.startswith(f"{folder}/") and page != index)
        sections[index] = [index, *({page.split("/")[-1].removesuffix(".md"): page} for page in children)]
    return sections


# The hooks. MkDocs calls them by name; the generated pages are made once per build.


_pages: dict[str, str] = {}


def fill_nav(nav: list, sections: dict[str, list]) -> None:
    """Replace, at any depth of ``nav``, an entry naming a generated section's index by that section."""
    for entry in nav:
        for title, value in entry.items() if isinstance(entry, dict) else ():
            if isinstance(value, list):
                fill_nav(value, sections)
            else:
                entry[title] = sections.get(value, value)


def on_config(config):
    """Make the generated pages and fill the API reference and examples sections of the nav."""
    _pages.clear()
    _pages.update(generated_pages())
    fill_nav(config["nav"], generated_nav(_pages))
    return config


def on_files(files, config):
    """Add the generated pages to the site."""
    from mkdocs.structure.files import File

    for src_uri, content in _pages.items():
        files.append(File.generated(config, src_uri, content=content))
    return files


def on_page_markdown(markdown, page, config, files):
    """Point the links of a page at the site's pages."""
    return rewrite_links(markdown, page.file.src_uri)
