"""Mix a stack of per-block tensors across depth: ``out = offset + W @ (stacked - offset)``.

Gradient smoothing replaces block ``l``'s update by ``sum_j W[l, j] U_j``. The parameters of
one role (say every layer's ``q_proj.weight``) are stacked as rows of ``stacked (L, N)``; with
``offset`` the pre-step parameters, ``stacked - offset`` is the update and the result is the
smoothed new parameters, in one pass. The Triton kernel reads each column tile once for all
depths and mixes it in fp32 registers; the reference does the same in fp32 with torch. ``out`` takes a
buffer to write into, so that an optimizer step that mixes every step allocates nothing.
"""

import torch

from ._dispatch import use_triton

# Accumulator elements per program (fp32): 64 registers a thread at 4 warps, whatever the depth.
_TILE_ELEMENTS = 8192
_MAX_TRITON_DEPTH = 128


def depth_smooth_reference(
    stacked: torch.Tensor,
    weights: torch.Tensor,
    offset: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Reference path of :func:`depth_smooth` (fp32 torch matmul)."""
    values = stacked.float() if offset is None else stacked.float() - offset.float()
    # An fp32 `out` takes the product itself: no (L, N) temporary, whose fresh pages cost a CPU more than the matmul.
    direct = out is not None and out.dtype == torch.float32
    smoothed = torch.mm(weights.float(), values, out=out if direct else None)
    if offset is not None:
        smoothed += offset.float()
    if out is None:
        return smoothed.to(stacked.dtype)
    return out if direct else out.copy_(smoothed)


def depth_smooth_triton(
    stacked: torch.Tensor,
    weights: torch.Tensor,
    offset: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Triton path of :func:`depth_smooth` (CUDA, or CPU under ``TRITON_INTERPRET=1``)."""
    import triton

    from ._depth_smooth_triton import depth_smooth_kernel

    depth, width = stacked.shape
    if depth > _MAX_TRITON_DEPTH:
        raise ValueError(f"depth_smooth_triton: at most {_MAX_TRITON_DEPTH} blocks, got {depth}")
    stacked = stacked.contiguous()
    out = torch.empty_like(stacked) if out is None else out
    block_depth = triton.next_power_of_2(depth)
    block_width = max(32, _TILE_ELEMENTS // block_depth)
    if out.numel():
        depth_smooth_kernel[(triton.cdiv(width, block_width),)](
            stacked,
            stacked if offset is None else offset.contiguous(),
            weights.float().contiguous(),
            out,
            depth,
            width,
            HAS_OFFSET=offset is not None,
            BLOCK_DEPTH=block_depth,
            BLOCK_WIDTH=block_width,
        )
    return out


def depth_smooth(
    stacked: torch.Tensor,
    weights: torch.Tensor,
    offset: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """``offset + weights @ (stacked - offset)`` (or ``weights @ stacked``), accumulated in fp32.

    Args:
        stacked: ``(L, N)`` floating tensor, one row per block.
        weights: ``(L, L)`` mixing matrix; row ``l`` holds the weights of every block for block ``l``.
        offset: optional ``(L, N)`` tensor like ``stacked`` (the parameters before the step).
        out: optional contiguous ``(L, N)`` tensor like ``stacked``, apart from it and ``offset``, to write into.

    Returns ``out``, or a new ``(L, N)`` tensor in ``stacked``'s dtype.
    """
    if stacked.dim() != 2 or not stacked.is_floating_point():
        raise ValueError(
            f"depth_smooth: `stacked` must be a 2-D floating (L, N) tensor, got {tuple(stacked.shape)} {stacked.dtype}"
        )
    depth = stacked.shape[0]
    if weights.shape != (depth, depth):
        raise ValueError(
            f"depth_smooth: `weights` must be ({depth}, {depth}) for {depth} blocks, got {tuple(weights.shape)}"
        )
    if offset is not None and (offset.shape != stacked.shape or offset.dtype != stacked.dtype):
        raise ValueError(
            f"depth_smooth: `offset` must match `stacked` ({tuple(stacked.shape)} {stacked.dtype}), "
            f"got {tuple(offset.shape)} {offset.dtype}"
        )
    if out is not None:
        _check_out(out, stacked, offset)
    tensors = [t for t in (stacked, weights, offset, out) if t is not None]
    if use_triton(*tensors) and depth <= _MAX_TRITON_DEPTH and stacked.numel() < 2**31:
        return depth_smooth_triton(stacked, weights, offset, out)
    return depth_smooth_reference(stacked, weights, offset, out)


def _check_out(out: torch.Tensor, stacked: torch.Tensor, offset: torch.Tensor | None) -> None:
    """``out`` must have the result's layout (that it shares no memory with an input, torch's own ``out=`` checks)."""
    if out.shape != stacked.shape or out.dtype != stacked.dtype or out.device != stacked.device:
        raise ValueError(
            f"depth_smooth: `out` must match `stacked` ({tuple(stacked.shape)} {stacked.dtype} {stacked.device}), "
            f"got {tuple(out.shape)} {out.dtype} {out.device}"
        )
    if not out.is_contiguous():
        raise ValueError("depth_smooth: `out` must be contiguous")
