"""Triton kernels of :mod:`hf_ext.kernels.lowrank` (imported only when Triton is used)."""

import triton
import triton.language as tl

from ._perturb_triton import seeded_noise, seeded_noise_at


@triton.jit
def seeded_normal_kernel(out_ptr, numel, seed, BLOCK_SIZE: tl.constexpr):
    first = tl.program_id(0) * BLOCK_SIZE
    offsets = first + tl.arange(0, BLOCK_SIZE)
    tl.store(out_ptr + offsets, seeded_noise(seed, first, BLOCK_SIZE), mask=offsets < numel)


@triton.jit
def lowrank_perturb_kernel(
    weight_ptr,
    basis_ptr,
    rows,
    cols,
    rank,
    first_row,
    seed,
    scale,
    stride_w_row,
    stride_b_row,
    stride_b_col,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    BLOCK_RANK: tl.constexpr,
):
    """weight[rows, cols] += scale * N[rows, rank] @ basis[cols, rank]^T, N drawn in-kernel.

    N[i, k] is ``z[(first_row + i) * rank + k]`` of ``seeded_noise_at``: the same numbers ``seeded_normal_kernel``
    writes for a row-major (rows, rank) tensor, so a hook that materialises N agrees with this update; a block of
    rows starting at ``first_row`` (a shard) gets the whole weight's rows of N.
    """
    row = tl.program_id(0) * BLOCK_ROWS + tl.arange(0, BLOCK_ROWS)
    col = tl.program_id(1) * BLOCK_COLS + tl.arange(0, BLOCK_COLS)
    k = tl.arange(0, BLOCK_RANK)
    row_ok, col_ok, k_ok = row < rows, col < cols, k < rank
    noise = seeded_noise_at(seed, (first_row + row[:, None]) * rank + k[None, :])
    noise = tl.where(row_ok[:, None] & k_ok[None, :], noise, 0.0)
    basis = tl.load(
        basis_ptr + col[None, :] * stride_b_row + k[:, None] * stride_b_col,
        mask=k_ok[:, None] & col_ok[None, :],
        other=0.0,
    )
    update = tl.dot(noise, basis.to(tl.float32), input_precision="ieee")
    mask = row_ok[:, None] & col_ok[None, :]
    w_ptrs = weight_ptr + row[:, None] * stride_w_row + col[None, :]
    weight = tl.load(w_ptrs, mask=mask).to(tl.float32)
    tl.store(w_ptrs, (weight + scale * update).to(weight_ptr.dtype.element_ty), mask=mask)
