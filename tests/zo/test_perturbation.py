import pytest
import torch
import torch._dynamo.testing
from torch import nn
from transformers.pytorch_utils import Conv1D

import hf_ext.zo.perturbation as perturbation_module
from hf_ext.zo import AGZOConfig, MeZOConfig, ZOOptimizer, estimate_projected_gradients
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


def test_share_subspaces_false_gives_each_layer_its_own_range_finder(monkeypatch):
    """The path before sharing, kept for the side-by-side measurement in docs/results/zo.md."""
    calls = []
    real = perturbation_module.activation_subspace
    monkeypatch.setattr(perturbation_module, "activation_subspace", lambda *a: calls.append(1) or real(*a))
    model = SharedInputs()
    perturbation = ZOPerturbation(model, AGZOConfig(rank=2, share_subspaces=False))
    with perturbation.perturbed(seed=1, scale=1e-3, capture_seed=7):
        model(torch.randn(3, 4, 6))
    assert len(calls) == 3
    query, key = perturbation.subspaces["query"], perturbation.subspaces["key"]
    assert query is not key and not torch.equal(query, key)  # the same activations, sketched with other seeds


def test_agzo_leaves_a_layer_the_forward_never_calls_unperturbed(monkeypatch, make_two_layers, low_rank_batch):
    """Issue 43: such a layer had no subspace and step() raised KeyError; its gradient is exactly zero."""
    calls = []
    real = perturbation_module.activation_subspace
    monkeypatch.setattr(perturbation_module, "activation_subspace", lambda *a: calls.append(1) or real(*a))
    model = make_two_layers(use_head=False)
    head = model.head.weight.detach().clone()
    perturbation = ZOPerturbation(model, AGZOConfig(rank=2))
    optimizer = ZOOptimizer(perturbation, 0.1, 0.0, {"body.weight", "head.weight"})
    for step in range(3):  # as ZOTrainer steps with subspace_refresh_interval=2
        loss_fn = lambda: model(**low_rank_batch)["loss"]  # noqa: E731
        estimate = estimate_projected_gradients(perturbation, loss_fn, step, refresh_subspaces=step % 2 == 0)
        optimizer.accumulate(estimate.seeds, estimate.projected_grads, 1.0)
        optimizer.step()
    assert perturbation.subspaces["head"].shape == (5, 0)
    assert torch.equal(model.head.weight, head)
    assert len(calls) == 2  # steps 0 and 2: the unseen head does not force a capture every step


def test_a_layer_first_called_after_the_capture_is_perturbed_as_the_update_moves_it(make_two_layers, low_rank_batch):
    """With gradient accumulation a later micro-batch may call a layer the capture forward did not."""
    model = make_two_layers(use_head=False)
    perturbation = ZOPerturbation(model, AGZOConfig(rank=2))
    with torch.no_grad():
        with perturbation.perturbed(seed=3, scale=0.0, capture_seed=1):
            model(**low_rank_batch)
        model.use_head = True
        with perturbation.perturbed(seed=3, scale=0.05):
            hooked = model(**low_rank_batch)["loss"]
        perturbation.add_direction_(3, 0.05)
        explicit = model(**low_rank_batch)["loss"]
    torch.testing.assert_close(hooked, explicit, atol=1e-6, rtol=1e-6)


def test_a_compiled_model_is_perturbed_exactly_as_the_eager_one_without_recompiling(make_two_layers, low_rank_batch):
    """Traced hooks recompiled for every new seed (and inductor would redraw their noise): they run eagerly."""
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    model = make_two_layers()
    compiled = torch.compile(model, backend=counter)
    perturbation = ZOPerturbation(model, AGZOConfig(rank=2))
    frames = []
    with torch.no_grad():
        with perturbation.perturbed(seed=0, scale=0.0, capture_seed=1):
            model(**low_rank_batch)
        for seed in range(4):
            with perturbation.perturbed(seed, 1e-2):
                assert torch.equal(compiled(**low_rank_batch)["loss"], model(**low_rank_batch)["loss"])
            frames.append(counter.frame_count)
    assert frames[0] > 0 and frames == frames[:1] * 4


class OneProjection(nn.Module):
    """``tanh(proj(x))`` regressed on zero; ``proj`` an ``nn.Linear`` or GPT-2's ``Conv1D`` holding its transpose."""

    def __init__(self, conv1d: bool):
        super().__init__()
        torch.manual_seed(0)
        linear = nn.Linear(6, 5)
        self.proj = linear
        if conv1d:
            self.proj = Conv1D(5, 6)
            with torch.no_grad():
                self.proj.weight.copy_(linear.weight.T)
                self.proj.bias.copy_(linear.bias)

    def forward(self, x):
        return torch.tanh(self.proj(x)).pow(2).mean()


@pytest.mark.parametrize("config", [MeZOConfig(), AGZOConfig(rank=2)], ids=["mezo", "agzo"])
def test_a_conv1d_layer_gets_exactly_the_perturbation_and_update_of_its_linear_twin(config):
    """Issue 71: GPT-2's Conv1D was refused ("matched no trainable nn.Linear"); its weight is stored (in, out)."""
    x = torch.randn(3, 4, 6, generator=torch.Generator().manual_seed(1))
    conv, linear = OneProjection(conv1d=True), OneProjection(conv1d=False)
    moved = {}
    for model in (conv, linear):
        perturbation = ZOPerturbation(model, config)
        with torch.no_grad():
            with perturbation.perturbed(seed=3, scale=0.05, capture_seed=4 if perturbation.is_subspace else None):
                hooked = model(x)
            perturbation.add_direction_(3, 0.05)
            torch.testing.assert_close(model(x), hooked, atol=1e-6, rtol=1e-6)  # the forward saw W + eps Z
        moved[model] = (perturbation.subspaces, model.proj.weight.detach().clone())
    assert all(torch.equal(moved[conv][0][k], moved[linear][0][k]) for k in moved[linear][0])
    assert torch.equal(moved[conv][1].T, moved[linear][1])  # the same draws, transposed: bit for bit


@pytest.mark.parametrize("config", [MeZOConfig(), AGZOConfig(rank=3)], ids=["mezo", "agzo"])
@pytest.mark.parametrize("implementation", ["eager", "grouped_mm"])
def test_moe_router_and_experts_are_perturbed_in_place_as_the_update_moves_them_and_restored(
    config, implementation, make_tiny_mixtral, token_batch
):
    """Issue 71: AGZO froze them without a word. In place during their module's forward, then restored exactly."""
    model = make_tiny_mixtral()
    model.set_experts_implementation(implementation)
    perturbation = ZOPerturbation(model, config)
    moe = ["model.layers.0.mlp.gate.weight", "model.layers.0.mlp.experts.gate_up_proj"]
    moe.append("model.layers.0.mlp.experts.down_proj")
    assert [name for name in perturbation.parameter_names() if "mlp" in name] == moe
    before = {name: param.detach().clone() for name, param in model.named_parameters()}
    with torch.no_grad():
        with perturbation.perturbed(seed=5, scale=0.05, capture_seed=6 if perturbation.is_subspace else None):
            hooked = model(**token_batch).loss
        assert all(torch.equal(param, before[name]) for name, param in model.named_parameters())
        perturbation.add_direction_(5, 0.05)
        torch.testing.assert_close(model(**token_batch).loss, hooked, atol=1e-6, rtol=1e-6)
    assert all(not torch.equal(model.get_parameter(name), before[name]) for name in moe)
    if perturbation.is_subspace:
        assert perturbation.subspaces[moe[1]].shape == (4, 16, 3) and perturbation.subspaces[moe[2]].shape == (4, 24, 3)


def test_a_config_that_is_not_a_zo_config_is_refused_by_name():
    """A dict failed as "'dict' object has no attribute 'target_modules'"."""
    with pytest.raises(TypeError, match="ZOPerturbation: `config` must be an AGZOConfig or MeZOConfig, got dict"):
        ZOPerturbation(nn.Linear(3, 3), {"eps": 1e-3})
