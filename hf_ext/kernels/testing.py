"""Test helpers for Triton kernels: run them on CUDA, or on CPU under ``TRITON_INTERPRET=1``.

The interpreter must be switched on before Triton is first imported; the test suite's
``conftest.py`` does so when no GPU is present.
"""

import os
import sys
from collections.abc import Callable

import torch

from ._dispatch import triton_available


def kernel_device() -> torch.device:
    """CUDA when present, else the CPU (where Triton runs only under the interpreter)."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


KERNEL_PATHS = ("reference", "triton")


def kernel_variant(kernel: Callable, path: str) -> Callable:
    """The ``path`` implementation of a public kernel, found by the naming rule of :mod:`hf_ext.kernels`.

    Kernel ``x`` has ``x_reference`` and ``x_triton`` in its own module; an in-place kernel keeps its
    trailing underscore last, as torch's do (``seeded_perturb_`` -> ``seeded_perturb_reference_``).
    """
    if path not in KERNEL_PATHS:
        raise ValueError(f"kernel_variant: `path` must be one of {KERNEL_PATHS}, got {path!r}")
    name = kernel.__name__
    variant = f"{name[:-1]}_{path}_" if name.endswith("_") else f"{name}_{path}"
    module = sys.modules[kernel.__module__]
    if not hasattr(module, variant):
        raise AttributeError(f"kernel_variant: {kernel.__module__} has no `{variant}` for kernel `{name}`")
    return getattr(module, variant)


def triton_runnable() -> tuple[bool, str]:
    """Whether a Triton kernel can run here, and if not, why (a pytest skip reason)."""
    if not triton_available():
        return False, "Triton is not importable"
    if not torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
        return False, "no CUDA and TRITON_INTERPRET=1 was not set before Triton was imported"
    return True, ""


def assert_same_distribution(sample: torch.Tensor, reference: torch.Tensor, mean_tol: float, std_tol: float) -> None:
    """For kernels that draw random numbers inside: the two samples' moments agree.

    A Triton kernel's Philox stream and torch's generator differ value by value, so
    randomised kernels are checked against their reference in distribution.
    """
    sample, reference = sample.double().flatten(), reference.double().flatten()
    mean_gap = (sample.mean() - reference.mean()).abs().item()
    std_gap = (sample.std() - reference.std()).abs().item()
    assert mean_gap <= mean_tol, f"means differ by {mean_gap:.4g} (> {mean_tol})"
    assert std_gap <= std_tol, f"standard deviations differ by {std_gap:.4g} (> {std_tol})"


def assert_close_to_reference(
    kernel_output: torch.Tensor, reference_output: torch.Tensor, atol: float, rtol: float
) -> None:
    """For deterministic kernels: elementwise agreement within explicit tolerances."""
    torch.testing.assert_close(kernel_output.cpu(), reference_output.cpu(), atol=atol, rtol=rtol)
