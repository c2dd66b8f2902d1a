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
    return _range_finder(rows, basis, power_iterations, reduce_sum)


def expert_subspaces(
    rows: torch.Tensor,
    counts: torch.Tensor,
    rank: int,
    power_iterations: int,
    seed: int,
    reduce_sum: Reduce | None = None,
) -> torch.Tensor:
    """``(experts, in, min(rank, in))`` orthonormal bases, expert ``e``'s of the span of its rows, batched over experts.

    Args:
        rows: ``(experts, rows, in)``, expert ``e``'s first ``counts[e]`` rows real and the rest zero
            (:func:`hf_ext.zo.experts.routed_rows`); zero rows add nothing to ``A^T A``.
        counts: ``(experts,)`` real rows per expert.
        rank, power_iterations, seed, reduce_sum: as in :func:`activation_subspace`.

    An expert with ``n < rank`` rows (summed over processes) keeps ``n`` columns, which span its rows; the
    others are zero, since QR would fill them with rounding noise, and an expert no row reached has a zero basis.
    """
    experts, _, in_features = rows.shape
    rank = min(rank, in_features)
    generator = torch.Generator(device=rows.device).manual_seed(seed)
    basis = torch.randn(experts, in_features, rank, generator=generator, device=rows.device)
    basis = _range_finder(rows.float(), basis, power_iterations, reduce_sum)
    if reduce_sum is not None:
        counts = reduce_sum(counts)
    spanned = torch.arange(rank, device=rows.device) < counts.to(rows.device)[:, None]
    return torch.where(spanned[:, None, :], basis, 0)


def _range_finder(rows: torch.Tensor, basis: torch.Tensor, power_iterations: int, reduce_sum: Reduce | None):
    """Sharpen the test matrix ``basis`` by ``power_iterations + 1`` products with ``A^T A`` (QR after each); batched
    over leading dimensions."""
    for _ in range(power_iterations + 1):
        sketch = rows.mT @ (rows @ basis)
        if reduce_sum is not None:
            sketch = reduce_sum(sketch)
        basis, _ = torch.linalg.qr(sketch)
    return basis
