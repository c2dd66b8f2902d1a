"""The one dispatch rule: Triton when every tensor is on CUDA and Triton imports."""

import functools
import importlib.util
import os

import torch


@functools.cache
def triton_available() -> bool:
    """Whether Triton can be imported (set ``HF_EXT_DISABLE_TRITON=1`` to force the references)."""
    if os.environ.get("HF_EXT_DISABLE_TRITON") == "1":
        return False
    if importlib.util.find_spec("triton") is None:
        return False
    try:
        import triton.language  # noqa: F401
    except ImportError:
        return False
    return True


def use_triton(*tensors: torch.Tensor) -> bool:
    """True when the Triton kernel should run on these tensors."""
    return triton_available() and all(t.is_cuda for t in tensors)
