"""Triton kernels of :mod:`hf_ext.kernels.binary_pack` (imported only when Triton is used)."""

import triton
import triton.language as tl


@triton.jit
def pack_signs_kernel(
    weight_ptr,
    packed_ptr,
    rows,
    cols,
    n_bytes,
    stride_w_row,
    stride_w_col,
    stride_p_row,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_BYTES: tl.constexpr,
):
    """packed[i, k] bit j = weight[i, 8k + j] >= 0; columns past ``cols`` give 0 bits."""
    row = (tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)).to(tl.int64)
    byte = tl.program_id(1) * BLOCK_BYTES + tl.arange(0, BLOCK_BYTES)
    row_ok = row < rows
    packed = tl.zeros([BLOCK_ROWS, BLOCK_BYTES], tl.int32)
    for bit in tl.static_range(8):
        col = byte * 8 + bit
        value = tl.load(
            weight_ptr + row[:, None] * stride_w_row + col[None, :] * stride_w_col,
            mask=row_ok[:, None] & (col < cols)[None, :],
            other=-1.0,
        )
        packed |= (value >= 0).to(tl.int32) << bit
    mask = row_ok[:, None] & (byte < n_bytes)[None, :]
    tl.store(packed_ptr + row[:, None] * stride_p_row + byte[None, :], packed.to(tl.uint8), mask=mask)


@triton.jit
def unpack_signs_kernel(
    packed_ptr,
    out_ptr,
    rows,
    cols,
    stride_p_row,
    stride_p_col,
    stride_o_row,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
):
    """out[i, c] = +1 if bit (c % 8) of packed[i, c // 8] is set, else -1."""
    row = (tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)).to(tl.int64)
    col = tl.program_id(1) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    mask = (row < rows)[:, None] & (col < cols)[None, :]
    byte = tl.load(packed_ptr + row[:, None] * stride_p_row + (col // 8)[None, :] * stride_p_col, mask=mask)
    bit = (byte.to(tl.int32) >> (col % 8)[None, :]) & 1
    sign = tl.where(bit != 0, 1.0, -1.0)
    tl.store(out_ptr + row[:, None] * stride_o_row + col[None, :], sign.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def packed_binary_matmul_kernel(
    x_ptr,
    packed_ptr,
    row_scale_ptr,
    col_scale_ptr,
    bias_ptr,
    out_ptr,
    m,
    n,
    k,
    stride_x_row,
    stride_x_col,
    stride_p_row,
    stride_p_col,
    stride_o_row,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """out[m, n] = row_scale[n] * sum_k x[m, k] col_scale[k] S[n, k] (+ bias[n]), S unpacked per K tile.

    The dot runs in ``x``'s dtype (fp32 exactly, fp16/bf16 on tensor cores) with an fp32 accumulator;
    the signs are exact in every dtype, so only ``x * col_scale`` is rounded, to ``x``'s dtype.
    """
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    outs = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok, out_ok = rows < m, outs < n
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for start in range(0, k, BLOCK_K):
        ks = start + tl.arange(0, BLOCK_K)
        k_ok = ks < k
        x = tl.load(
            x_ptr + rows[:, None] * stride_x_row + ks[None, :] * stride_x_col,
            mask=row_ok[:, None] & k_ok[None, :],
            other=0.0,
        )
        col_scale = tl.load(col_scale_ptr + ks, mask=k_ok, other=0.0).to(tl.float32)
        a = (x.to(tl.float32) * col_scale[None, :]).to(x_ptr.dtype.element_ty)
        byte = tl.load(
            packed_ptr + outs[None, :] * stride_p_row + (ks // 8)[:, None] * stride_p_col,
            mask=k_ok[:, None] & out_ok[None, :],
            other=0,
        )
        bit = (byte.to(tl.int32) >> (ks % 8)[:, None]) & 1
        signs = tl.where(bit != 0, 1.0, -1.0).to(x_ptr.dtype.element_ty)
        acc = tl.dot(a, signs, acc, input_precision="ieee")
    acc *= tl.load(row_scale_ptr + outs, mask=out_ok, other=0.0).to(tl.float32)[None, :]
    if bias_ptr is not None:
        acc += tl.load(bias_ptr + outs, mask=out_ok, other=0.0).to(tl.float32)[None, :]
    mask = row_ok[:, None] & out_ok[None, :]
    tl.store(out_ptr + rows[:, None] * stride_o_row + outs[None, :], acc.to(out_ptr.dtype.element_ty), mask=mask)
