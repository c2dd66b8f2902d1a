"""Triton kernel of :mod:`hf_ext.kernels.depth_smooth` (imported only when Triton is used)."""

import triton
import triton.language as tl


@triton.jit
def depth_smooth_kernel(
    stacked_ptr,
    offset_ptr,
    weights_ptr,
    out_ptr,
    depth,
    width,
    HAS_OFFSET: tl.constexpr,
    BLOCK_DEPTH: tl.constexpr,
    BLOCK_WIDTH: tl.constexpr,
):
    """out[:, cols] = offset + weights @ (stacked - offset) for one column tile, all depths at once."""
    rows = tl.arange(0, BLOCK_DEPTH)
    cols = (tl.program_id(0) * BLOCK_WIDTH + tl.arange(0, BLOCK_WIDTH)).to(tl.int64)
    row_ok = rows < depth
    mask = row_ok[:, None] & (cols < width)[None, :]
    offsets = rows[:, None].to(tl.int64) * width + cols[None, :]
    values = tl.load(stacked_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    if HAS_OFFSET:
        base = tl.load(offset_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        values -= base
    weights = tl.load(
        weights_ptr + rows[:, None] * depth + rows[None, :], mask=row_ok[:, None] & row_ok[None, :], other=0.0
    )
    smoothed = tl.dot(weights, values, input_precision="ieee")
    if HAS_OFFSET:
        smoothed += base
    tl.store(out_ptr + offsets, smoothed.to(out_ptr.dtype.element_ty), mask=mask)
