from pathlib import Path

import pytest
import torch

from hf_ext.optim import ShardedMuon

pytestmark = pytest.mark.parity  # multi-process parity: kept in `make test` although slow

SCRIPT = Path(__file__).with_name("_sharded_muon_run.py")


def test_on_tensors_that_are_not_sharded_it_is_torch_muon():
    torch.manual_seed(0)
    weight, grad = torch.randn(6, 4), torch.randn(6, 4)
    params = [torch.nn.Parameter(weight.clone()), torch.nn.Parameter(weight.clone())]
    for p in params:
        p.grad = grad.clone()
    ShardedMuon([params[0]], lr=0.1).step()
    torch.optim.Muon([params[1]], lr=0.1).step()
    assert torch.equal(params[0], params[1])


@pytest.mark.slow
def test_on_row_shards_it_is_torch_muon_on_the_whole_matrix_bit_for_bit(tmp_path, torchrun_two_processes):
    """torch.optim.Muon on the shards orthogonalizes each rank's rows; the owner's whole-matrix step does not, and adds
    a tall matrix's update in torch's layout (bfloat16 add_ rounds a transposed operand differently). A stack of
    experts steps as torch.optim.Muon steps each expert alone, a matrix stored transposed as its map."""
    torchrun_two_processes(SCRIPT)
    results = torch.load(tmp_path / "muon.pt")
    assert len(results) == 10
    for key, (sharded, whole) in results.items():
        assert torch.equal(sharded, whole), key


def test_matrices_of_one_shape_are_orthogonalized_together_each_as_torch_muon_alone(monkeypatch):
    """One batched Newton-Schulz call per map shape and dtype (three 6x4 matrices and a stack of two 6x4 experts; two
    4x6; the fp32 and bf16 copies apart), each matrix stepped bit for bit as torch.optim.Muon steps it alone; the old
    step handed every 2-D matrix to torch.optim.Muon, one call each. (Not bf16 without Nesterov: see the next test.)"""
    from hf_ext.optim.muon import sharded

    generator = torch.Generator().manual_seed(0)
    calls, original = [], sharded.newton_schulz

    def counted(stack, *args, **kwargs):
        calls.append(stack.shape)
        return original(stack, *args, **kwargs)

    monkeypatch.setattr(sharded, "newton_schulz", counted)
    for dtype, nesterov in ((torch.float32, True), (torch.float32, False), (torch.bfloat16, True)):
        weights = [torch.randn(*shape, generator=generator).to(dtype) for shape in [(6, 4)] * 3 + [(4, 6)] * 2]
        experts = torch.randn(2, 6, 4, generator=generator).to(dtype)
        ours = [torch.nn.Parameter(w.clone()) for w in weights]
        stack = torch.nn.Parameter(experts.clone())
        alone = [torch.nn.Parameter(w.clone()) for w in [*weights, *experts]]
        settings = {"lr": 0.1, "nesterov": nesterov, "adjust_lr_fn": "match_rms_adamw"}
        optimizer = ShardedMuon([{"params": ours}, {"params": [stack], "stacked": True}], **settings)
        reference = torch.optim.Muon(alone, **settings)
        for _ in range(3):
            calls.clear()
            grads = [torch.randn(p.shape, generator=generator).to(dtype) for p in alone]
            for p, g in zip(ours, grads[:5], strict=True):
                p.grad = g.clone()
            stack.grad = torch.stack(grads[5:])
            for p, g in zip(alone, grads, strict=True):
                p.grad = g
            optimizer.step()
            reference.step()
            assert sorted(calls) == [(2, 4, 6), (5, 6, 4)]
        moved = [*ours, *stack.detach()]
        assert all(torch.equal(a, b) for a, b in zip(moved, alone, strict=True)), (dtype, nesterov)


def test_a_map_stored_transposed_gets_its_own_learning_rate_adjustment():
    """torch's "original" adjustment sqrt(max(1, d_out / d_in)) is read off the map (12 x 4: sqrt 3), as its nn.Linear
    twin gets it; the old step read it off the stored (4, 12) tensor (1)."""
    generator = torch.Generator().manual_seed(0)
    weight, grad = torch.randn(12, 4, generator=generator), torch.randn(12, 4, generator=generator)
    linear, stored = torch.nn.Parameter(weight.clone()), torch.nn.Parameter(weight.T.contiguous())
    linear.grad, stored.grad = grad.clone(), grad.T.contiguous()
    torch.optim.Muon([linear], lr=0.1).step()
    ShardedMuon([{"params": [stored], "transposed": True}], lr=0.1).step()
    assert torch.equal(stored.detach().T, linear.detach())


def test_without_nesterov_a_bfloat16_momentum_stays_the_average_of_the_gradients():
    """torch.optim.Muon 2.13 orthogonalizes a bfloat16 momentum buffer in place (``grad.bfloat16()`` is the buffer
    itself, then ``div_`` by its norm: pytorch/pytorch#194664), so its momentum ends each step at norm 1; ours keeps
    ``lerp(buffer, grad, 1 - momentum)``. The old step was torch's."""
    generator = torch.Generator().manual_seed(0)
    param = torch.nn.Parameter(torch.randn(6, 4, generator=generator).bfloat16())
    param.grad = torch.randn(6, 4, generator=generator).bfloat16()
    optimizer = ShardedMuon([param], lr=0.1, nesterov=False)
    optimizer.step()
    expected = torch.zeros_like(param).lerp_(param.grad, 1 - 0.95)
    assert torch.equal(optimizer.state[param]["momentum_buffer"], expected)


@pytest.mark.parametrize("momentum", [1.0, 1.5])
def test_a_momentum_of_one_or_more_is_refused_by_name(momentum):
    """torch.optim.Muon refuses only a negative momentum; at 1 or more the buffer never forgets (or grows)."""
    with pytest.raises(ValueError, match=r"ShardedMuon: `momentum` must be in \[0, 1\)"):
        ShardedMuon([torch.nn.Parameter(torch.randn(4, 4))], momentum=momentum)
