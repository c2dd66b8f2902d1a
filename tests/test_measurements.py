"""Documented numbers stay tied to the code that printed them (docs/measurements.yaml, issues 42 and 74).

The demo's AGZO accuracy went stale when the range finder changed and nobody measured it again. Each entry of
docs/measurements.yaml names a command, the numbers it printed, the files that state them and the code they
depend on: each file the numbers are computed by (the method's own files, the script, recipe and config that ran
it, not the settings, job and storage plumbing around them) with the hash of its code when they were measured. A
change to that code fails here until the numbers are measured again (``make measure ENTRY=...``) and the hash
renewed; a suite that runs for hours also names the commit it was measured on (``measured_at``), to reproduce it.

The hash is of a file's code, not of where it lives: the syntax tree without docstrings, each import from our own
code keyed by the names it binds and not by the module it reads them from (YAML as parsed data). Rewording a
comment or docstring keeps it, and so does moving a file to another package (a benchmark harness out of a method
package) and pointing its importers at it: an entry whose file is gone from its path finds it by its hash wherever
it went. Hashing whole files,
not named functions: a function computes with its module's constants and helpers, and a refactor moves files.
"""

import ast
import functools
import hashlib
import importlib.util
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("measure", ROOT / "tests" / "measure.py")
measure = importlib.util.module_from_spec(spec)
spec.loader.exec_module(measure)

MEASUREMENTS = measure.load_entries()
NAMES = [entry["name"] for entry in MEASUREMENTS]
# What a command line starts with: a program (a recipe, a benchmark, make), a shell loop over seeds or folders, a
# copy of earlier runs to add methods to, an older commit's code checked out beside (git, env PYTHONPATH=...).
PROGRAMS = ("python", "hf-ext", "make", "nice", "for", "cp", "git", "env")
# Our own code's top-level packages: an import from them is keyed by the names it binds, not the module path.
OWN_PACKAGES = ("hf_ext", "benchmarks")
# Folders never searched for a moved file: the environment, run outputs, caches.
NOT_SOURCE = ("outputs", "__pycache__", "node_modules", "build")


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
                if isinstance(body[0].value.value, str):
                    node.body = body[1:] or [ast.Pass()]
    return tree


def _own_imports_by_name(tree: ast.Module) -> ast.Module:
    """Imports from our own code (relative, or from ``hf_ext`` or ``benchmarks``) keyed by the names they bind:
    ``from .config import ESConfig`` and ``from hf_ext.companion.es.config import ESConfig`` alike, and a module's
    top-level ones merged into one sorted list, however a move splits or reorders them. Where a name is read from
    is the layout; what it computes is hashed in the file that defines it. Other packages' imports stay as written."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in OWN_PACKAGES):
            node.module, node.level = None, 0
    own = [node for node in tree.body if isinstance(node, ast.ImportFrom) and node.module is None]
    names = sorted((alias.name, alias.asname or "") for node in own for alias in node.names)
    tree.body = [node for node in tree.body if node not in own]
    if names:
        tree.body.insert(0, ast.ImportFrom(None, [ast.alias(name, asname or None) for name, asname in names], 0))
    return tree


def canonical_text(path: Path) -> str:
    """What of ``path`` can change a result: a Python file's syntax tree without docstrings, its own imports by name;
    a YAML file's data."""
    text = path.read_text()
    if path.suffix == ".py":
        return ast.dump(_own_imports_by_name(_without_docstrings(ast.parse(text))))
    if path.suffix in (".yaml", ".yml"):
        return json.dumps(yaml.safe_load(text), sort_keys=True)
    return text


def code_hash(path: Path) -> str:
    """SHA-256 (first 12 hex digits) of ``path``'s canonical text; its path is not part of it."""
    stat = path.stat()
    return _code_hash(path.resolve(), stat.st_mtime_ns, stat.st_size)


@functools.cache
def _code_hash(path: Path, mtime_ns: int, size: int) -> str:
    """Once per version of a file: the entries share most of their files."""
    return hashlib.sha256(canonical_text(path).encode()).hexdigest()[:12]


@functools.cache
def _hashes_under(root: Path) -> dict[str, list[Path]]:
    """Every Python and YAML file under ``root`` (hidden folders, outputs and caches aside) by its code hash."""
    found: dict[str, list[Path]] = {}
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(name for name in subfolders if not name.startswith(".") and name not in NOT_SOURCE)
        for name in sorted(files):
            path = Path(folder) / name
            if path.suffix in (".py", ".yaml", ".yml"):
                try:
                    found.setdefault(code_hash(path), []).append(path)
                except (SyntaxError, UnicodeDecodeError, yaml.YAMLError):
                    continue
    return found


def changed_code(root: Path, code: dict[str, str]) -> dict[str, str | None]:
    """The files of ``code`` (path -> recorded hash, relative to ``root``) whose code is not as recorded, each with
    its hash now (None: gone from its path, and no file under ``root`` holds its code). A file gone from its path
    whose code is elsewhere (a move) is as recorded; a file at its path must hold its code there."""
    changed: dict[str, str | None] = {}
    for name, recorded in code.items():
        path = root / name
        if path.is_file():
            now = code_hash(path)
            if now != recorded:
                changed[name] = now
        elif recorded not in _hashes_under(root):
            changed[name] = None
    return changed


def _renewal(changed: dict[str, str | None]) -> str:
    return "; ".join(
        f"{path}: {now}" if now else f"{path} is gone and no file holds its code (moved and edited?)"
        for path, now in changed.items()
    )


@pytest.mark.parametrize("entry", MEASUREMENTS, ids=NAMES)
def test_a_documented_number_was_measured_on_the_code_as_it_is(entry):
    changed = changed_code(ROOT, entry["code"])
    measured = f" (measured on commit {entry['measured_at']})" if "measured_at" in entry else ""
    assert not changed, (
        f"{entry['name']}: the code behind {entry['numbers']}{measured} changed since they were measured: "
        f"{', '.join(changed)}. Run `make measure ENTRY={entry['name']}`, update the numbers in {entry['stated_in']}, "
        f"and set in this entry's `code` (its own mapping, if it shares an anchor with entries not measured again) "
        f"{_renewal(changed)}."
    )


@pytest.mark.parametrize("entry", MEASUREMENTS, ids=NAMES)
def test_every_file_states_the_measured_numbers(entry):
    for name in entry["stated_in"]:
        text = (ROOT / name).read_text()
        missing = [number for number in entry["numbers"] if not measure.states(text, number)]
        assert not missing, f"{entry['name']}: {name} does not state {missing} (whole, not inside a longer number)"


@pytest.mark.parametrize("entry", MEASUREMENTS, ids=NAMES)
def test_every_entry_has_a_command_that_runs(entry):
    lines = measure.command_lines(entry["command"])
    prose = [line for line in lines if line.split()[0] not in PROGRAMS]
    assert not prose, f"{entry['name']}: a command line starts with none of {PROGRAMS}: {prose}"
    syntax = subprocess.run(["bash", "-n", "-c", "\n".join(lines)], capture_output=True, text=True)
    assert syntax.returncode == 0, f"{entry['name']}: its command is not a shell command: {syntax.stderr}"


@pytest.mark.parametrize("entry", MEASUREMENTS, ids=NAMES)
def test_a_measured_at_names_a_commit(entry):
    assert re.fullmatch(r"[0-9a-f]{7,40}", entry.get("measured_at", "0000000")), entry["measured_at"]


def test_every_entry_has_its_own_name():
    assert len(set(NAMES)) == len(NAMES), sorted(name for name in NAMES if NAMES.count(name) > 1)


def test_the_hash_follows_code_not_comments_or_docstrings(tmp_path):
    module = tmp_path / "step.py"
    module.write_text('def step(x):\n    """Why."""\n    return x + 1  # one\n')
    before = code_hash(module)
    module.write_text('def step(x):\n    """Why, reworded."""\n    return x + 1  # reworded comment\n')
    assert code_hash(module) == before
    module.write_text('def step(x):\n    """Why."""\n    return x + 2\n')
    assert code_hash(module) != before
    config = tmp_path / "config.yaml"
    config.write_text("# measured: 0.350\nsteps: 150\n")
    with_config = code_hash(config)
    config.write_text("# measured: 0.41\nsteps: 150\n")
    assert code_hash(config) == with_config
    config.write_text("steps: 151\n")
    assert code_hash(config) != with_config


HARNESS = '''"""The suite runner."""
from .config import ESConfig
from ..executors import run_jobs


def run(budget):
    return run_jobs(ESConfig(budget=budget))
'''


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_moved_file_keeps_its_hash_and_its_entry_finds_it(tmp_path):
    old = tmp_path / "hf_ext" / "companion" / "es" / "coco.py"
    _write(old, HARNESS)
    code = {"hf_ext/companion/es/coco.py": code_hash(old)}
    assert changed_code(tmp_path, code) == {}
    old.unlink()  # moved to another package: its relative imports become absolute ones, its docstring says so
    moved = HARNESS.replace("The suite runner.", "The suite runner, apart from the ES.")
    moved = moved.replace("from .config", "from hf_ext.companion.es.config").replace("..executors", "hf_ext.executors")
    _write(tmp_path / "benchmarks" / "coco" / "coco.py", moved)
    _hashes_under.cache_clear()
    assert changed_code(tmp_path, code) == {}


def test_an_importer_pointed_at_a_moved_file_keeps_its_hash(tmp_path):
    recipe = tmp_path / "recipe.py"
    recipe.write_text("import numpy as np\nfrom hf_ext.companion.es import ESConfig, run\n\nrun(ESConfig(np.pi))\n")
    before = code_hash(recipe)
    recipe.write_text(
        "import numpy as np\nfrom benchmarks.coco import run\nfrom hf_ext.companion.es.config import ESConfig\n\n"
        "run(ESConfig(np.pi))\n"
    )
    assert code_hash(recipe) == before
    recipe.write_text(
        "import numpy as np\nfrom hf_ext.companion.es import ESConfig, run_fast as run\n\nrun(ESConfig(np.pi))\n"
    )
    assert code_hash(recipe) != before  # another function under the same name
    recipe.write_text("import numpy as np\nfrom scipy.constants import ESConfig, run\n\nrun(ESConfig(np.pi))\n")
    assert code_hash(recipe) != before  # another package's names are its own


def test_an_edit_to_the_numerics_is_caught_at_its_path_and_after_a_move(tmp_path):
    path = tmp_path / "hf_ext" / "companion" / "es" / "coco.py"
    _write(path, HARNESS)
    code = {"hf_ext/companion/es/coco.py": code_hash(path)}
    path.write_text(HARNESS.replace("budget=budget", "budget=2 * budget"))
    assert changed_code(tmp_path, code) == {"hf_ext/companion/es/coco.py": code_hash(path)}
    path.unlink()
    _write(tmp_path / "benchmarks" / "coco.py", HARNESS.replace("budget=budget", "budget=2 * budget"))
    _hashes_under.cache_clear()
    assert changed_code(tmp_path, code) == {"hf_ext/companion/es/coco.py": None}


def test_a_file_at_its_path_is_not_excused_by_a_copy_elsewhere(tmp_path):
    path = tmp_path / "weights.py"
    _write(path, "SCALE = 1.0\n")
    code = {"weights.py": code_hash(path)}
    _write(tmp_path / "old" / "weights.py", "SCALE = 1.0\n")
    path.write_text("SCALE = 2.0\n")
    _hashes_under.cache_clear()
    assert changed_code(tmp_path, code) == {"weights.py": code_hash(path)}


def test_a_number_is_stated_only_where_it_stands_whole():
    assert measure.states("accuracy 0.156 -> 0.750.", "0.156")
    assert measure.states("accuracy 0.156 -> 0.750.", "0.750")
    assert measure.states("| 14.1 | 1.47 |", "| 14.1 | 1.47 |")
    assert measure.states("(1.2-1.7% above)", "1.2")
    for longer in ("0.1567", "10.156", "0.156e-3", "0.156.2"):
        assert not measure.states(f"accuracy {longer}", "0.156"), longer
    assert not measure.states("0.750", "0.75")


def test_a_printed_number_is_found_at_the_recorded_precision():
    output = 'step 400\n{"agzo": 0.15625, "mezo": 0.4634}\n'
    assert measure.printed_as(output, "0.156") == ("0.15625", '{"agzo": 0.15625, "mezo": 0.4634}')
    assert measure.printed_as("x" * 100 + " 0.75", "0.750") == ("0.75", "x" * 59 + " 0.75")
    assert measure.printed_as(output, "0.463")[0] == "0.4634"
    assert measure.printed_as(output, "0.750") is None


def test_a_command_list_splices_another_entrys_command():
    entries = yaml.safe_load(
        "- {name: a, command: &a [python one.py, python two.py]}\n- {name: b, command: [*a, python three.py]}\n"
    )
    assert measure.command_lines(entries[1]["command"]) == ["python one.py", "python two.py", "python three.py"]
    assert measure.command_lines("make demo") == ["make demo"]
