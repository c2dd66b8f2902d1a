import copy
import pickle

import pytest
import torch
from torch import nn

from hf_ext.optim import MuonWithAdamW


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 6), nn.Linear(6, 3))


def _closure(model, optimizer):
    def closure():
        optimizer.zero_grad()
        loss = model(torch.tensor([1, 2])).square().sum()
        loss.backward()
        return loss

    return closure


def _steps(model, optimizer, n):
    for _ in range(n):
        optimizer.step(_closure(model, optimizer))


def test_hidden_matrices_go_to_muon_and_the_rest_to_adamw():
    mlp = _model()
    optimizer = MuonWithAdamW(mlp, lr=0.01)
    muon, adamw = optimizer.optimizers
    assert isinstance(muon, torch.optim.Muon) and isinstance(adamw, torch.optim.AdamW)
    assert [tuple(p.shape) for p in muon.param_groups[0]["params"]] == [(6, 4), (3, 6)]
    assert {tuple(p.shape) for p in adamw.param_groups[0]["params"]} == {(10, 4), (6,), (3,)}
    assert [g["use_muon"] for g in optimizer.param_groups] == [True, False]
    assert all(a is b for a, b in zip(optimizer.param_groups, muon.param_groups + adamw.param_groups, strict=True))
    before = [p.detach().clone() for p in mlp.parameters()]
    _steps(mlp, optimizer, 1)
    optimizer.zero_grad()
    assert all(not torch.equal(a, b) for a, b in zip(before, mlp.parameters(), strict=True))
    assert all(p.grad is None for p in mlp.parameters())


def test_state_dict_holds_both_inner_optimizers_state():
    mlp = _model()
    optimizer = MuonWithAdamW(mlp, lr=0.01)
    _steps(mlp, optimizer, 1)
    state = optimizer.state_dict()["state"]
    assert len(state) == 5  # 2 Muon matrices + 3 AdamW tensors (it saved none before)
    assert sorted(state[0]) == ["momentum_buffer"] and sorted(state[2]) == ["exp_avg", "exp_avg_sq", "step"]


def test_after_load_state_dict_a_scheduler_still_reaches_the_inner_optimizers():
    mlp = _model()
    optimizer = MuonWithAdamW(mlp, lr=0.01)
    _steps(mlp, optimizer, 1)
    optimizer.load_state_dict(copy.deepcopy(optimizer.state_dict()))
    torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.0)  # sets every group's lr to 0
    assert all(group["lr"] == 0.0 for inner in optimizer.optimizers for group in inner.param_groups)
    before = [p.detach().clone() for p in mlp.parameters()]
    _steps(mlp, optimizer, 1)
    assert all(torch.equal(a, b) for a, b in zip(before, mlp.parameters(), strict=True))


def test_step_calls_the_closure_and_returns_its_loss():
    mlp = _model()
    optimizer = MuonWithAdamW(mlp, lr=0.01)
    closure = _closure(mlp, optimizer)
    loss = optimizer.step(closure)
    assert isinstance(loss, torch.Tensor) and loss.item() > 0


@pytest.mark.parametrize("copier", [copy.deepcopy, lambda x: pickle.loads(pickle.dumps(x))], ids=["deepcopy", "pickle"])
def test_a_copy_keeps_its_inner_optimizers_and_steps_identically(copier):
    mlp = _model()
    optimizer = MuonWithAdamW(mlp, lr=0.01)
    _steps(mlp, optimizer, 2)
    mlp_copy, optimizer_copy = copier((mlp, optimizer))
    assert len(optimizer_copy.optimizers) == 2
    assert optimizer_copy.optimizers[0].param_groups[0] is optimizer_copy.param_groups[0]
    assert optimizer_copy.optimizers[1].state is optimizer_copy.state
    _steps(mlp, optimizer, 1)
    _steps(mlp_copy, optimizer_copy, 1)
    for a, b in zip(mlp.parameters(), mlp_copy.parameters(), strict=True):
        assert torch.equal(a, b)


def test_an_added_group_says_where_it_goes():
    mlp = _model()
    optimizer = MuonWithAdamW(mlp, lr=0.01)
    extra = nn.Parameter(torch.ones(3, 3))
    with pytest.raises(ValueError, match="must set `use_muon` to True .* or False"):
        optimizer.add_param_group({"params": [extra]})
    with pytest.raises(ValueError, match=r"holds 2-D parameters \(3-D ones with `stacked=True`.*got shapes \[\(3,\)\]"):
        optimizer.add_param_group({"params": [nn.Parameter(torch.ones(3))], "use_muon": True})
    with pytest.raises(ValueError, match="`lr` must be >= 0, got -1.0"):
        optimizer.add_param_group({"params": [extra], "use_muon": True, "lr": -1.0})
    optimizer.add_param_group({"params": [extra], "use_muon": True, "lr": 0.5})
    assert optimizer.optimizers[0].param_groups[-1] is optimizer.param_groups[-1]
    assert optimizer.param_groups[-1]["lr"] == 0.5


def test_given_parameters_it_says_it_takes_the_model():
    with pytest.raises(TypeError, match=r"MuonWithAdamW takes the model \(an nn.Module\), got list: it reads"):
        MuonWithAdamW(list(_model().parameters()), lr=0.01)


class _MoE(nn.Module):
    """A router, a stack of experts (experts, out, in) and a classifier head, as transformers lays them out."""

    def __init__(self):
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.gate = nn.Linear(8, 4, bias=False)
        self.experts = nn.Module()
        self.experts.down_proj = nn.Parameter(torch.randn(4, 8, 12, generator=generator))
        self.up = nn.Linear(8, 12)
        self.classifier = nn.Linear(8, 3)

    def forward(self, x):
        h = torch.einsum("eoi,bi->beo", self.experts.down_proj, torch.relu(self.up(x)))
        return self.classifier((h * self.gate(x).softmax(-1)[..., None]).sum(1))


def test_experts_and_the_router_go_to_muon_and_a_classifier_head_to_adamw():
    """The old grouping sent every 3-D expert tensor to AdamW and a `classifier` to Muon."""
    model = _MoE()
    optimizer = MuonWithAdamW(model, lr=0.01)
    where = {id(p): (g["use_muon"], g.get("stacked", False)) for g in optimizer.param_groups for p in g["params"]}
    assert where[id(model.experts.down_proj)] == (True, True)
    assert where[id(model.gate.weight)] == (True, False) and where[id(model.up.weight)] == (True, False)
    assert not where[id(model.classifier.weight)][0] and not where[id(model.up.bias)][0]


def test_each_expert_steps_as_torch_muon_steps_it_alone_bit_for_bit():
    model = _MoE()
    optimizer = MuonWithAdamW(model, lr=0.01)
    before = model.experts.down_proj.detach().clone()
    alone = [nn.Parameter(m.clone()) for m in before]
    reference = torch.optim.Muon(alone, lr=0.01, weight_decay=0.0, adjust_lr_fn="match_rms_adamw")
    for seed in range(3):
        x = torch.randn(5, 8, generator=torch.Generator().manual_seed(seed))
        optimizer.zero_grad()
        model(x).square().sum().backward()
        for p, g in zip(alone, model.experts.down_proj.grad, strict=True):
            p.grad = g.clone()
        optimizer.step()
        reference.step()
    assert torch.equal(model.experts.down_proj.detach(), torch.stack([p.detach() for p in alone]))
    assert not torch.equal(model.experts.down_proj.detach(), before)


def test_a_conv1d_weight_steps_as_the_transposed_linear_bit_for_bit():
    """Square maps too: in bfloat16, Newton-Schulz on a matrix and on its transpose round differently (the old step
    ran it on the stored (in, out) matrix: 14% of the largest entry off on GPT-2's attention c_proj)."""
    from transformers.pytorch_utils import Conv1D

    conv = nn.Sequential(Conv1D(nf=16, nx=16), Conv1D(nf=16, nx=16))
    linear = nn.Sequential(nn.Linear(16, 16), nn.Linear(16, 16))
    with torch.no_grad():
        for c, lin in zip(conv, linear, strict=True):
            lin.weight.copy_(c.weight.T)
            lin.bias.copy_(c.bias)
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(0))
    for model in (conv, linear):
        optimizer = MuonWithAdamW(model, lr=0.02)
        for _ in range(2):
            optimizer.zero_grad()
            model(x).square().sum().backward()
            optimizer.step()
    for c, lin in zip(conv, linear, strict=True):
        assert torch.equal(c.weight.detach(), lin.weight.detach().T)


def test_a_three_dimensional_muon_parameter_needs_a_stacked_group():
    from hf_ext.optim import ShardedMuon

    with pytest.raises(ValueError, match=r"and 3-D ones in a group with `stacked=True` .* got shapes \[\(2, 3, 4\)\]"):
        ShardedMuon([nn.Parameter(torch.ones(2, 3, 4))])
    ShardedMuon([{"params": [nn.Parameter(torch.ones(2, 3, 4))], "stacked": True}])
