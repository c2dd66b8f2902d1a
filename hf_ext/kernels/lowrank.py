"""Seeded Gaussian noise and the in-place low-rank perturbation ``W += scale * N(seed) @ U^T``.

AGZO perturbs a linear layer's weight ``W (out x in)`` only inside the span of an orthonormal
basis ``U (in x r)`` of its input activations; ``N (out x r)`` is Gaussian from a seed. The
Triton kernel draws ``N`` inside the kernel, so neither ``N`` nor ``N @ U^T`` is ever
materialised in memory. :func:`seeded_normal` returns the same ``N`` (and the same ``z`` that
:func:`hf_ext.kernels.seeded_perturb_` adds) on the same device type, for code that applies
the perturbation to activations instead of weights.

A block of rows of ``W`` (an FSDP2 shard) gets the rows of the whole ``N`` at its own indices
(``first_row``, ``whole_rows``), so the update does not depend on how ``W`` is sharded.
"""

import torch

from ._dispatch import use_triton

# Elements per program: wide enough that each thread of 8 warps handles 16 (vectorised loads and stores).
_BLOCK_SIZE = 4096
_NUM_WARPS = 8
_BLOCK_ROWS = 32
_BLOCK_COLS = 64


def seeded_normal_reference(shape: tuple[int, ...], seed: int, device: torch.device | str) -> torch.Tensor:
    """Reference: float32 ``N(0, 1)`` tensor of ``shape`` drawn from ``seed``."""
    generator = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(shape, generator=generator, device=device, dtype=torch.float32)


def seeded_normal_triton(shape: tuple[int, ...], seed: int, device: torch.device | str) -> torch.Tensor:
    """Triton path of :func:`seeded_normal` (CUDA, or CPU under ``TRITON_INTERPRET=1``)."""
    import triton

    from ._lowrank_triton import seeded_normal_kernel

    out = torch.empty(shape, device=device, dtype=torch.float32)
    if out.numel() >= 2**31:
        raise ValueError("seeded_normal_triton: `shape` must have fewer than 2**31 elements")
    if out.numel():
        seeded_normal_kernel[(triton.cdiv(out.numel(), _BLOCK_SIZE),)](
            out, out.numel(), seed, BLOCK_SIZE=_BLOCK_SIZE, num_warps=_NUM_WARPS
        )
    return out


@torch.compiler.disable  # traced, inductor would replace the seeded draws (unless fallback_random)
def seeded_normal(shape: tuple[int, ...], seed: int, device: torch.device | str) -> torch.Tensor:
    """Float32 standard normal tensor determined by ``seed`` (and the device type), also under ``torch.compile``."""
    _check_seed("seeded_normal", seed)
    probe = torch.empty(0, device=device)
    if use_triton(probe):
        return seeded_normal_triton(tuple(shape), seed, device)
    return seeded_normal_reference(tuple(shape), seed, device)


def lowrank_perturb_reference_(
    weight: torch.Tensor,
    basis: torch.Tensor,
    seed: int,
    scale: float,
    first_row: int = 0,
    whole_rows: int | None = None,
) -> torch.Tensor:
    """Reference: ``weight += scale * N @ basis.T`` with ``N = seeded_normal((whole_rows, r), seed)[first_row:...]``."""
    rows = weight.shape[0] if whole_rows is None else whole_rows
    noise = seeded_normal_reference((rows, basis.shape[1]), seed, weight.device)[
        first_row : first_row + weight.shape[0]
    ]
    update = noise @ basis.to(torch.float32).T
    if weight.dtype == torch.float32:
        return weight.add_(update, alpha=scale)
    return weight.copy_(weight.float().add_(update, alpha=scale))


def lowrank_perturb_triton_(
    weight: torch.Tensor,
    basis: torch.Tensor,
    seed: int,
    scale: float,
    first_row: int = 0,
    whole_rows: int | None = None,
) -> torch.Tensor:
    """Triton path of :func:`lowrank_perturb_` (CUDA, or CPU under ``TRITON_INTERPRET=1``)."""
    import triton

    from ._lowrank_triton import lowrank_perturb_kernel

    if weight.stride(1) != 1:
        raise ValueError("lowrank_perturb_triton_: `weight` must be row-major (last stride 1)")
    rows, cols = weight.shape
    rank = basis.shape[1]
    if (rows if whole_rows is None else whole_rows) * rank >= 2**31:
        raise ValueError("lowrank_perturb_triton_: out_features * rank must be below 2**31")
    block_rank = max(16, triton.next_power_of_2(rank))
    grid = (triton.cdiv(rows, _BLOCK_ROWS), triton.cdiv(cols, _BLOCK_COLS))
    lowrank_perturb_kernel[grid](
        weight,
        basis,
        rows,
        cols,
        rank,
        first_row,
        seed,
        float(scale),
        weight.stride(0),
        basis.stride(0),
        basis.stride(1),
        BLOCK_ROWS=_BLOCK_ROWS,
        BLOCK_COLS=_BLOCK_COLS,
        BLOCK_RANK=block_rank,
    )
    return weight


@torch.compiler.disable  # traced, inductor would replace the seeded draws (unless fallback_random)
def lowrank_perturb_(
    weight: torch.Tensor,
    basis: torch.Tensor,
    seed: int,
    scale: float,
    first_row: int = 0,
    whole_rows: int | None = None,
) -> torch.Tensor:
    """Add ``scale * N(seed) @ basis.T`` to the 2-D ``weight`` in place and return it (eagerly under ``torch.compile``).

    Args:
        weight: ``(out, in)`` floating tensor, modified in place.
        basis: ``(in, r)`` tensor (AGZO: an orthonormal basis of the layer's input activations).
        seed: non-negative integer below 2**63 that determines ``N (out x r)``.
        scale: multiplier; calling again with ``-scale`` undoes the perturbation.
        first_row: ``weight`` is rows ``first_row, first_row + 1, ...`` of a weight of ``whole_rows`` rows, and gets
            those rows of that weight's ``N`` (default: ``weight`` is whole).
        whole_rows: the rows of the weight that ``weight`` is part of (default: ``weight``'s own).
    """
    if weight.dim() != 2 or basis.dim() != 2 or basis.shape[0] != weight.shape[1]:
        raise ValueError(
            f"lowrank_perturb_: need `weight` (out, in) and `basis` (in, r), got {tuple(weight.shape)} "
            f"and {tuple(basis.shape)}"
        )
    if not weight.is_floating_point():
        raise TypeError(f"lowrank_perturb_: `weight` must be a floating tensor, got {weight.dtype}")
    _check_seed("lowrank_perturb_", seed)
    rows = weight.shape[0] if whole_rows is None else whole_rows
    if not 0 <= first_row <= first_row + weight.shape[0] <= rows:
        raise ValueError(
            f"lowrank_perturb_: `first_row` + the rows of `weight` must lie in [0, whole_rows]; first_row={first_row}, "
            f"rows={weight.shape[0]}, whole_rows={rows}"
        )
    if use_triton(weight, basis) and weight.stride(1) == 1:
        return lowrank_perturb_triton_(weight, basis, seed, scale, first_row, rows)
    return lowrank_perturb_reference_(weight, basis, seed, scale, first_row, rows)


def _check_seed(caller: str, seed: int) -> None:
    if not 0 <= seed < 2**63:
        raise ValueError(f"{caller}: `seed` must be in [0, 2**63), got {seed}")
