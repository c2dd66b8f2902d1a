"""In-place seeded Gaussian perturbation ``p += scale * z(seed)``.

Zeroth-order methods perturb, evaluate and restore the same parameter several times per
step; regenerating ``z`` from its seed means nothing parameter-sized is ever stored. The
Triton kernel draws ``z`` inside the kernel (Philox, ``tl.randn``) so no full-size noise
tensor is materialised; the reference draws it with a seeded ``torch.Generator``. Each
path returns the same ``z`` for the same seed on every call; the two paths are different
generators (as torch's CPU and CUDA generators are), so ``z`` depends on (seed, device type).
"""

import torch

from ._dispatch import use_triton

# Elements per program: wide enough that each thread of 8 warps handles 16 (vectorised loads and stores).
_BLOCK_SIZE = 4096
_NUM_WARPS = 8


def seeded_perturb_reference_(
    param: torch.Tensor, seed: int, scale: float, first: int = 0, whole_numel: int | None = None
) -> torch.Tensor:
    """Reference: ``param += scale * z`` with ``z ~ N(0, I)`` drawn from ``seed``; returns ``param``."""
    generator = torch.Generator(device=param.device).manual_seed(seed)
    whole = param.numel() if whole_numel is None else whole_numel
    noise = torch.randn(whole, generator=generator, device=param.device, dtype=torch.float32)
    noise = noise[first : first + param.numel()].view(param.shape)
    if param.dtype == torch.float32:
        return param.add_(noise, alpha=scale)
    return param.copy_(param.float().add_(noise, alpha=scale))


def seeded_perturb_triton_(
    param: torch.Tensor, seed: int, scale: float, first: int = 0, whole_numel: int | None = None
) -> torch.Tensor:
    """Triton path of :func:`seeded_perturb_` (CUDA, or CPU under ``TRITON_INTERPRET=1``)."""
    if not param.is_contiguous():
        raise ValueError("seeded_perturb_triton_: `param` must be contiguous")
    if (param.numel() if whole_numel is None else whole_numel) >= 2**31:
        raise ValueError("seeded_perturb_triton_: `param` (whole) must have fewer than 2**31 elements")
    if param.numel():
        import triton

        from ._perturb_triton import seeded_perturb_kernel

        grid = (triton.cdiv(param.numel(), _BLOCK_SIZE),)
        seeded_perturb_kernel[grid](
            param,
            param.numel(),
            first,
            seed,
            float(scale),
            BLOCK_SIZE=_BLOCK_SIZE,
            ALIGNED=first % 4 == 0,
            num_warps=_NUM_WARPS,
        )
    return param


@torch.compiler.disable  # traced, inductor would replace the seeded draws (unless fallback_random)
def seeded_perturb_(
    param: torch.Tensor, seed: int, scale: float, first: int = 0, whole_numel: int | None = None
) -> torch.Tensor:
    """Add ``scale * z(seed)`` to ``param`` in place; the same seed always gives the same ``z``, compiled or not.

    Args:
        param: tensor to perturb (any floating dtype); modified in place and returned.
        seed: non-negative integer below 2**63 that determines ``z``.
        scale: multiplier of the noise; calling again with ``-scale`` undoes the perturbation.
        first: ``param`` holds the entries ``first, first + 1, ...`` (in flat order) of a tensor of ``whole_numel``
            entries, and gets those entries of that tensor's ``z`` (default: ``param`` is whole).
        whole_numel: the entries of the tensor that ``param`` is part of (default: ``param``'s own).
    """
    if not param.is_floating_point():
        raise TypeError(f"seeded_perturb_: `param` must be a floating tensor, got {param.dtype}")
    if not 0 <= seed < 2**63:
        raise ValueError(f"seeded_perturb_: `seed` must be in [0, 2**63), got {seed}")
    whole = param.numel() if whole_numel is None else whole_numel
    if not 0 <= first <= first + param.numel() <= whole:
        raise ValueError(
            f"seeded_perturb_: `first` + `param.numel()` must lie in [0, whole_numel]; got first={first}, "
            f"numel={param.numel()}, whole_numel={whole}"
        )
    if use_triton(param) and param.is_contiguous() and whole < 2**31:
        return seeded_perturb_triton_(param, seed, scale, first, whole)
    return seeded_perturb_reference_(param, seed, scale, first, whole)
