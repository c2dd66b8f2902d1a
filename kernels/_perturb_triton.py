"""Triton kernel of :mod:`hf_ext.kernels.perturb` (imported only when Triton is used)."""

import triton
import triton.language as tl


@triton.jit
def seeded_perturb_kernel(param_ptr, numel, seed, scale, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < numel
    value = tl.load(param_ptr + offsets, mask=mask).to(tl.float32)
    noise = tl.randn(seed, offsets)
    tl.store(param_ptr + offsets, (value + scale * noise).to(param_ptr.dtype.element_ty), mask=mask)
