"""Per-token log-probability of the labels, ``log_softmax(logits)[label]``, chunked over the vocabulary.

Preference losses need the log-probability of each response token. ``log_softmax`` followed by
``gather`` materialises a full fp32 ``(tokens x vocab)`` tensor (and keeps it for backward); here
the forward keeps only a running log-sum-exp per row and the backward rebuilds the softmax one
vocabulary chunk at a time, so the extra memory is ``tokens x chunk`` instead of
``tokens x vocab``. The Triton kernel does the forward in one pass over each row.

Not TRL's ``selective_log_softmax``: off CUDA it returns the logits' dtype (bf16 log-probs from bf16
logits) and keeps a full-vocabulary log-softmax per sequence for half-precision backward, and it wants
in-range labels (``-100`` must be masked by hand); this one always reduces to fp32, takes
``ignore_index``, and bounds the extra memory on every device.
"""

import torch

from ._dispatch import use_triton

DEFAULT_CHUNK = 4096
_BLOCK_V = 1024


def _logsumexp_reference(logits: torch.Tensor, chunk_size: int) -> torch.Tensor:
    lse = torch.full(logits.shape[:1], -float("inf"), device=logits.device, dtype=torch.float32)
    for start in range(0, logits.shape[1], chunk_size):
        chunk = logits[:, start : start + chunk_size].float()
        peak = chunk.amax(1)
        peak = torch.where(peak.isfinite(), peak, torch.zeros_like(peak))  # a row of -inf must not give nan
        # One chunk-sized buffer (torch.logsumexp would allocate several).
        chunk_lse = torch.sub(chunk, peak.unsqueeze(1)).exp_().sum(1).log_().add_(peak)
        lse = torch.logaddexp(lse, chunk_lse)
    return lse


def _forward_reference(logits, labels, ignore_index, chunk_size):
    lse = _logsumexp_reference(logits, chunk_size)
    valid = labels != ignore_index
    target = logits.gather(1, labels.clamp(min=0).masked_fill(~valid, 0).unsqueeze(1)).squeeze(1).float()
    return torch.where(valid, target - lse, torch.zeros_like(lse)), lse


def _forward_triton(logits, labels, ignore_index, chunk_size):
    from ._token_logprobs_triton import token_logprobs_kernel

    rows, vocab = logits.shape
    logprobs = torch.empty(rows, device=logits.device, dtype=torch.float32)
    lse = torch.empty_like(logprobs)
    if rows:
        token_logprobs_kernel[(rows,)](
            logits, labels, logprobs, lse, vocab, logits.stride(0), ignore_index, BLOCK_V=_BLOCK_V
        )
    return logprobs, lse


class _TokenLogProbs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, labels, ignore_index, chunk_size, forward_fn):
        logprobs, lse = forward_fn(logits, labels, ignore_index, chunk_size)
        ctx.save_for_backward(logits, labels, lse)
        ctx.ignore_index, ctx.chunk_size = ignore_index, chunk_size
        return logprobs

    @staticmethod
    def backward(ctx, grad_output):
        logits, labels, lse = ctx.saved_tensors
        grad = grad_output.float() * (labels != ctx.ignore_index)
        grad_logits = torch.empty_like(logits)
        for start in range(0, logits.shape[1], ctx.chunk_size):
            chunk = logits[:, start : start + ctx.chunk_size].float()
            # d(logit[label] - lse)/d logits = onehot(label) - softmax(logits), built in one chunk-sized buffer
            grad_chunk = torch.sub(chunk, lse.unsqueeze(1)).exp_().mul_(-grad.unsqueeze(1))
            in_chunk = (labels >= start) & (labels < start + chunk.shape[1])
            rows = in_chunk.nonzero().squeeze(1)
            grad_chunk[rows, labels[rows] - start] += grad[rows]
            grad_logits[:, start : start + chunk.shape[1]] = grad_chunk.to(logits.dtype)
        return grad_logits, None, None, None, None


def _check(logits: torch.Tensor, labels: torch.Tensor, chunk_size: int) -> None:
    if logits.shape[:-1] != labels.shape:
        raise ValueError(
            f"token_logprobs: `labels` must have the shape of `logits` without its last dimension, got "
            f"{tuple(labels.shape)} for logits {tuple(logits.shape)}"
        )
    if not logits.is_floating_point():
        raise TypeError(f"token_logprobs: `logits` must be floating, got {logits.dtype}")
    if chunk_size < 1:
        raise ValueError(f"token_logprobs: `chunk_size` must be >= 1, got {chunk_size}")


def _apply(logits, labels, ignore_index, chunk_size, forward_fn) -> torch.Tensor:
    _check(logits, labels, chunk_size)
    flat_logits = logits.reshape(-1, logits.shape[-1])
    if flat_logits.stride(-1) != 1:
        flat_logits = flat_logits.contiguous()
    flat = _TokenLogProbs.apply(flat_logits, labels.reshape(-1), ignore_index, chunk_size, forward_fn)
    return flat.reshape(labels.shape)


def token_logprobs_reference(
    logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100, chunk_size: int = DEFAULT_CHUNK
) -> torch.Tensor:
    """Reference path of :func:`token_logprobs` (chunked torch)."""
    return _apply(logits, labels, ignore_index, chunk_size, _forward_reference)


def token_logprobs_triton(
    logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100, chunk_size: int = DEFAULT_CHUNK
) -> torch.Tensor:
    """Triton path of :func:`token_logprobs` (CUDA, or CPU under ``TRITON_INTERPRET=1``)."""
    return _apply(logits, labels, ignore_index, chunk_size, _forward_triton)


def token_logprobs(
    logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100, chunk_size: int = DEFAULT_CHUNK
) -> torch.Tensor:
    """``log_softmax(logits, -1).gather(-1, labels)`` in fp32, 0 where ``labels == ignore_index``; differentiable.

    Args:
        logits: ``(..., vocab)`` floating tensor (any float dtype; math in fp32).
        labels: ``(...)`` integer tensor of token ids.
        ignore_index: label value whose positions get log-probability 0 and no gradient.
        chunk_size: vocabulary columns materialised in fp32 at a time.
    """
    forward_fn = _forward_triton if use_triton(logits) else _forward_reference
    return _apply(logits, labels, ignore_index, chunk_size, forward_fn)
