import pytest
import torch

from hf_ext.optim.shared import batching
from hf_ext.optim.shared.batching import apply_batched, scale_


def test_stacks_of_one_key_share_calls_up_to_the_element_cap(monkeypatch):
    """Each call gets the stacks of one key, in order, until the next would pass the cap; a stack above it goes
    alone; each result is the stack's own."""
    monkeypatch.setitem(batching.MAX_BATCH_ELEMENTS, "cpu", 60)
    generator = torch.Generator().manual_seed(0)
    shapes = [(1, 4, 5), (2, 4, 5), (1, 3, 3), (1, 4, 5), (4, 4, 5), (1, 4, 5)]
    stacks = [torch.randn(shape, generator=generator) for shape in shapes]
    keys = [shape[1:] for shape in shapes]
    calls = []

    def fn(key, batch):
        calls.append((key, batch.shape[0]))
        return batch * batch.sum(dim=(1, 2), keepdim=True)  # each matrix on its own

    results = apply_batched(stacks, keys, fn)
    assert calls == [((4, 5), 3), ((4, 5), 1), ((4, 5), 4), ((4, 5), 1), ((3, 3), 1)]
    for stack, result in zip(stacks, results, strict=True):
        torch.testing.assert_close(result, stack * stack.sum(dim=(1, 2), keepdim=True))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_scale_multiplies_as_mul_does(dtype):
    """torch's CPU foreach multiply rounds the factor to bfloat16 (0.99 -> 0.98828125); ``scale_`` does not."""
    tensors = [torch.randn(7, 5, generator=torch.Generator().manual_seed(seed)).to(dtype) for seed in range(3)]
    expected = [t * 0.99 for t in tensors]
    scale_(tensors, 0.99)
    assert all(torch.equal(t, e) for t, e in zip(tensors, expected, strict=True))
