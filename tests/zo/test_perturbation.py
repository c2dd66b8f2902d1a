import torch
from torch import nn

import hf_ext.zo.perturbation as perturbation_module
from hf_ext.zo import AGZOConfig
from hf_ext.zo.perturbation import ZOPerturbation


class SharedInputs(nn.Module):
    """Two layers fed the same tensor (as q/k/v are), then one fed another: two inputs, three layers."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.query, self.key, self.out = nn.Linear(6, 5), nn.Linear(6, 5), nn.Linear(5, 6)

    def forward(self, x):
        return self.out(self.query(x) * self.key(x)).sum()


def test_layers_fed_the_same_tensor_share_one_range_finder(monkeypatch):
    calls = []
    real = perturbation_module.activation_subspace

    def counting(inputs, *args):
        calls.append(inputs.shape)
        return real(inputs, *args)

    monkeypatch.setattr(perturbation_module, "activation_subspace", counting)
    model = SharedInputs()
    perturbation = ZOPerturbation(model, AGZOConfig(rank=2))
    x = torch.randn(3, 4, 6)
    with perturbation.perturbed(seed=1, scale=1e-3, capture_seed=7):
        model(x)
    assert calls == [(3, 4, 6), (3, 4, 5)]  # one per distinct input, not one per layer
    assert perturbation.subspaces["query"] is perturbation.subspaces["key"]
    basis = perturbation.subspaces["query"]
    torch.testing.assert_close(basis.T @ basis, torch.eye(2))
    # a later forward with another (equal-valued) tensor computes afresh: identity, not equality, decides
    with perturbation.perturbed(seed=1, scale=1e-3, capture_seed=7):
        model(x.clone())
    assert len(calls) == 4 and perturbation._last_capture is None
