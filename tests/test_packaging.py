import configparser
import importlib.metadata
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _packages_in_setup_cfg() -> set[str]:
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    return set(config["options"]["packages"].split())


# What a REPL, a notebook or `python -c` started in a clone runs first: the repository root is then on
# sys.path. Our kernels live in hf_ext/kernels/, so nothing there can pass for Hugging Face's `kernels`
# package (which transformers 5.25 requires and imports); a top-level kernels/ folder once did.
IMPORTS_AT_THE_ROOT = """
import hf_ext.zo
from transformers import AutoModelForCausalLM
import hf_ext.kernels
assert hf_ext.kernels.token_logprobs
"""


def test_python_started_in_the_repository_root_imports_hf_ext_and_transformers():
    result = subprocess.run([sys.executable, "-c", IMPORTS_AT_THE_ROOT], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


def test_python_m_pytest_collects_from_the_repository_root():
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/zo/test_trainer.py"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def test_no_top_level_module_of_ours_shadows_an_installed_distribution():
    """A folder at the repository root is importable from there by its bare name: none may take a name that an
    installed package uses (``kernels`` did, and broke transformers 5.25 for anyone starting Python in a clone)."""
    importable = {path.name for path in REPO.iterdir() if (path / "__init__.py").is_file()}
    importable |= {path.stem for path in REPO.glob("*.py")}
    others = {name for name, dists in importlib.metadata.packages_distributions().items() if set(dists) != {"hf-ext"}}
    assert "hf_ext" in importable and importable & others == set()


def test_every_package_folder_is_listed_for_non_editable_installs():
    source = REPO / "hf_ext"
    folders = {".".join(("hf_ext", *p.parent.relative_to(source).parts)) for p in source.rglob("__init__.py")}
    assert folders | {"hf_ext.recipes"} == _packages_in_setup_cfg()


@pytest.mark.slow
def test_wheel_installs_kernels_and_recipes_only_under_hf_ext(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
    )
    (wheel,) = tmp_path.glob("hf_ext-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "hf_ext/kernels/__init__.py" in names and "hf_ext/kernels/_perturb_triton.py" in names
    assert "hf_ext/recipes/configs/sft_arithmetic.yaml" in names
    assert "hf_ext/recipes/accelerate/cpu_2proc.yaml" in names
    tops = {name.split("/")[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"hf_ext"}
