import copy
import math

import pytest
import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

from hf_ext.models import tiny_causal_lm
from hf_ext.optim import Scion, scion_param_groups
from hf_ext.optim.scion.optimizer import RMS, ColNorm, Sign, Spectral
from hf_ext.optim.shared.newton_schulz import CUBIC, newton_schulz


def _randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# Each norm with the exact LMO (the cubic Newton-Schulz converges to U V^T) and matrices of both aspect ratios.
EXACT = {"spectral": Spectral(60, CUBIC), "sign": Sign(), "colnorm": ColNorm(), "rms": RMS()}
SHAPES = [(6, 10), (10, 6)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(EXACT))
def test_each_lmo_has_unit_norm_and_attains_the_dual_norm(name, shape):
    norm, g = EXACT[name], _randn(*shape)
    point = norm.lmo(g)
    assert norm.primal(point) == pytest.approx(1.0, rel=1e-6)
    assert torch.sum(g * point).item() == pytest.approx(-norm.dual(g), rel=1e-6)
    # It is the minimizer: no random point of the unit sphere does better.
    for seed in range(1, 50):
        x = _randn(*shape, seed=seed)
        x = x / norm.primal(x)
        assert torch.sum(g * x).item() >= torch.sum(g * point).item() - 1e-9


def test_the_default_spectral_lmo_is_within_the_quintic_band():
    g = _randn(32, 16).float()
    norm = Spectral()
    assert 0.6 < norm.primal(norm.lmo(g)) < 1.25
    assert torch.sum(g * norm.lmo(g)).item() / -norm.dual(g) == pytest.approx(1.0, abs=0.3)


def test_one_unconstrained_and_one_constrained_step_by_hand():
    x0, g = torch.tensor([3.0, -1.0, 2.0, 0.5]), torch.tensor([1.0, 2.0, -2.0, 4.0])
    lmo = -2.0 * g / 5.0  # -sqrt(n) g / ||g||_2 with n = 4, ||g|| = 5
    for constrained, expected in ((False, x0 + 0.1 * 3.0 * lmo), (True, 0.9 * x0 + 0.1 * 3.0 * lmo)):
        param = nn.Parameter(x0.clone())
        param.grad = g.clone()
        Scion([param], lr=0.1, alpha=0.5, scale=3.0, constrained=constrained).step()
        torch.testing.assert_close(param.data, expected)


def test_momentum_averages_the_gradients_before_the_lmo():
    param = nn.Parameter(torch.zeros(2))
    optimizer = Scion([param], lr=1.0, alpha=0.25)
    g1, g2 = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    for g in (g1, g2):
        param.grad = g
        optimizer.step()
    d = 0.75 * 0.25 * g1 + 0.25 * g2
    torch.testing.assert_close(optimizer.state[param]["momentum_buffer"], d)
    step_two = -math.sqrt(2) * d / d.norm()
    torch.testing.assert_close(param.data, -math.sqrt(2) * g1 + step_two)


def _untied_llama():
    config = LlamaConfig(
        vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2
    )
    config.tie_word_embeddings = False
    torch.manual_seed(0)
    return LlamaForCausalLM(config)


def test_norms_are_chosen_by_role():
    model = _untied_llama()
    names = {id(p): n for n, p in model.named_parameters()}
    groups = {g["norm"]: {names[id(p)] for p in g["params"]} for g in scion_param_groups(model, {"sign": 50.0})}
    assert groups["colnorm"] == {"model.embed_tokens.weight"}
    assert groups["sign"] == {"lm_head.weight"}
    assert all(name.endswith("norm.weight") for name in groups["rms"])
    assert "model.layers.0.self_attn.q_proj.weight" in groups["spectral"]
    assert sum(len(v) for v in groups.values()) == len(names)
    assert {g["norm"]: g["scale"] for g in scion_param_groups(model, {"sign": 50.0})}["sign"] == 50.0
    tied, _ = tiny_causal_lm()
    assert "colnorm" not in {g["norm"] for g in scion_param_groups(tied)}  # a tied head is the head


def test_embedding_columns_are_token_vectors_and_unseen_tokens_stay_put():
    model = _untied_llama()
    optimizer = Scion(model, lr=0.1)
    embedding = model.model.embed_tokens.weight
    before = embedding.detach().clone()
    model(input_ids=torch.tensor([[1, 2, 3, 4]]), labels=torch.tensor([[1, 2, 3, 4]])).loss.backward()
    optimizer.step()
    moved = (embedding - before).norm(dim=1)
    assert set(moved.nonzero().flatten().tolist()) == {1, 2, 3}  # the last input predicts nothing
    # Each seen token's vector moves by lr * scale * sqrt(dim) / sqrt(dim): RMS 0.1 * sqrt(16) / 4 per entry.
    torch.testing.assert_close(moved[1:4] / math.sqrt(16), torch.full((3,), 0.1))


def test_norm_matched_init_puts_every_matrix_on_its_sphere():
    model = _untied_llama()
    optimizer = Scion(scion_param_groups(model, {"sign": 2.0, "spectral": 3.0}))
    optimizer.norm_matched_init_(torch.Generator().manual_seed(0))
    for group in optimizer.param_groups:
        params = {p: p.detach() for p in group["params"]}
        for param, value in params.items():
            radius = optimizer.primal_norm({param: value}) * group["scale"]
            expected = 1.0 if group["norm"] == "rms" else group["scale"]  # rms: gains stay at 1
            assert radius == pytest.approx(expected, rel=1e-5), group["norm"]


def test_the_constrained_variant_stays_in_the_ball():
    head = nn.Parameter(torch.zeros(8, 4))
    optimizer = Scion([{"params": [head], "norm": "sign", "scale": 2.0}], lr=0.3, constrained=True)
    for seed in range(20):
        head.grad = _randn(8, 4, seed=seed).float()
        optimizer.step()
        assert optimizer.primal_norm({head: head.detach()}) <= 1.0 + 1e-6


def test_state_dict_round_trip_continues_identically():
    model_a, model_b = _untied_llama(), _untied_llama()
    batch = {"input_ids": torch.tensor([[1, 5, 7, 9]]), "labels": torch.tensor([[1, 5, 7, 9]])}
    opt_a = Scion(model_a, lr=0.05)
    for _ in range(2):
        opt_a.zero_grad()
        model_a(**batch).loss.backward()
        opt_a.step()
    model_b.load_state_dict(model_a.state_dict())
    opt_b = Scion(model_b, lr=0.05)
    opt_b.load_state_dict(copy.deepcopy(opt_a.state_dict()))  # as through a checkpoint file: no shared buffers
    for model, opt in ((model_a, opt_a), (model_b, opt_b)):
        opt.zero_grad()
        model(**batch).loss.backward()
        opt.step()
    for (name, a), b in zip(model_a.state_dict().items(), model_b.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"norm": "frobenius"}, r"`norm` must be one of \['spectral', 'sign', 'colnorm', 'rms', 'auto'\], got 'frob"),
        ({"alpha": 0.0}, r"`alpha` must be in \(0, 1\]"),
        ({"lr": float("nan")}, "`lr` must be a finite number"),
        ({"lr": 2.0, "constrained": True}, r"`lr` must be in \[0, 1\] when constrained"),
        ({"scale": -1.0}, "`scale` must be > 0"),
        ({"ns_steps": 0}, "`ns_steps` must be a positive integer"),
        ({"norm": "spectral"}, "norm 'spectral' needs a matrix, got a parameter of shape \\(3,\\)"),
    ],
)
def test_bad_arguments_are_refused_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Scion([nn.Parameter(torch.ones(3))], **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"norm": "spectal"}, r"`norm` must be one of \['spectral', 'sign', 'colnorm', 'rms', 'auto'\], got 'spectal'"),
        ({"scale": -1.0}, "`scale` must be > 0, got -1.0"),
        ({"norm": "spectral"}, "given a model, the norms are chosen by role .* `norm` must be 'auto', got 'spectral'"),
    ],
)
def test_a_model_with_a_bad_or_ignored_setting_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):  # all three were silently ignored given a model
        Scion(_untied_llama(), lr=0.02, **kwargs)


def test_given_a_model_scale_is_every_roles_radius():
    optimizer = Scion(_untied_llama(), lr=0.02, scale=3.0)
    assert {group["norm"]: group["scale"] for group in optimizer.param_groups} == dict.fromkeys(
        ("spectral", "sign", "colnorm", "rms"), 3.0
    )


def test_a_refused_group_is_not_kept():
    optimizer = Scion([nn.Parameter(torch.ones(2, 2))])
    with pytest.raises(ValueError, match="`alpha` must be in"):
        optimizer.add_param_group({"params": [nn.Parameter(torch.ones(2))], "alpha": 2.0})
    assert len(optimizer.param_groups) == 1


def test_unknown_scale_names_are_refused():
    with pytest.raises(ValueError, match=r"`scales` keys must be among \['spectral', 'sign', 'colnorm', 'rms'\]"):
        scion_param_groups(_untied_llama(), {"head": 1.0})


def test_through_the_trainer_both_ways(trained_both_ways):
    direct, by_class = trained_both_ways(_untied_llama, Scion, scion_param_groups, lr=0.02)
    assert direct == pytest.approx(by_class)
    assert direct[-1] < direct[0]


def _experts(shape=(4, 12, 8), seed=0):
    return nn.Parameter(_randn(*shape, seed=seed).float())


@pytest.mark.parametrize("shape", [(4, 12, 8), (4, 8, 12)])
def test_each_expert_of_a_stack_steps_as_that_expert_alone(shape):
    """The old step read a (4, 12, 8) tensor as one (4, 96) matrix: each expert's update 1/10th of its own LMO."""
    stacked = _experts(shape)
    alone = [nn.Parameter(m.detach().clone()) for m in stacked]
    grad = _randn(*shape, seed=1).float()
    stacked.grad = grad.clone()
    for p, g in zip(alone, grad, strict=True):
        p.grad = g.clone()
    Scion([{"params": [stacked], "stacked": True}], lr=0.1, alpha=0.5).step()
    Scion(alone, lr=0.1, alpha=0.5).step()
    torch.testing.assert_close(stacked.detach(), torch.stack([p.detach() for p in alone]), rtol=1e-5, atol=1e-6)


def test_stacked_experts_stored_transposed_step_as_their_maps():
    """Experts stored (experts, in, out) (`is_transposed`): each expert's update is its map's, transposed back."""
    maps = _experts((3, 12, 8))
    stored = nn.Parameter(maps.detach().mT.contiguous())
    maps.grad = _randn(3, 12, 8, seed=1).float()
    stored.grad = maps.grad.mT.contiguous()
    Scion([{"params": [maps], "stacked": True}], lr=0.1).step()
    Scion([{"params": [stored], "stacked": True, "transposed": True}], lr=0.1).step()
    torch.testing.assert_close(stored.detach(), maps.detach().mT, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(EXACT))
def test_on_a_stack_the_dual_norm_sums_the_experts_and_the_primal_takes_the_largest(name):
    norm, stack = EXACT[name], _randn(3, 6, 10)
    assert norm.dual(stack) == pytest.approx(sum(norm.dual(m) for m in stack), rel=1e-6)  # svdvals in float32
    assert norm.primal(stack) == pytest.approx(max(norm.primal(m) for m in stack), rel=1e-6)
    torch.testing.assert_close(norm.lmo(stack), torch.stack([norm.lmo(m) for m in stack]), rtol=1e-9, atol=1e-12)


def test_norm_matched_init_puts_each_expert_on_its_sphere():
    experts = _experts((4, 12, 8))
    optimizer = Scion([{"params": [experts], "stacked": True, "scale": 2.0}])
    optimizer.norm_matched_init_(torch.Generator().manual_seed(0))
    for matrix in experts.detach():
        assert optimizer.primal_norm({experts: matrix.expand(1, 12, 8)}) * 2.0 == pytest.approx(2.0, rel=1e-5)


def test_a_tensor_of_three_dimensions_needs_its_group_to_say_stacked():
    with pytest.raises(ValueError, match=r"shape \(4, 12, 8\) needs its group's `stacked` set: True for a stack"):
        Scion([_experts()])
    Scion([{"params": [_experts()], "stacked": False}])  # a convolution kernel: one (out, in * k) matrix


def test_conv1d_weights_step_as_the_transposed_linear():
    """GPT-2's Conv1D stores (in, out): the spectral scale is sqrt(d_out/d_in) of the map, not of the stored axes (the
    old step moved c_fc 0.25x and mlp.c_proj 4x as far as the equivalent nn.Linear)."""
    from transformers.pytorch_utils import Conv1D

    conv = Conv1D(nf=32, nx=8)  # 8 -> 32, stored (8, 32)
    linear = nn.Linear(8, 32)
    with torch.no_grad():
        linear.weight.copy_(conv.weight.T)
        linear.bias.copy_(conv.bias)
    x = _randn(5, 8).float()
    for module in (conv, linear):
        module(x).square().sum().backward()
        Scion(module, lr=0.1).step()
    torch.testing.assert_close(conv.weight.detach(), linear.weight.detach().T, rtol=1e-5, atol=1e-6)


def test_roles_come_from_the_model_layout_so_a_classifier_is_a_head():
    """BERT's `classifier` is the head though get_output_embeddings() is None (the old grouping made it spectral)."""
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(
        vocab_size=40, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32, num_labels=3
    )
    model = BertForSequenceClassification(config)
    norm_of = {id(p): group["norm"] for group in scion_param_groups(model) for p in group["params"]}
    assert norm_of[id(model.classifier.weight)] == "sign"
    assert norm_of[id(model.bert.pooler.dense.weight)] == "spectral"
    assert norm_of[id(model.bert.embeddings.word_embeddings.weight)] == "colnorm"


def test_a_nan_gradient_is_refused_by_name_before_any_weight_or_momentum_changes():
    """The old step wrote the NaN into every weight it touched."""
    model = _untied_llama()
    optimizer = Scion(model, lr=0.05)
    batch = {"input_ids": torch.tensor([[1, 5, 7, 9]]), "labels": torch.tensor([[1, 5, 7, 9]])}
    model(**batch).loss.backward()
    optimizer.step()
    weights = copy.deepcopy(model.state_dict())
    momentum = {p: state["momentum_buffer"].clone() for p, state in optimizer.state.items()}
    model.zero_grad()
    model(**batch).loss.backward()
    model.model.layers[1].mlp.up_proj.weight.grad[3, 2] = float("nan")
    position = next(
        (g, i)
        for g, group in enumerate(optimizer.param_groups)
        for i, p in enumerate(group["params"])
        if p is model.model.layers[1].mlp.up_proj.weight
    )
    message = rf"Scion: the gradient of param_groups\[{position[0]}\]\['params'\]\[{position[1]}\] \(shape \(32, 16\)\)"
    with pytest.raises(FloatingPointError, match=message + " holds NaN or inf; stopped before any weight changed"):
        optimizer.step()
    for name, value in model.state_dict().items():
        assert torch.equal(value, weights[name]), name
    assert all(torch.equal(state["momentum_buffer"], momentum[p]) for p, state in optimizer.state.items())


def test_a_nan_gradient_is_named_by_the_groups_param_names_when_it_has_them():
    model = _untied_llama()
    optimizer = Scion(list(model.named_parameters()), lr=0.05)
    model(input_ids=torch.tensor([[1, 5]]), labels=torch.tensor([[1, 5]])).loss.backward()
    model.lm_head.weight.grad[0, 0] = float("inf")
    with pytest.raises(FloatingPointError, match="the gradient of lm_head.weight holds NaN or inf"):
        optimizer.step()


def _same_shapes_groups():
    """Spectral matrices of two shapes (three 8x8, two 16x8; three 8x8 experts; a 16x8 map stored transposed with
    another scale), a vector and a head, with gradients."""
    torch.manual_seed(0)
    square = [nn.Parameter(torch.randn(8, 8)) for _ in range(3)]
    tall = [nn.Parameter(torch.randn(16, 8)) for _ in range(2)]
    groups = [
        {"params": square + tall, "norm": "spectral"},
        {"params": [nn.Parameter(torch.randn(3, 8, 8))], "norm": "spectral", "stacked": True},
        {"params": [nn.Parameter(torch.randn(8, 16))], "norm": "spectral", "transposed": True, "scale": 2.0},
        {"params": [nn.Parameter(torch.randn(8))], "norm": "rms"},
        {"params": [nn.Parameter(torch.randn(10, 8))], "norm": "sign"},
    ]
    for group in groups:
        for p in group["params"]:
            p.grad = torch.randn_like(p)
    return groups


def test_matrices_of_one_shape_go_through_newton_schulz_together_each_as_alone(monkeypatch):
    """One Newton-Schulz call per matrix shape, layout and scale (the three 8x8 matrices and the three experts; the two
    16x8; the transposed one), each matrix's step its own LMO's; the old step called it once per parameter."""
    from hf_ext.optim.scion import optimizer as scion

    groups = _same_shapes_groups()
    before = [[p.detach().clone() for p in group["params"]] for group in groups]
    calls = []
    monkeypatch.setattr(scion, "newton_schulz", lambda x, *args: calls.append(x.shape) or newton_schulz(x, *args))
    Scion(groups, lr=0.1, alpha=0.5).step()
    assert sorted(calls) == [(1, 16, 8), (2, 16, 8), (6, 8, 8)]
    for group, start in zip(groups, before, strict=True):  # Scion filled in each group's defaults
        norm = {"spectral": Spectral(), "rms": RMS(), "sign": Sign()}[group["norm"]]
        for p, p0 in zip(group["params"], start, strict=True):
            layout = Scion._layout(group, p)
            direction = layout.from_matrices(norm.lmo(layout.matrices(0.5 * p.grad)))
            expected = p0 + 0.1 * group["scale"] * direction
            torch.testing.assert_close(p.detach(), expected, rtol=1e-5, atol=1e-6)


def test_a_step_reads_one_value_on_the_host_the_nan_check(host_reads):
    """The NaN refusal's verdict is the step's one host sync (a device sync on a GPU); nothing else reads a value."""
    optimizer = Scion(_same_shapes_groups(), lr=0.1)
    for _ in range(2):
        with host_reads() as reads:
            optimizer.step()
        assert reads == {"__bool__": 1}


def test_a_compiled_step_compiles_once_and_steps_as_the_eager_one():
    """torch.compile(optimizer.step): the momentum created at the first step made the second compile again."""
    models = [_untied_llama() for _ in range(2)]
    optimizers = [Scion(model, lr=0.05) for model in models]
    steps = [optimizers[0].step, torch.compile(optimizers[1].step)]
    torch._dynamo.reset()
    for index in range(3):
        with torch._dynamo.config.patch(error_on_recompile=index > 0):
            for model, step in zip(models, steps, strict=True):
                model.zero_grad()
                model(torch.tensor([[1, 2, 3]])).logits.square().mean().backward()
                step()
    for eager, compiled in zip(models[0].parameters(), models[1].parameters(), strict=True):
        torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-6)
