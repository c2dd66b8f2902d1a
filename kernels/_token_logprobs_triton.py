"""Triton kernel of :mod:`hf_ext.kernels.token_logprobs` (imported only when Triton is used)."""

import triton
import triton.language as tl


@triton.jit
def token_logprobs_kernel(
    logits_ptr, labels_ptr, logprobs_ptr, lse_ptr, vocab, stride_row, ignore_index, BLOCK_V: tl.constexpr
):
    """One row per program: online log-sum-exp over vocabulary blocks, then the label's logit."""
    row = tl.program_id(0).to(tl.int64)
    base = logits_ptr + row * stride_row
    running_max = tl.full([BLOCK_V], -1e30, tl.float32)  # finite, so exp(max - new_max) is never nan
    running_sum = tl.zeros([BLOCK_V], tl.float32)
    for start in range(0, vocab, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        x = tl.load(base + cols, mask=cols < vocab, other=-float("inf")).to(tl.float32)
        new_max = tl.maximum(running_max, x)
        running_sum = running_sum * tl.exp(running_max - new_max) + tl.exp(x - new_max)
        running_max = new_max
    row_max = tl.max(running_max, 0)
    lse = row_max + tl.log(tl.sum(running_sum * tl.exp(running_max - row_max), 0))
    label = tl.load(labels_ptr + row)
    valid = label != ignore_index
    target = tl.load(base + tl.where(valid, label, 0)).to(tl.float32)
    tl.store(logprobs_ptr + row, tl.where(valid, target - lse, 0.0))
    tl.store(lse_ptr + row, lse)
