"""Every ``examples/*.py`` runs as written on a CPU, and every Python snippet in the docs is one of them.

The examples are the documentation's code: a snippet that lacks an import, or that needs a GPU
because TRL defaults to bf16, fails here instead of in a new user's hands.
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.py"))
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# Examples that load no pretrained model and train nothing (seconds); every other example is slow.
FAST = {
    "bo_robust.py",
    "executors_local.py",
    "pem_additive_noise.py",
    "portfolio_selection.py",
    "seeded_perturb.py",
    "set_cover_lns.py",
    "single_index_regression.py",
    "token_logprobs_training.py",
}
# Examples that need an optional package (setup.cfg's [cluster] extra, which `make install` installs): skipped,
# naming it, where it is missing. Starting a Dask cluster or a Ray instance takes seconds, so both are slow.
OPTIONAL = {"executors_dask.py": "distributed", "executors_ray.py": "ray"}


def _example_params():
    for path in EXAMPLES:
        marks = () if path.name in FAST else (pytest.mark.slow,)
        yield pytest.param(path, id=path.stem, marks=marks)


@pytest.mark.parametrize("example", _example_params())
def test_example_runs_on_a_cpu(example, tmp_path):
    if example.name in OPTIONAL:
        package = OPTIONAL[example.name]
        pytest.importorskip(package, reason=f"{example.name} needs `{package}` (the [cluster] extra)")
    env = os.environ | {"HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, str(example)]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert result.stdout.strip(), f"{example.name} should end by printing what it did"


def test_examples_exist_and_shadow_no_module():
    # `python examples/x.py` puts examples/ first on sys.path: an example named like a module (`kernels`,
    # which transformers probes for) would replace that module in every example run.
    assert EXAMPLES
    shadowing = [path.name for path in EXAMPLES if importlib.util.find_spec(path.stem) is not None]
    assert not shadowing, f"rename these examples, they shadow importable modules: {shadowing}"


def _python_snippets(markdown: str) -> list[list[str]]:
    blocks = re.findall(r"^```python\n(.*?)^```", markdown, flags=re.MULTILINE | re.DOTALL)
    return [block.strip("\n").splitlines() for block in blocks]


def _is_excerpt(lines: list[str], of: list[str]) -> bool:
    return any(of[start : start + len(lines)] == lines for start in range(len(of) - len(lines) + 1))


def test_every_python_snippet_in_the_docs_is_an_example_or_an_excerpt_of_one():
    examples = [path.read_text().splitlines() for path in EXAMPLES]
    stray = [
        f"{doc.relative_to(REPO)}: {snippet[0]!r}"
        for doc in DOCS
        for snippet in _python_snippets(doc.read_text())
        if not any(_is_excerpt(snippet, example) for example in examples)
    ]
    assert not stray, "snippets that are no examples/*.py file (copy the example into the docs):\n" + "\n".join(stray)
