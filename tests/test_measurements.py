"""Documented numbers stay tied to the code that printed them (docs/measurements.yaml, issue 42).

The demo's AGZO accuracy went stale when the range finder changed and nobody measured it again. Each entry of
docs/measurements.yaml names a command, the numbers it printed, the files that state them and the code they
depend on, with that code's fingerprint when they were measured: a change to the code (comments and docstrings
aside) fails here until the numbers are measured again and the fingerprint renewed. The fingerprint hashes
the code as Python sees it (the syntax tree without docstrings; YAML as parsed data), so rewording a comment
keeps it.
"""

import ast
import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
                if isinstance(body[0].value.value, str):
                    node.body = body[1:] or [ast.Pass()]
    return tree


def canonical_text(path: Path) -> str:
    """What of ``path`` can change a result: a Python file's syntax tree without docstrings, a YAML file's data."""
    text = path.read_text()
    if path.suffix == ".py":
        return ast.dump(_without_docstrings(ast.parse(text)))
    if path.suffix in (".yaml", ".yml"):
        return json.dumps(yaml.safe_load(text), sort_keys=True)
    return text


def code_files(root: Path, patterns: Iterable[str]) -> list[Path]:
    """The files ``patterns`` (globs relative to ``root``) name, sorted; ``ValueError`` for a pattern naming none."""
    files = set()
    for pattern in patterns:
        matched = [path for path in root.glob(pattern) if path.is_file() and "__pycache__" not in path.parts]
        if not matched:
            raise ValueError(f"code pattern {pattern!r} matches no file under {root}")
        files.update(matched)
    return sorted(files)


def code_fingerprint(root: Path, patterns: Iterable[str]) -> str:
    """SHA-256 (first 16 hex digits) over the canonical text of every file ``patterns`` name, with their paths."""
    digest = hashlib.sha256()
    for path in code_files(root, patterns):
        digest.update(f"{path.relative_to(root).as_posix()}\n{canonical_text(path)}\n".encode())
    return digest.hexdigest()[:16]


ROOT = Path(__file__).resolve().parents[1]
MEASUREMENTS = yaml.safe_load((ROOT / "docs" / "measurements.yaml").read_text())


@pytest.mark.parametrize("entry", MEASUREMENTS, ids=[entry["name"] for entry in MEASUREMENTS])
def test_a_documented_number_was_measured_on_the_code_as_it_is(entry):
    fingerprint = code_fingerprint(ROOT, entry["code"])
    assert fingerprint == entry["fingerprint"], (
        f"{entry['name']}: the code behind {entry['numbers']} changed since they were measured. Run "
        f"`{entry['command']}`, update the numbers in {entry['stated_in']}, and set this entry's fingerprint in "
        f"docs/measurements.yaml to {fingerprint}."
    )


@pytest.mark.parametrize("entry", MEASUREMENTS, ids=[entry["name"] for entry in MEASUREMENTS])
def test_every_file_states_the_measured_numbers(entry):
    for name in entry["stated_in"]:
        text = (ROOT / name).read_text()
        missing = [number for number in entry["numbers"] if str(number) not in text]
        assert not missing, f"{entry['name']}: {name} does not state {missing}"


def test_the_fingerprint_follows_code_not_comments_or_docstrings(tmp_path):
    module = tmp_path / "step.py"
    module.write_text('def step(x):\n    """Why."""\n    return x + 1  # one\n')
    before = code_fingerprint(tmp_path, ["*.py"])
    module.write_text('def step(x):\n    """Why, reworded."""\n    return x + 1  # reworded comment\n')
    assert code_fingerprint(tmp_path, ["*.py"]) == before
    module.write_text('def step(x):\n    """Why."""\n    return x + 2\n')
    assert code_fingerprint(tmp_path, ["*.py"]) != before
    config = tmp_path / "config.yaml"
    config.write_text("# measured: 0.350\nsteps: 150\n")
    with_config = code_fingerprint(tmp_path, ["*.py", "*.yaml"])
    config.write_text("# measured: 0.41\nsteps: 150\n")
    assert code_fingerprint(tmp_path, ["*.py", "*.yaml"]) == with_config
    config.write_text("steps: 151\n")
    assert code_fingerprint(tmp_path, ["*.py", "*.yaml"]) != with_config


def test_a_code_pattern_that_names_no_file_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="matches no file"):
        code_fingerprint(tmp_path, ["missing/*.py"])
