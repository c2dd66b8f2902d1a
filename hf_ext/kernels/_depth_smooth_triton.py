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
    """out[:, cols] = offset + weights @ (stacked - offset) for one column tile, all depths at once.

    An fp32 outer-product accumulation over the source blocks ``j`` instead of ``tl.dot``: the
    mixing matrix is tiny (L <= 128), so the work is memory-bound and gains nothing from a dot,
    while the earlier fp32 ``tl.dot(..., input_precision="ieee")`` (no tensor cores, operand
    layout conversions of a whole tile) ran 12x slower than eager torch on an H200. Each row
    tile of ``stacked`` and ``offset`` is read once, in every dtype.
    """
    rows = tl.arange(0, BLOCK_DEPTH)
    cols = (tl.program_id(0) * BLOCK_WIDTH + tl.arange(0, BLOCK_WIDTH)).to(tl.int64)
    row_ok, col_ok = rows < depth, cols < width
    acc = tl.zeros([BLOCK_DEPTH, BLOCK_WIDTH], tl.float32)
    for j in range(depth):
        values = tl.load(stacked_ptr + j * width + cols, mask=col_ok, other=0.0).to(tl.float32)
        if HAS_OFFSET:
            values -= tl.load(offset_ptr + j * width + cols, mask=col_ok, other=0.0).to(tl.float32)
        mix = tl.load(weights_ptr + rows * depth + j, mask=row_ok, other=0.0)
        acc += mix[:, None] * values[None, :]
    offsets = rows[:, None].to(tl.int64) * width + cols[None, :]
    mask = row_ok[:, None] & col_ok[None, :]
    if HAS_OFFSET:
        acc += tl.load(offset_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + offsets, acc.to(out_ptr.dtype.element_ty), mask=mask)
