"""Batched calls for what an optimizer step does to many same-shape matrices, and ``foreach`` helpers.

An LMO or a Newton-Schulz step acts on each matrix of a ``(k, m, n)`` stack alone, so the matrices of a step that
share a shape (a model's 30 query projections, its experts) can go through it together: the same products, in
a few calls instead of one per parameter. On a GPU the per-call overhead (a launch per product, a few
microseconds each, times a dozen products per matrix) is what a step on many small matrices spends its time on;
Dion and Moonlight's distributed Muon batch them the same way.
"""

from collections.abc import Callable, Hashable, Sequence

import torch

# Elements per batched call. On a GPU a batch saves kernel launches (a dozen products per matrix), and the cap bounds
# its working memory (Newton-Schulz keeps about four batch-sized tensors; the GPU value is not measured here). On a
# CPU there is no launch to save, and a batch larger than a core's cache streams every iteration's operands from
# memory: four 576 x 1536 matrices (SmolLM2's MLP) orthogonalized together took 1.2-1.35x as long as one by one (fp32,
# one thread), so there only small matrices (norm gains, small models) are batched.
MAX_BATCH_ELEMENTS = {"cpu": 2**16}
DEFAULT_MAX_BATCH_ELEMENTS = 2**24


def apply_batched(
    stacks: Sequence[torch.Tensor],
    keys: Sequence[Hashable],
    fn: Callable[[Hashable, torch.Tensor], torch.Tensor],
) -> list[torch.Tensor]:
    """``fn(key, batch)`` on the stacks of matrices (``(k_i, m, n)`` each) that share a key, joined along their first
    axis up to :data:`MAX_BATCH_ELEMENTS` per call (a larger stack alone); each stack's block of the result (its
    ``k_i`` leading entries, views), in order.

    ``fn`` must act on each matrix of its batch alone (a key must say everything that could tell two stacks apart:
    their shape, dtype, device and settings). A batch of one stack passes that stack itself, uncopied.
    """
    members: dict[Hashable, list[int]] = {}
    for position, key in enumerate(keys):
        members.setdefault(key, []).append(position)
    results: list[torch.Tensor | None] = [None] * len(stacks)
    for key, positions in members.items():
        for chunk in _chunks([stacks[p] for p in positions], positions):
            batch = stacks[chunk[0]] if len(chunk) == 1 else torch.cat([stacks[p] for p in chunk])
            blocks = fn(key, batch).split([stacks[p].shape[0] for p in chunk])
            for position, block in zip(chunk, blocks, strict=True):
                results[position] = block
    return results


def _chunks(stacks: list[torch.Tensor], positions: list[int]) -> list[list[int]]:
    """``positions`` in order, cut where a batch of their ``stacks`` would pass the device's element cap."""
    cap = MAX_BATCH_ELEMENTS.get(stacks[0].device.type, DEFAULT_MAX_BATCH_ELEMENTS)
    chunks, size = [], 0
    for stack, position in zip(stacks, positions, strict=True):
        if not chunks or size + stack.numel() > cap:
            chunks.append([])
            size = 0
        chunks[-1].append(position)
        size += stack.numel()
    return chunks


def scale_(tensors: Sequence[torch.Tensor], factor: float) -> None:
    """``t *= factor`` for each of ``tensors``: one ``foreach`` call, but ``mul_`` for bfloat16 and float16 tensors on
    CPU, where torch's ``foreach`` multiply rounds ``factor`` to their dtype first (0.99 becomes 0.98828125 in bfloat16,
    a weight decay 17% stronger than asked) and ``mul_`` multiplies in float32."""
    rounded = [t.device.type == "cpu" and t.dtype in (torch.bfloat16, torch.float16) for t in tensors]
    exact = [t for t, r in zip(tensors, rounded, strict=True) if not r]
    if exact:
        torch._foreach_mul_(exact, factor)
    for t in (t for t, r in zip(tensors, rounded, strict=True) if r):
        t.mul_(factor)
