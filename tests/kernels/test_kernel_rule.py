"""The kernel rule: ``x.py`` holds ``x``, ``x_reference`` and ``x_triton`` (with any autograd), and
``_x_triton.py`` only the ``@triton.jit`` code they launch."""

import ast
from pathlib import Path

import pytest

import hf_ext.kernels as kernels
from hf_ext.kernels.testing import KERNEL_PATHS, kernel_variant

KERNELS_DIR = Path(kernels.__file__).parent
PUBLIC_KERNELS = sorted(
    name
    for name in kernels.__all__
    if not any(part in name for part in ("_reference", "_triton")) and name not in ("triton_available", "use_triton")
)


def _is_triton_jit(decorator: ast.expr) -> bool:
    return ast.unparse(decorator) in ("triton.jit", "jit")


@pytest.mark.parametrize("name", PUBLIC_KERNELS)
@pytest.mark.parametrize("path", KERNEL_PATHS)
def test_every_public_kernel_has_both_paths_next_to_it(name, path):
    kernel = getattr(kernels, name)
    variant = kernel_variant(kernel, path)
    assert variant.__module__ == kernel.__module__, f"{variant.__name__} must live in {kernel.__module__}"
    assert getattr(kernels, variant.__name__) is variant, f"hf_ext.kernels must export {variant.__name__}"


@pytest.mark.parametrize("source", sorted(KERNELS_DIR.glob("_*_triton.py")), ids=lambda p: p.name)
def test_triton_files_hold_only_jit_functions(source):
    public_module = KERNELS_DIR / f"{source.stem.removeprefix('_').removesuffix('_triton')}.py"
    assert public_module.exists(), f"{source.name} has no {public_module.name} to hold its reference and dispatch"
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Import | ast.ImportFrom) or (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)  # the docstring
        ):
            continue
        assert isinstance(node, ast.FunctionDef) and any(map(_is_triton_jit, node.decorator_list)), (
            f"{source.name}:{node.lineno}: only @triton.jit functions belong here, found `{ast.unparse(node)[:60]}`"
        )


@pytest.mark.parametrize(
    "source", sorted(p for p in KERNELS_DIR.glob("*.py") if not p.name.endswith("_triton.py")), ids=lambda p: p.name
)
def test_public_files_hold_no_jit_code(source):
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.FunctionDef):
            assert not any(map(_is_triton_jit, node.decorator_list)), (
                f"{source.name}:{node.lineno}: move @triton.jit `{node.name}` into _{source.stem}_triton.py"
            )
