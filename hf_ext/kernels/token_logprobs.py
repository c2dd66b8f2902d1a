"""Per-token log-probability of the labels, ``log_softmax(logits)[label]``, chunked over the vocabulary.

Preference losses need the log-probability of each response token. ``log_softmax`` followed by
``gather`` materialises a full fp32 ``(tokens x vocab)`` tensor (and keeps it for backward); here
the forward keeps only a log-sum-exp per row and the backward rebuilds the softmax from it (the
Triton kernels one row per program, the reference one vocabulary chunk at a time), so nothing
beyond the gradient itself has the logits' size. With ``overwrite_logits=True`` the gradient is
written into the logits' memory during the forward pass, so training allocates no buffer of the
logits' size at all.

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


def _forward_reference(logits, labels, ignore_index, chunk_size, write_grad):
    lse = _logsumexp_reference(logits, chunk_size)
    valid = labels != ignore_index
    target = logits.gather(1, labels.clamp(min=0).masked_fill(~valid, 0).unsqueeze(1)).squeeze(1).float()
    if write_grad:
        _grad_reference(logits, labels, lse, None, ignore_index, chunk_size, out=logits)
    return torch.where(valid, target - lse, torch.zeros_like(lse)), lse


def _grad_reference(logits, labels, lse, grad_output, ignore_index, chunk_size, out):
    """``out = grad_output * (onehot(label) - softmax(logits))``, one vocabulary chunk at a time (``out`` may be
    ``logits``); ``grad_output`` ``None`` means 1."""
    grad = (labels != ignore_index).float()
    if grad_output is not None:
        grad *= grad_output.float()
    for start in range(0, logits.shape[1], chunk_size):
        chunk = logits[:, start : start + chunk_size].float()
        # d(logit[label] - lse)/d logits = onehot(label) - softmax(logits), built in one chunk-sized buffer
        grad_chunk = torch.sub(chunk, lse.unsqueeze(1)).exp_().mul_(-grad.unsqueeze(1))
        in_chunk = (labels >= start) & (labels < start + chunk.shape[1])
        rows = in_chunk.nonzero().squeeze(1)
        grad_chunk[rows, labels[rows] - start] += grad[rows]
        out[:, start : start + chunk.shape[1]] = grad_chunk.to(out.dtype)
    return out


def _forward_triton(logits, labels, ignore_index, chunk_size, write_grad):
    from ._token_logprobs_triton import token_logprobs_kernel

    rows, vocab = logits.shape
    logprobs = torch.empty(rows, device=logits.device, dtype=torch.float32)
    lse = torch.empty_like(logprobs)
    if rows:
        token_logprobs_kernel[(rows,)](
            logits,
            labels,
            logprobs,
            lse,
            vocab,
            logits.stride(0),
            ignore_index,
            WRITE_GRAD=write_grad,
            BLOCK_V=_BLOCK_V,
        )
    return logprobs, lse


def _grad_triton(logits, labels, lse, grad_output, ignore_index, chunk_size, out):
    from ._token_logprobs_triton import token_logprobs_backward_kernel

    if logits.shape[0]:
        token_logprobs_backward_kernel[(logits.shape[0],)](
            logits,
            labels,
            lse,
            grad_output.contiguous(),
            out,
            logits.shape[1],
            logits.stride(0),
            out.stride(0),
            ignore_index,
            BLOCK_V=_BLOCK_V,
        )
    return out


_PATHS = {"reference": (_forward_reference, _grad_reference), "triton": (_forward_triton, _grad_triton)}


class _TokenLogProbs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, labels, ignore_index, chunk_size, overwrite_logits, path):
        forward_fn, ctx.grad_fn = _PATHS[path]
        logprobs, lse = forward_fn(logits, labels, ignore_index, chunk_size, overwrite_logits)
        # With overwrite_logits the logits now hold d logprob / d logits: nothing else to keep.
        ctx.save_for_backward(*((logits,) if overwrite_logits else (logits, labels, lse)))
        ctx.ignore_index, ctx.chunk_size, ctx.overwrite_logits = ignore_index, chunk_size, overwrite_logits
        return logprobs

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.overwrite_logits:
            (grad_logits,) = ctx.saved_tensors
            return grad_logits.mul_(grad_output.unsqueeze(1)), None, None, None, None, None
        logits, labels, lse = ctx.saved_tensors
        grad_logits = torch.empty_like(logits)
        ctx.grad_fn(logits, labels, lse, grad_output, ctx.ignore_index, ctx.chunk_size, out=grad_logits)
        return grad_logits, None, None, None, None, None


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


def _apply(logits, labels, ignore_index, chunk_size, overwrite_logits, path) -> torch.Tensor:
    _check(logits, labels, chunk_size)
    flat_logits = logits.reshape(-1, logits.shape[-1])
    if flat_logits.stride(-1) != 1:
        flat_logits = flat_logits.contiguous()
    overwrite_logits = overwrite_logits and torch.is_grad_enabled() and logits.requires_grad
    flat = _TokenLogProbs.apply(flat_logits, labels.reshape(-1), ignore_index, chunk_size, overwrite_logits, path)
    return flat.reshape(labels.shape)


def token_logprobs_reference(
    logits: torch.Tensor,
    labels: torch.Tensor,
    ignore_index: int = -100,
    chunk_size: int = DEFAULT_CHUNK,
    overwrite_logits: bool = False,
) -> torch.Tensor:
    """Reference path of :func:`token_logprobs` (chunked torch)."""
    return _apply(logits, labels, ignore_index, chunk_size, overwrite_logits, "reference")


def token_logprobs_triton(
    logits: torch.Tensor,
    labels: torch.Tensor,
    ignore_index: int = -100,
    chunk_size: int = DEFAULT_CHUNK,
    overwrite_logits: bool = False,
) -> torch.Tensor:
    """Triton path of :func:`token_logprobs` (CUDA, or CPU under ``TRITON_INTERPRET=1``)."""
    return _apply(logits, labels, ignore_index, chunk_size, overwrite_logits, "triton")


def token_logprobs(
    logits: torch.Tensor,
    labels: torch.Tensor,
    ignore_index: int = -100,
    chunk_size: int = DEFAULT_CHUNK,
    overwrite_logits: bool = False,
) -> torch.Tensor:
    """``log_softmax(logits, -1).gather(-1, labels)`` in fp32, 0 where ``labels == ignore_index``; differentiable.

    Args:
        logits: ``(..., vocab)`` floating tensor (any float dtype; math in fp32).
        labels: ``(...)`` integer tensor of token ids.
        ignore_index: label value whose positions get log-probability 0 and no gradient.
        chunk_size: vocabulary columns materialised in fp32 at a time (reference path and its backward).
        overwrite_logits: when the logits need a gradient and are not needed afterwards (the usual
            training loss), compute the gradient in the forward pass and store it in the logits'
            own memory, as Liger-Kernel's cross entropy does: forward + backward then allocate
            nothing of the logits' size. The logits' values are lost; autograd raises if another
            operation saved them for its backward. Ignored when no gradient is being recorded.
    """
    path = "triton" if use_triton(logits) else "reference"
    return _apply(logits, labels, ignore_index, chunk_size, overwrite_logits, path)
