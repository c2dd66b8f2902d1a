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


@pytest.mark.parametrize("cwd", [REPO, Path("/")], ids=["repo-root", "elsewhere"])
def test_top_level_kernels_is_not_importable(cwd):
    result = subprocess.run([sys.executable, "-c", "import kernels"], cwd=cwd, capture_output=True, text=True)
    assert result.returncode != 0
    ok = subprocess.run([sys.executable, "-c", "import hf_ext.kernels"], cwd=cwd, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr


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
