"""Triton kernels of :mod:`hf_ext.kernels.token_logprobs` (imported only when Triton is used)."""

import triton
import triton.language as tl


@triton.jit
def _write_row_grad(row_ptr, grad_row_ptr, label, lse, scale, vocab, BLOCK_V: tl.constexpr):
    """grad[c] = scale * (onehot(label)[c] - exp(logit[c] - lse)); ``grad_row_ptr`` may be ``row_ptr``."""
    for start in range(0, vocab, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        mask = cols < vocab
        x = tl.load(row_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        grad = scale * (tl.where(cols == label, 1.0, 0.0) - tl.exp(x - lse))
        tl.store(grad_row_ptr + cols, grad.to(grad_row_ptr.dtype.element_ty), mask=mask)


@triton.jit
def token_logprobs_kernel(
    logits_ptr,
    labels_ptr,
    logprobs_ptr,
    lse_ptr,
    vocab,
    stride_row,
    ignore_index,
    WRITE_GRAD: tl.constexpr,
    BLOCK_V: tl.constexpr,
):
    """One row per program: online log-sum-exp over vocabulary blocks, then the label's logit.

    With ``WRITE_GRAD`` a second pass over the row overwrites the logits with d logprob / d logits
    (0 on ignored rows), so training needs no buffer of the logits' size.
    """
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
    if WRITE_GRAD:
        _write_row_grad(base, base, label, lse, tl.where(valid, 1.0, 0.0), vocab, BLOCK_V)


@triton.jit
def token_logprobs_backward_kernel(
    logits_ptr,
    labels_ptr,
    lse_ptr,
    grad_output_ptr,
    grad_ptr,
    vocab,
    stride_row,
    stride_grad_row,
    ignore_index,
    BLOCK_V: tl.constexpr,
):
    """One row per program: grad = grad_output * (onehot(label) - softmax(logits)), 0 on ignored rows."""
    row = tl.program_id(0).to(tl.int64)
    label = tl.load(labels_ptr + row)
    scale = tl.where(label != ignore_index, tl.load(grad_output_ptr + row).to(tl.float32), 0.0)
    _write_row_grad(
        logits_ptr + row * stride_row,
        grad_ptr + row * stride_grad_row,
        label,
        tl.load(lse_ptr + row),
        scale,
        vocab,
        BLOCK_V,
    )
