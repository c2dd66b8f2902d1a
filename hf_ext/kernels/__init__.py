"""Triton kernels with plain-torch references.

Every kernel has a reference with the same signature; the public function dispatches to
Triton when the tensors are on CUDA and Triton imports, and to the reference otherwise.
"""

from ._dispatch import triton_available, use_triton
from .binary_pack import (
    pack_signs,
    pack_signs_reference,
    pack_signs_triton,
    packed_binary_matmul,
    packed_binary_matmul_reference,
    packed_binary_matmul_triton,
    unpack_signs,
    unpack_signs_reference,
    unpack_signs_triton,
)
from .depth_smooth import depth_smooth, depth_smooth_reference, depth_smooth_triton
from .lowrank import (
    lowrank_perturb_,
    lowrank_perturb_reference_,
    lowrank_perturb_triton_,
    seeded_normal,
    seeded_normal_reference,
    seeded_normal_triton,
)
from .perturb import seeded_perturb_, seeded_perturb_reference_, seeded_perturb_triton_
from .token_logprobs import token_logprobs, token_logprobs_reference, token_logprobs_triton

__all__ = [
    "depth_smooth",
    "depth_smooth_reference",
    "depth_smooth_triton",
    "lowrank_perturb_",
    "lowrank_perturb_reference_",
    "lowrank_perturb_triton_",
    "pack_signs",
    "pack_signs_reference",
    "pack_signs_triton",
    "packed_binary_matmul",
    "packed_binary_matmul_reference",
    "packed_binary_matmul_triton",
    "seeded_normal",
    "seeded_normal_reference",
    "seeded_normal_triton",
    "seeded_perturb_",
    "seeded_perturb_reference_",
    "seeded_perturb_triton_",
    "token_logprobs",
    "token_logprobs_reference",
    "token_logprobs_triton",
    "triton_available",
    "unpack_signs",
    "unpack_signs_reference",
    "unpack_signs_triton",
    "use_triton",
]
