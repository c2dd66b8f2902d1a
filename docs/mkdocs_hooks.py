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
ROOT = "hf_ext"
# Repository files that the site renders as Markdown pages, and the page each becomes.
RENDERED = {"README.md": "index.md", "CONTRIBUTING.md": "contributing.md"}
# Front matter of the pages that need the width of the table of contents: the home page (the README's table of
# methods) and the pages that show a file (lines of up to 120 characters, and no headings to list).
HIDE_TOC = "---\nhide:\n  - toc\n---\n\n"
REFERENCE = "reference"
# The options of the directive that shows a package's docstring above its names.
PACKAGE_DOCSTRING_ONLY = (
    "    options:",
    "      show_root_heading: false",
    "      show_root_toc_entry: false",
    "      members: false",
)
ROOT_INTRODUCTION = (
    "Every public name of hf-ext, one page per package: what the package's `__all__` exports, with the signatures "
    "and docstrings of the code. A name that a package re-exports from a sub-package (`hf_ext.optim.Scion`) is "
    "documented on the sub-package's page (`hf_ext.optim.scion`)."
)
EXAMPLES = "examples"
# A Markdown link or image: ](target#anchor "title").
LINK = re.compile(r'\]\((?P<path>[^)\s#]+)(?P<rest>(?:#[^)\s]*)?(?:\s+"[^"]*")?)\)')
LANGUAGES = {".py": "python", ".yaml": "yaml", ".yml": "yaml", ".sh": "bash", ".toml": "toml", ".json": "json"}


# The API reference.


def packages() -> dict[str, Path]:
    """Every package that setup.cfg installs, with its folder (``hf_ext.recipes`` lives in ``recipes/``)."""
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    options = config["options"]
    folders = dict(
        (part.strip() for part in line.split("=", 1)) for line in options["package_dir"].splitlines() if "=" in line
    )
    return {name: REPO / folders.get(name, name.replace(".", "/")) for name in options["packages"].split()}


def init_tree(folder: Path) -> ast.Module:
    return ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))


def exported_names(folder: Path) -> list[str]:
    """The public names of the package in ``folder``: its ``__all__``, else the functions and classes its
    ``__init__.py`` defines without a leading underscore. Read from the source, without importing the package."""
    tree = init_tree(folder)
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "__all__":
            return list(ast.literal_eval(node.value))
    defined = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [node.name for node in tree.body if isinstance(node, defined) and not node.name.startswith("_")]


def defined_names(tree: ast.Module, imports: bool = True) -> set[str]:
    """The names a module binds at its top level: functions, classes, assignments, and imports unless not asked."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and imports:
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {target.id for target in targets if isinstance(target, ast.Name)}
    return names


def object_path(package: str, folder: Path, name: str) -> str:
    """The dotted path the reference reads ``package.name`` from: the package, when its ``__init__.py`` binds the
    name and no sub-module has it (Griffe, like ``import package.name``, finds the sub-module first), else the
    package's module that defines it (``hf_ext.alignment.token_shift.token_shift``, or a name served lazily by
    the package's ``__getattr__``)."""
    submodule = (folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file()
    if name in defined_names(init_tree(folder)) and not submodule:
        return f"{package}.{name}"
    for module in sorted(folder.glob("[!_]*.py")):
        if name in defined_names(ast.parse(module.read_text(encoding="utf-8")), imports=False):
            return f"{package}.{module.stem}.{name}"
    raise ValueError(f"{package} exports {name!r}, which neither its __init__.py nor its modules define")


def documenting_package(name: str, package: str, exports: dict[str, list[str]]) -> str:
    """The package whose page documents ``package.name``: the deepest package at or under ``package`` that exports
    it (``hf_ext.optim.Scion`` is documented once, on ``hf_ext.optim.scion``'s page)."""
    owners = [other for other in exports if name in exports[other] and (other + ".").startswith(package + ".")]
    return max(sorted(owners), key=lambda other: other.count("."))


def reference_path(package: str) -> str:
    """The site page of ``package``'s reference: ``reference/optim/scion/index.md``; hf_ext's is the index."""
    parts = package.split(".")[1:]
    return posixpath.join(REFERENCE, *parts, "index.md")


def relative_link(page: str, target: str) -> str:
    """A link from site page ``page`` to site page ``target``."""
    return posixpath.relpath(target, posixpath.dirname(page))


def summary(tree: ast.Module) -> str:
    """The first paragraph of a module's docstring on one line, for a table or list of modules."""
    docstring = ast.get_docstring(tree) or ""
    return " ".join(docstring.strip().split("\n\n")[0].split()).replace("|", "\\|")


def reference_page(package: str, folders: dict[str, Path], exports: dict[str, list[str]]) -> str:
    """The Markdown of ``package``'s reference page: its docstring, then each name it exports, documented here or
    linked to the page of the sub-package that documents it."""
    page = reference_path(package)
    if package == ROOT:
        lines = ["# API reference", "", ROOT_INTRODUCTION, "", "| package | what it holds |", "| --- | --- |"]
        for other in (other for other in folders if other != ROOT):
            link = relative_link(page, reference_path(other))
            lines.append(f"| [{other}]({link}) | {summary(init_tree(folders[other]))} |")
    else:
        lines = [f"# {package}", "", f"::: {package}", *PACKAGE_DOCSTRING_ONLY]
    owners = {name: documenting_package(name, package, exports) for name in exports[package]}
    elsewhere = {name: owner for name, owner in owners.items() if owner != package}
    if elsewhere:
        lines += ["", "## Re-exported here", "", "| name | documented in |", "| --- | --- |"]
        for name, owner in elsewhere.items():
            link = relative_link(page, reference_path(owner))
            lines.append(f"| [{name}][{object_path(owner, folders[owner], name)}] | [{owner}]({link}) |")
    here = [name for name in exports[package] if name not in elsewhere]
    lines += [f"\n::: {object_path(package, folders[package], name)}" for name in here]
    return "\n".join(lines) + "\n"


def reference_pages() -> dict[str, str]:
    """Site path -> Markdown of the API reference, one page per package; hf_ext's lists the others."""
    folders = dict(sorted(packages().items()))
    exports = {package: exported_names(folder) for package, folder in folders.items()}
    return {reference_path(package): reference_page(package, folders, exports) for package in folders}


def reference_nav(names: list[str], package: str = ROOT) -> list:
    """The API reference's nav: the package tree, each package with sub-packages a section led by its own page."""
    entries = [reference_path(package)]
    for child in sorted(other for other in names if other.rpartition(".")[0] == package):
        below = reference_nav(names, child)
        entries.append({child.rpartition(".")[2]: below if len(below) > 1 else below[0]})
    return entries


# The examples and the other repository files that pages link to.


def file_page(path: str) -> str:
    """The Markdown of a page that shows repository file ``path`` as code."""
    text = (REPO / path).read_text(encoding="utf-8")
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return f"{HIDE_TOC}# {path}\n\n{fence}{LANGUAGES.get(Path(path).suffix, 'text')}\n{text.rstrip()}\n{fence}\n"


def example_scripts() -> list[str]:
    """The example scripts, as repository paths."""
    return [str(path.relative_to(REPO)) for path in sorted((REPO / EXAMPLES).glob("*.py"))]


def examples_index() -> str:
    """The Markdown of the examples' index: each script with the first paragraph of its docstring."""
    lines = ["# Examples", "", "Every example is a whole script that a test runs as it is shown here.", ""]
    for path in example_scripts():
        description = summary(ast.parse((REPO / path).read_text(encoding="utf-8")))
        link = relative_link(f"{EXAMPLES}/index.md", site_path(path))
        lines.append(f"- [{Path(path).name}]({link}): {description}")
    return "\n".join(lines) + "\n"


def site_path(repo_path: str) -> str:
    """The site page of a repository file: a file of docs/ itself, the home page, CONTRIBUTING, or its file page."""
    if repo_path.startswith("docs/"):
        return repo_path.removeprefix("docs/")
    return RENDERED.get(repo_path, f"{repo_path}.md")


def repository_file(source: str, target: str) -> str | None:
    """The repository file that link ``target`` in Markdown file ``source`` names, or None (a URL, a folder, an
    anchor, a path that does not exist)."""
    if "://" in target or target.startswith(("/", "mailto:")):
        return None
    path = posixpath.normpath(posixpath.join(posixpath.dirname(source), target))
    return path if not path.startswith("../") and (REPO / path).is_file() else None


def markdown_sources() -> dict[str, str]:
    """Site page -> repository path of every hand-written Markdown page."""
    pages = {page: source for source, page in RENDERED.items()}
    pages.update(
        {str(path.relative_to(REPO / "docs")): str(path.relative_to(REPO)) for path in (REPO / "docs").rglob("*.md")}
    )
    return pages


def rewrite_links(markdown: str, page: str, source: str) -> str:
    """Links of site page ``page``, written relative to its repository file ``source``, made relative to the page."""

    def rewrite(match: re.Match) -> str:
        path = repository_file(source, match["path"])
        return match[0] if path is None else f"]({relative_link(page, site_path(path))}{match['rest']})"

    return LINK.sub(rewrite, markdown)


def linked_files() -> list[str]:
    """Repository files outside docs/ that a hand-written page links to, other than those rendered as pages."""
    found = set()
    for source in markdown_sources().values():
        for match in LINK.finditer((REPO / source).read_text(encoding="utf-8")):
            path = repository_file(source, match["path"])
            if path is not None and not path.startswith("docs/") and path not in RENDERED:
                found.add(path)
    return sorted(found)


def generated_pages() -> dict[str, str]:
    """Site path -> Markdown of every page that is not a file of docs/."""
    pages = {page: (REPO / source).read_text(encoding="utf-8") for source, page in RENDERED.items()}
    pages["index.md"] = HIDE_TOC + pages["index.md"]
    pages.update(reference_pages())
    pages[f"{EXAMPLES}/index.md"] = examples_index()
    pages.update({site_path(path): file_page(path) for path in sorted({*example_scripts(), *linked_files()})})
    return pages


def generated_sections() -> dict[str, list]:
    """The nav sections that mkdocs.yml names by their index page and the hooks fill."""
    examples = [f"{EXAMPLES}/index.md", *({Path(path).name: site_path(path)} for path in example_scripts())]
    return {f"{REFERENCE}/index.md": reference_nav(list(packages())), f"{EXAMPLES}/index.md": examples}


def fill_nav(nav: list, sections: dict[str, list]) -> None:
    """Replace, at any depth of ``nav``, an entry naming a generated section's index by that section."""
    for entry in nav:
        for title, value in entry.items() if isinstance(entry, dict) else ():
            if isinstance(value, list):
                fill_nav(value, sections)
            else:
                entry[title] = sections.get(value, value)


# The hooks. MkDocs calls them by name, once per build.

_pages: dict[str, str] = {}


def on_config(config):
    """Make the generated pages and fill the API reference and examples sections of the nav."""
    _pages.clear()
    _pages.update(generated_pages())
    fill_nav(config["nav"], generated_sections())
    return config


def on_files(files, config):
    """Add the generated pages to the site; the pages of linked files (tests, library sources) are reached by those
    links only, not from the nav."""
    from mkdocs.structure.files import File, InclusionLevel

    unlisted = {site_path(path) for path in linked_files()} - {site_path(path) for path in example_scripts()}
    for src_uri, content in _pages.items():
        inclusion = InclusionLevel.NOT_IN_NAV if src_uri in unlisted else InclusionLevel.UNDEFINED
        files.append(File.generated(config, src_uri, content=content, inclusion=inclusion))
    return files


def on_page_markdown(markdown, page, config, files):
    """Point the links of a hand-written page at the site's pages."""
    source = markdown_sources().get(page.file.src_uri)
    return markdown if source is None else rewrite_links(markdown, page.file.src_uri, source)
