"""Triton kernels with plain-torch references, installed as ``hf_ext.kernels``.

Every kernel has a reference with the same signature; the public function dispatches to
Triton when the tensors are on CUDA and Triton imports, and to the reference otherwise.
"""

if __name__ != "hf_ext.kernels":
    # Imported as a top-level `kernels` from a source checkout: that name belongs to the
    # Hugging Face `kernels` package, which transformers probes for.
    raise ImportError(
        "hf-ext's kernels/ folder is the package `hf_ext.kernels`; import it under that name"
    )

from ._dispatch import triton_available, use_triton
from .perturb import seeded_perturb_, seeded_perturb_reference_, seeded_perturb_triton_

__all__ = [
    "seeded_perturb_",
    "seeded_perturb_reference_",
    "seeded_perturb_triton_",
    "triton_available",
    "use_triton",
]
