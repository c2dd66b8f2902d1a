"""Triton kernels of :mod:`hf_ext.kernels.perturb` (imported only when Triton is used)."""

import triton
import triton.language as tl


@triton.jit
def seeded_noise(seed, first, BLOCK_SIZE: tl.constexpr):
    """Noise ``z[first : first + BLOCK_SIZE]`` (``first`` a multiple of 4): ``z[4q + c]`` is output ``c`` of
    ``randn4x(seed, q)``, so one Philox draw and two Box-Muller transforms give four normals."""
    z0, z1, z2, z3 = tl.randn4x(seed, first // 4 + tl.arange(0, BLOCK_SIZE // 4))
    return tl.interleave(tl.interleave(z0, z2), tl.interleave(z1, z3))


@triton.jit
def seeded_noise_at(seed, index):
    """``z[index]`` for any tensor of indices, the same numbers :func:`seeded_noise` gives."""
    z0, z1, z2, z3 = tl.randn4x(seed, index // 4)
    lane = index % 4
    return tl.where(lane == 0, z0, tl.where(lane == 1, z1, tl.where(lane == 2, z2, z3)))


@triton.jit
def seeded_perturb_kernel(param_ptr, numel, first, seed, scale, BLOCK_SIZE: tl.constexpr, ALIGNED: tl.constexpr):
    """param += scale * z[first:first + numel] in fp32, rounded once to the parameter's dtype: one read and one write.

    ``first`` is the flat index of ``param``'s first entry in the whole tensor it is a shard of (0 for a whole
    tensor); ``ALIGNED`` (``first`` a multiple of 4) draws four normals per Philox call.
    """
    start = tl.program_id(0) * BLOCK_SIZE
    offsets = start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < numel
    value = tl.load(param_ptr + offsets, mask=mask).to(tl.float32)
    if ALIGNED:
        noise = seeded_noise(seed, first + start, BLOCK_SIZE)
    else:
        noise = seeded_noise_at(seed, first + offsets)
    tl.store(param_ptr + offsets, (value + scale * noise).to(param_ptr.dtype.element_ty), mask=mask)
