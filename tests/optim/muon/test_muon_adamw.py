import torch
from torch import nn

from hf_ext.optim import MuonWithAdamW


def test_hidden_matrices_go_to_muon_and_the_rest_to_adamw():
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 6), nn.Linear(6, 3))
    optimizer = MuonWithAdamW(mlp, lr=0.01)
    muon, adamw = optimizer.optimizers
    assert isinstance(muon, torch.optim.Muon) and isinstance(adamw, torch.optim.AdamW)
    assert [tuple(p.shape) for p in muon.param_groups[0]["params"]] == [(6, 4), (3, 6)]
    assert {tuple(p.shape) for p in adamw.param_groups[0]["params"]} == {(10, 4), (6,), (3,)}
    assert optimizer.param_groups == muon.param_groups + adamw.param_groups  # one scheduler drives both
    before = [p.detach().clone() for p in mlp.parameters()]
    mlp(torch.tensor([1, 2])).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
    assert all(not torch.equal(a, b) for a, b in zip(before, mlp.parameters(), strict=True))
    assert all(p.grad is None for p in mlp.parameters())
