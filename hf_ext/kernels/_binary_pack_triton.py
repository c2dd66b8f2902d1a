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
    k_per_split,
    stride_x_row,
    stride_x_col,
    stride_p_row,
    stride_p_col,
    stride_o_split,
    stride_o_row,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """out[split, m, n] = row_scale[n] * sum_{k in split} x[m, k] col_scale[k] S[n, k] (+ bias[n] in split 0).

    Each program reads its ``(BLOCK_N, BLOCK_K / 8)`` tile of packed bytes once and expands the
    bits in registers (a byte gives 8 consecutive ``k``). Axis 2 splits ``k`` (split-K): at
    decode sizes (a few rows of ``x``) it gives the GPU enough programs to stream the bits at
    full bandwidth; the splits' fp32 partial sums are added by the caller. The dot runs in
    ``x``'s dtype (fp32 exactly, fp16/bf16 on tensor cores) with an fp32 accumulator; the signs
    are exact in every dtype, so only ``x * col_scale`` is rounded, to ``x``'s dtype.
    """
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)
    outs = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    split = tl.program_id(2)
    row_ok, out_ok = rows < m, outs < n
    k_begin = split * k_per_split
    k_end = tl.minimum(k, k_begin + k_per_split)
    shifts = tl.arange(0, 8)
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for start in range(k_begin, k_end, BLOCK_K):
        ks = start + tl.arange(0, BLOCK_K)
        k_ok = ks < k_end
        x = tl.load(
            x_ptr + rows[:, None] * stride_x_row + ks[None, :] * stride_x_col,
            mask=row_ok[:, None] & k_ok[None, :],
            other=0.0,
        )
        col_scale = tl.load(col_scale_ptr + ks, mask=k_ok, other=0.0).to(tl.float32)
        a = (x.to(tl.float32) * col_scale[None, :]).to(x_ptr.dtype.element_ty)  # 0 past k_end
        byte_index = start // 8 + tl.arange(0, BLOCK_K // 8)
        byte = tl.load(
            packed_ptr + outs[None, :] * stride_p_row + byte_index[:, None] * stride_p_col,
            mask=(byte_index < (k_end + 7) // 8)[:, None] & out_ok[None, :],
            other=0,
        ).to(tl.int32)
        bits = tl.reshape((byte[:, None, :] >> shifts[None, :, None]) & 1, [BLOCK_K, BLOCK_N])
        signs = tl.where(bits != 0, 1.0, -1.0).to(x_ptr.dtype.element_ty)
        acc = tl.dot(a, signs, acc, input_precision="ieee")
    acc *= tl.load(row_scale_ptr + outs, mask=out_ok, other=0.0).to(tl.float32)[None, :]
    if bias_ptr is not None:
        acc += tl.where(split == 0, tl.load(bias_ptr + outs, mask=out_ok, other=0.0).to(tl.float32), 0.0)[None, :]
    mask = row_ok[:, None] & out_ok[None, :]
    out_ptrs = out_ptr + split * stride_o_split + rows[:, None] * stride_o_row + outs[None, :]
    tl.store(out_ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)
