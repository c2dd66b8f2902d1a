"""Orthonormal basis of a linear layer's input activations (randomized range finder).

The gradient of ``W (out x in)`` is ``Delta^T A`` for input activations ``A (tokens x in)``, so
its rows lie in the row space of ``A``; the top-``r`` right singular subspace of ``A`` holds
most of it.
"""

from collections.abc import Callable

import torch

Reduce = Callable[[torch.Tensor], torch.Tensor]


def _rows(activations: torch.Tensor, row_mask: torch.Tensor | None, max_rows: int) -> torch.Tensor:
    rows = activations.reshape(-1, activations.shape[-1]).float()
    if row_mask is not None and row_mask.numel() == rows.shape[0]:
        rows = rows[row_mask.reshape(-1).to(device=rows.device, dtype=torch.bool)]
    if rows.shape[0] > max_rows:
        index = torch.linspace(0, rows.shape[0] - 1, max_rows, device=rows.device).round().long()
        rows = rows[index]
    return rows


def activation_subspace(
    activations: torch.Tensor,
    rank: int,
    power_iterations: int,
    max_rows: int,
    seed: int,
    row_mask: torch.Tensor | None = None,
    reduce_sum: Reduce | None = None,
) -> torch.Tensor:
    """``(in, min(rank, in))`` orthonormal basis of the span of ``activations``' rows.

    Args:
        activations: ``(..., in)`` inputs of the layer; flattened to token rows.
        rank: subspace dimension ``r``.
        power_iterations: extra multiplications by ``A^T A`` (QR after each) to sharpen the basis.
        max_rows: rows used at most, evenly spaced, bounding the cost on long batches.
        seed: seed of the Gaussian test matrix (the same on every process).
        row_mask: optional token mask (e.g. the attention mask); padded rows are dropped when
            its size matches the number of rows.
        reduce_sum: sums a tensor across processes, so every process gets the basis of all
            processes' activations; ``None`` for a single process.
    """
    rows = _rows(activations, row_mask, max_rows)
    in_features = rows.shape[1]
    rank = min(rank, in_features)
    generator = torch.Generator(device=rows.device).manual_seed(seed)
    basis = torch.randn(in_features, rank, generator=generator, device=rows.device)
    for _ in range(power_iterations + 1):
        sketch = rows.T @ (rows @ basis)
        if reduce_sum is not None:
            sketch = reduce_sum(sketch)
        basis, _ = torch.linalg.qr(sketch)
    return basis
