import configparser
import email.parser
import importlib.metadata
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _setup_cfg() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    return config


def _packages_in_setup_cfg() -> set[str]:
    return set(_setup_cfg()["options"]["packages"].split())


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


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    """hf-ext's wheel, built as ``pip wheel .`` builds it (a few seconds)."""
    folder = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(folder)]
    subprocess.run([*command, str(REPO)], check=True)
    (path,) = folder.glob("hf_ext-*.whl")
    return zipfile.ZipFile(path)


@pytest.mark.slow
def test_wheel_installs_kernels_and_recipes_only_under_hf_ext(wheel):
    names = wheel.namelist()
    assert "hf_ext/kernels/__init__.py" in names and "hf_ext/kernels/_perturb_triton.py" in names
    assert "hf_ext/recipes/configs/sft_arithmetic.yaml" in names
    assert "hf_ext/recipes/accelerate/cpu_2proc.yaml" in names
    tops = {name.split("/")[0] for name in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"hf_ext"}


def test_wheel_carries_every_module_config_the_type_marker_and_the_license(wheel):
    """What an installed hf-ext needs: its modules, the recipes' and accelerate's configs, ``py.typed`` for mypy and
    pyright, and the license the metadata names."""
    installed = {("hf_ext", REPO / "hf_ext"), ("hf_ext/recipes", REPO / "recipes")}
    expected = {"hf_ext/py.typed"}
    for prefix, folder in installed:
        files = [*folder.rglob("*.py"), *folder.glob("configs/*.yaml"), *folder.glob("accelerate/*.yaml")]
        expected |= {f"{prefix}/{path.relative_to(folder).as_posix()}" for path in files}
    names = set(wheel.namelist())
    assert expected - names == set()
    (license_file,) = [name for name in names if name.endswith(".dist-info/licenses/LICENSE")]
    assert wheel.read(license_file) == (REPO / "LICENSE").read_bytes()
    assert "Apache License" in (REPO / "LICENSE").read_text(encoding="utf-8")


def test_wheel_metadata_has_the_models_extra_with_setup_cfgs_pins(wheel):
    (metadata,) = [name for name in wheel.namelist() if name.endswith(".dist-info/METADATA")]
    headers = email.parser.Parser().parsestr(wheel.read(metadata).decode(), headersonly=True)
    assert "models" in headers.get_all("Provides-Extra")
    models = [req.partition(";")[0] for req in headers.get_all("Requires-Dist") if 'extra == "models"' in req]
    assert models == _setup_cfg()["options.extras_require"]["models"].split() != []
    assert headers["License"] == "Apache-2.0" and headers.get_all("License-File") == ["LICENSE"]


def test_makefile_installs_the_models_extra():
    """setup.cfg's ``models`` extra is the one home of the asset pins: the Makefile installs what it lists."""
    command = ["make", "-s", "--no-print-directory", "--eval", "print-assets: ; @echo $(ASSETS)", "print-assets"]
    printed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert printed.split() == _setup_cfg()["options.extras_require"]["models"].split() != []


def test_the_docs_pin_the_model_packages_as_the_models_extra_does():
    pins = _setup_cfg()["options.extras_require"]["models"].split()
    docs = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
    for pin in pins:
        name = pin.partition("==")[0]
        found = {(doc.name, hit) for doc in docs for hit in re.findall(rf"{name}==[\w.]+", doc.read_text())}
        assert {(doc, hit) for doc, hit in found if hit != pin} == set()
