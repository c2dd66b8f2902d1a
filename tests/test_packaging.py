import configparser
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


# What a REPL, a notebook or `python -c` started in a clone runs first. The repository root is then
# on sys.path, where transformers' probe for Hugging Face's `kernels` finds our kernels/ folder.
IMPORTS_AT_THE_ROOT = """
import hf_ext.zo
from transformers import AutoModelForCausalLM
from transformers.utils.import_utils import is_kernels_available
import kernels
import hf_ext.kernels
assert not is_kernels_available(), "our kernels/ folder passed for Hugging Face's kernels package"
assert not hasattr(kernels, "token_logprobs"), "our kernels were imported under the top-level name"
assert hf_ext.kernels.token_logprobs
"""


def test_python_started_in_the_repository_root_imports_hf_ext_and_transformers():
    result = subprocess.run([sys.executable, "-c", IMPORTS_AT_THE_ROOT], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]


def test_python_m_pytest_collects_from_the_repository_root():
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "tests/zo/test_trainer.py"]
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def test_the_install_has_no_top_level_kernels():
    elsewhere = {"cwd": "/", "capture_output": True, "text": True}
    assert subprocess.run([sys.executable, "-c", "import kernels"], **elsewhere).returncode != 0
    result = subprocess.run([sys.executable, "-c", "import hf_ext.kernels"], **elsewhere)
    assert result.returncode == 0, result.stderr


def test_every_package_folder_is_listed_for_non_editable_installs():
    source = REPO / "hf_ext"
    folders = {".".join(("hf_ext", *p.parent.relative_to(source).parts)) for p in source.rglob("__init__.py")}
    assert folders | {"hf_ext.kernels", "hf_ext.recipes"} == _packages_in_setup_cfg()


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
