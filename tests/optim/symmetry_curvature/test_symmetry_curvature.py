import copy
import math

import pytest
import torch
from torch import nn
from torch._dynamo.utils import counters
from transformers import BertConfig, BertForSequenceClassification, LlamaConfig, LlamaForCausalLM
from transformers.pytorch_utils import Conv1D

from hf_ext.optim import SymmetryCurvature, SymmetryGroup, inverse_root, newton_schulz, symmetry_param_groups
from hf_ext.optim.shared.newton_schulz import CUBIC

TINY = 1e-12  # relative damping small enough for the exact reductions (in float64: float32's rounding needs ~1e-6)


def _randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _one_step(g, **kwargs):
    """The change of a zero parameter after one step on gradient ``g`` with lr 1."""
    param = nn.Parameter(torch.zeros_like(g))
    param.grad = g.clone()
    SymmetryCurvature([param], lr=1.0, **kwargs).step()
    return -param.detach()


def _polar(g):
    u, _, vh = torch.linalg.svd(g.double(), full_matrices=False)
    return (u @ vh).to(g.dtype)


@pytest.mark.parametrize("rows", ["orthogonal", "signed_permutation"])
@pytest.mark.parametrize("shape", [(8, 5), (5, 8)])
def test_one_sided_identity_on_one_gradient_is_muons_orthogonalised_update(rows, shape):
    g = _randn(*shape, dtype=torch.float64)
    step = _one_step(g, group=(rows, "identity"), betas=(0.0, 0.0), damping=TINY)
    scale = math.sqrt(shape[0])  # S = I kron G^T G / out: the step is sqrt(out) U V^T
    torch.testing.assert_close(step / scale, _polar(g))
    default = _one_step(g.float(), group=(rows, "identity"), betas=(0.0, 0.0))  # float32, default damping 1e-6
    torch.testing.assert_close(default / scale, _polar(g).float(), atol=2e-3, rtol=0)
    torch.testing.assert_close(step / scale, newton_schulz(g, steps=60, coefficients=CUBIC))
    # torch.optim.Muon on the same gradient: its quintic Newton-Schulz (bfloat16) only approximates U V^T.
    param = nn.Parameter(torch.zeros(shape))
    param.grad = g.float()
    torch.optim.Muon([param], lr=1.0, momentum=0.0, nesterov=False, adjust_lr_fn="original").step()
    muon = -param.detach() / math.sqrt(max(1, shape[0] / shape[1]))
    cosine = torch.nn.functional.cosine_similarity(muon.flatten(), (step / scale).float().flatten(), dim=0)
    assert cosine > 0.97
    singular = torch.linalg.svdvals(muon)
    assert singular.min() > 0.6 and singular.max() < 1.25  # Muon's band around the exact singular values 1


def test_the_same_step_is_shampoos_inverse_fourth_roots():
    g = _randn(6, 6, seed=1, dtype=torch.float64)
    step = _one_step(g, group="orthogonal", betas=(0.0, 0.0), damping=TINY)
    shampoo = inverse_root(g @ g.T, 4) @ g @ inverse_root(g.T @ g, 4)
    torch.testing.assert_close(step / math.sqrt(6), shampoo)


@pytest.mark.parametrize("damping", [TINY, 1e-6, 1e-2])
def test_scaling_on_both_sides_is_adam_with_the_damping_inside_the_root(damping):
    """``m_hat / sqrt(v_hat + damping * mean(v_hat))``: ``torch.optim.Adam(eps=0)`` only as the damping goes to 0.

    One coordinate's gradient is 1e-4 of the others': its ``v`` is below ``damping * mean(v)`` from damping 1e-6
    (the default) on, and its step shrinks by 10x there and 1000x at 1e-2, where Adam(eps=0) steps it by ``lr``."""
    ours, adam = nn.Parameter(_randn(4, 3, seed=2, dtype=torch.float64)), nn.Parameter(_randn(4, 3, seed=2))
    adam.data = ours.detach().clone()
    opt = SymmetryCurvature([ours], lr=0.1, group=("scaling", "scaling"), betas=(0.9, 0.95), damping=damping)
    ref = torch.optim.Adam([adam], lr=0.1, betas=(0.9, 0.95), eps=0.0)
    x, m, v = ours.detach().clone(), torch.zeros(4, 3, dtype=torch.float64), torch.zeros(4, 3, dtype=torch.float64)
    for step in range(1, 5):
        g = _randn(4, 3, seed=10 + step, dtype=torch.float64)
        g[0, 0] *= 1e-4
        for p, o in ((ours, opt), (adam, ref)):
            p.grad = g.clone()
            o.step()
        m, v = 0.9 * m + 0.1 * g, 0.95 * v + 0.05 * g.square()
        m_hat, v_hat = m / (1 - 0.9**step), v / (1 - 0.95**step)
        x = x - 0.1 * m_hat / (v_hat + damping * v_hat.mean()).sqrt()
    torch.testing.assert_close(ours.detach(), x)
    others = torch.ones(4, 3, dtype=torch.bool)
    others[0, 0] = False
    torch.testing.assert_close(ours.detach()[others], adam.detach()[others], atol=damping * 10, rtol=0)
    if damping == TINY:  # the tiny coordinate's v is 1e-8 of the mean: relative difference damping * 1e8 / 2
        torch.testing.assert_close(ours.detach(), adam.detach(), rtol=1e-4, atol=0)
    else:  # the tiny coordinate: Adam(eps=0) moved it by about lr per step, the damped root far less
        assert (adam.detach()[0, 0] - ours.detach()[0, 0]).abs() > 0.1


def test_bfloat16_parameters_step_as_float32_ones_within_bfloat16_rounding():
    """One 8 x 8 layer, lr 1: a bfloat16 S and momentum made this first step up to twice the float32 one (their
    rounding, outside S's range, multiplied by damping^(-1/2)); in float32 the bf16 step is the float32 step
    rounded once (2^-8 relative) plus the bf16 gradient's own rounding (2^-8): within 2 * 2^-8 of its largest entry."""
    g = _randn(8, 8, seed=5)
    low, high = _one_step(g.bfloat16()), _one_step(g.bfloat16().float())
    torch.testing.assert_close(low.float(), high, atol=2 * 2**-8 * high.abs().max().item(), rtol=0)
    param = nn.Parameter(torch.zeros(8, 8, dtype=torch.bfloat16))
    param.grad = g.bfloat16()
    optimizer = SymmetryCurvature([param], lr=1.0)
    optimizer.step()
    assert {name: optimizer.state[param][name].dtype for name in ("exp_avg", "moment", "mean_square")} == dict.fromkeys(
        ("exp_avg", "moment", "mean_square"), torch.float32
    )
    restored = SymmetryCurvature([nn.Parameter(param.detach().clone())], lr=1.0)
    restored.load_state_dict(copy.deepcopy(optimizer.state_dict()))  # torch would round the state to bfloat16
    for name in ("exp_avg", "moment", "mean_square"):
        saved = optimizer.state[param][name]
        assert torch.equal(restored.state[restored.param_groups[0]["params"][0]][name], saved), name


def test_two_steps_of_momentum_and_ema_by_hand():
    g1, g2 = _randn(4, 3, seed=3), _randn(4, 3, seed=4)
    param = nn.Parameter(torch.zeros(4, 3))
    opt = SymmetryCurvature([param], lr=0.5, group="permutation", betas=(0.5, 0.25), damping=1e-3, weight_decay=0.1)
    for g in (g1, g2):
        param.grad = g
        before = param.detach().clone()
        opt.step()
    group = SymmetryGroup("permutation", "identity")
    momentum = (0.5 * 0.5 * g1 + 0.5 * g2) / (1 - 0.25)
    moment = (0.25 * 0.75 * group.second_moment(g1) + 0.75 * group.second_moment(g2)) / (1 - 0.0625)
    mean_square = (0.25 * 0.75 * g1.square().mean() + 0.75 * g2.square().mean()) / (1 - 0.0625)
    direction = group.precondition(moment, momentum, damping=1e-3 * mean_square.item())
    torch.testing.assert_close(param.detach(), before * (1 - 0.05) - 0.5 * direction, atol=1e-5, rtol=1e-5)


def _untied_llama():
    config = LlamaConfig(vocab_size=40, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2)
    config.tie_word_embeddings = False
    torch.manual_seed(0)
    return LlamaForCausalLM(config)


def test_the_default_rule_and_name_overrides():
    model = _untied_llama()
    groups = symmetry_param_groups(model, overrides={"*.down_proj.weight": ("identity", "permutation")})
    by_name = {name: group["group"] for group in groups for name in group["param_names"]}
    assert by_name["model.embed_tokens.weight"] == by_name["lm_head.weight"] == ("scaling", "scaling")
    assert by_name["model.norm.weight"] == ("scaling", "scaling")
    assert by_name["model.layers.0.mlp.up_proj.weight"] == ("permutation", "identity")
    assert by_name["model.layers.0.mlp.down_proj.weight"] == ("identity", "permutation")
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    two_sided = symmetry_param_groups(model, hidden=("permutation", "permutation"))
    assert ("permutation", "permutation") in [group["group"] for group in two_sided]


def test_state_dict_round_trip_continues_identically():
    model_a, model_b = _untied_llama(), _untied_llama()
    batch = {"input_ids": torch.tensor([[1, 5, 7, 9]]), "labels": torch.tensor([[1, 5, 7, 9]])}
    opt_a = SymmetryCurvature(model_a, lr=0.01)
    for _ in range(2):
        opt_a.zero_grad()
        model_a(**batch).loss.backward()
        opt_a.step()
    model_b.load_state_dict(model_a.state_dict())
    opt_b = SymmetryCurvature(model_b, lr=0.01)
    opt_b.load_state_dict(copy.deepcopy(opt_a.state_dict()))
    assert opt_b.state_dict()["state"][0]["step"] == 2
    for model, opt in ((model_a, opt_a), (model_b, opt_b)):
        opt.zero_grad()
        model(**batch).loss.backward()
        opt.step()
    for (name, a), b in zip(model_a.state_dict().items(), model_b.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def test_a_group_that_does_not_fit_the_layer_is_refused_naming_it():
    mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    with pytest.raises(ValueError, match=r"'0.bias' of shape \(8,\) \(a 1 x 8 matrix\).*'permutation' needs at least"):
        SymmetryCurvature(symmetry_param_groups(mlp, overrides={"0.bias": "permutation"}))
    with pytest.raises(ValueError, match=r"'2.weight' of shape \(3, 8\).*identity on both sides"):
        SymmetryCurvature(symmetry_param_groups(mlp, overrides={"2.weight": ("identity", "identity")}))
    with pytest.raises(ValueError, match=r"`group` of param_groups\[0\] must be 'auto', one of \['identity'"):
        SymmetryCurvature([{"params": mlp.parameters(), "group": "rotation"}])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lr": float("nan")}, "`lr` must be a finite number"),
        ({"lr": -1.0}, "`lr` must be >= 0"),
        ({"damping": 0.0}, "`damping` must be > 0"),
        ({"damping": float("inf")}, "`damping` must be a finite number"),
        ({"betas": (0.9, 1.0)}, r"`betas` must be two numbers in \[0, 1\)"),
        ({"weight_decay": -0.1}, "`weight_decay` must be >= 0"),
    ],
)
def test_bad_arguments_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SymmetryCurvature([nn.Parameter(torch.ones(3, 2))], **kwargs)


def test_through_the_trainer_both_ways(trained_both_ways):
    direct, by_class = trained_both_ways(_untied_llama, SymmetryCurvature, symmetry_param_groups, lr=0.01)
    assert direct == pytest.approx(by_class)
    assert direct[-1] < direct[0]


def _conv1d_and_linear_twin(d_in, d_out):
    """A GPT-2 ``Conv1D`` (weight stored ``(in, out)``) and the ``nn.Linear`` holding the same map, in float64: their
    gradients differ by rounding, which ``S^(-1/2)`` multiplies by up to ``damping^(-1/2)`` in ``S``'s null space."""
    conv = Conv1D(d_out, d_in).double()
    with torch.no_grad():
        conv.weight.copy_(_randn(d_in, d_out, seed=6))
    linear = nn.Linear(d_in, d_out).double()
    with torch.no_grad():
        linear.weight.copy_(conv.weight.T)
        linear.bias.copy_(conv.bias)
    return conv, linear


@pytest.mark.parametrize("shape", [(5, 8), (8, 8), (8, 5)])
@pytest.mark.parametrize("given", ["model", "groups"])
def test_a_conv1d_weight_steps_as_the_transpose_of_its_linear_twin(shape, given):
    """The group acts on the output units of the map, whichever way the weight is stored: the square case too
    (the old code permuted the inputs of a Conv1D, 16% off on GPT-2's square c_proj)."""
    conv, linear = _conv1d_and_linear_twin(*shape)
    if given == "model":
        optimizers = [SymmetryCurvature(m, lr=0.1) for m in (conv, linear)]
    else:  # a user's groups state the layout with `transposed`
        optimizers = [
            SymmetryCurvature([{"params": [conv.weight], "transposed": True}, {"params": [conv.bias]}], lr=0.1),
            SymmetryCurvature([{"params": [linear.weight]}, {"params": [linear.bias]}], lr=0.1),
        ]
    for seed in (7, 8):
        x = _randn(6, shape[0], seed=seed, dtype=torch.float64)
        for module, optimizer in zip((conv, linear), optimizers, strict=True):
            optimizer.zero_grad()
            module(x).square().sum().backward()
            optimizer.step()
    torch.testing.assert_close(conv.weight.detach(), linear.weight.detach().T)
    torch.testing.assert_close(conv.bias.detach(), linear.bias.detach())


class _Experts(nn.Module):
    """A transformers-5 experts module: ``(experts, out, in)``, or ``(experts, in, out)`` with ``is_transposed``."""

    def __init__(self, stacked: torch.Tensor, is_transposed: bool):
        super().__init__()
        self.is_transposed = is_transposed
        self.down_proj = nn.Parameter(stacked.mT.clone() if is_transposed else stacked.clone())


@pytest.mark.parametrize("is_transposed", [False, True])
@pytest.mark.parametrize("group", ["auto", "orthogonal", ("identity", "permutation"), ("scaling", "scaling")])
def test_each_expert_steps_as_alone_with_e_times_one_experts_state(is_transposed, group):
    """An expert tensor is E matrices: each moves as that expert alone would, its state (momentum, S, mean of g^2)
    is E times one expert's (the old code: one dense (E, out*in) factor, 480 MiB for Mixtral's 0.34 MiB), and
    stacked with the experts along the first axis."""
    experts, rows, cols = 3, 6, 4
    weights = _randn(experts, rows, cols, seed=9, dtype=torch.float64)  # float64: rounding x damping^(-1/2) negligible
    stacked = _Experts(weights, is_transposed)
    alone = [nn.Parameter(w.clone()) for w in weights]
    optimizer = SymmetryCurvature(stacked, lr=0.1, group=group)
    lone = [SymmetryCurvature([p], lr=0.1, group=group) for p in alone]
    for seed in (10, 11):
        grads = _randn(experts, rows, cols, seed=seed, dtype=torch.float64)
        stacked.down_proj.grad = grads.mT.clone() if is_transposed else grads.clone()
        optimizer.step()
        for p, g, o in zip(alone, grads, lone, strict=True):
            p.grad = g.clone()
            o.step()
    moved = stacked.down_proj.detach().mT if is_transposed else stacked.down_proj.detach()
    torch.testing.assert_close(moved, torch.stack([p.detach() for p in alone]))
    state = optimizer.state[stacked.down_proj]
    for name in ("exp_avg", "moment", "mean_square"):
        one = lone[0].state[alone[0]][name]
        assert state[name].numel() == experts * one.numel(), name
    assert state["moment"].shape[0] == state["mean_square"].shape[0] == experts


def test_a_stacked_group_needs_3d_parameters_and_layout_keys_are_booleans():
    with pytest.raises(ValueError, match=r"param_groups\[0\] is `stacked` \(experts, out, in\), but parameter"):
        SymmetryCurvature([{"params": [nn.Parameter(torch.ones(3, 2))], "stacked": True}])
    with pytest.raises(TypeError, match=r"`transposed` of param_groups\[0\] must be True or False, got 'yes'"):
        SymmetryCurvature([{"params": [nn.Parameter(torch.ones(3, 2))], "transposed": "yes"}])


class _GatedMLP(nn.Module):
    """Qwen2-MoE's shared expert and its gate, a one-row matrix (``Linear(hidden, 1)``)."""

    def __init__(self):
        super().__init__()
        self.up = nn.Linear(4, 8)
        self.shared_expert_gate = nn.Linear(4, 1, bias=False)


def test_auto_gives_a_one_row_matrix_the_fallback_and_a_named_group_is_refused_naming_it():
    model = _GatedMLP()
    by_name = {n: g["group"] for g in SymmetryCurvature(model).param_groups for n in g["param_names"]}
    assert by_name["shared_expert_gate.weight"] == ("scaling", "scaling")
    assert by_name["up.weight"] == ("permutation", "identity")
    with pytest.raises(ValueError, match=r"'shared_expert_gate.weight' of shape \(1, 4\).*'permutation' needs"):
        SymmetryCurvature(model, group="permutation")


def test_classification_heads_get_the_fallback_though_get_output_embeddings_is_none():
    config = BertConfig(
        vocab_size=40, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16, num_labels=3
    )
    groups = symmetry_param_groups(BertForSequenceClassification(config))
    by_name = {n: g["group"] for g in groups for n in g["param_names"]}
    assert by_name["classifier.weight"] == ("scaling", "scaling")
    assert by_name["bert.embeddings.word_embeddings.weight"] == ("scaling", "scaling")
    assert by_name["bert.pooler.dense.weight"] == ("permutation", "identity")


@pytest.mark.parametrize("group", ["orthogonal", ("permutation", "permutation")])
def test_group_given_with_a_model_sets_its_hidden_matrices_group(group):
    model = _untied_llama()
    by_name = {n: g["group"] for g in SymmetryCurvature(model, group=group).param_groups for n in g["param_names"]}
    expected = (group, "identity") if isinstance(group, str) else group
    assert by_name["model.layers.0.mlp.up_proj.weight"] == by_name["model.layers.0.self_attn.q_proj.weight"] == expected
    assert by_name["lm_head.weight"] == by_name["model.norm.weight"] == ("scaling", "scaling")


@pytest.mark.parametrize("params", ["model", "parameters"])
def test_an_unknown_group_names_group_and_the_allowed_values(params):
    mlp = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    with pytest.raises(ValueError, match=r"^SymmetryCurvature: `group` must be 'auto', one of \['identity', 'scaling'"):
        SymmetryCurvature(mlp if params == "model" else mlp.parameters(), group="bogus")
    with pytest.raises(ValueError, match=r"symmetry_param_groups: `hidden` must be 'auto', one of"):
        symmetry_param_groups(mlp, hidden="bogus")


def test_add_param_group_says_whether_to_pass_param_names():
    named = SymmetryCurvature(nn.Linear(4, 3))
    with pytest.raises(ValueError, match=r"^SymmetryCurvature.add_param_group: pass `param_names` \(one name per"):
        named.add_param_group({"params": [nn.Parameter(torch.ones(2, 2))]})
    unnamed = SymmetryCurvature([nn.Parameter(torch.ones(2, 2))])
    with pytest.raises(ValueError, match=r"^SymmetryCurvature.add_param_group: leave out `param_names`"):
        unnamed.add_param_group({"params": [nn.Parameter(torch.ones(2, 2))], "param_names": ["extra"]})
    named.add_param_group({"params": [nn.Parameter(torch.ones(2, 2))], "param_names": ["extra"]})
    assert len(named.param_groups) == 3


class _SmallNet(nn.Module):
    """Every path of the step: biases (a diagonal S, foreach), two hidden matrices of one shape (one batched root),
    two of others, and an experts tensor (3 matrices of 2 x 8, batched with their own S)."""

    def __init__(self):
        super().__init__()
        self.inp, self.mid, self.mid2 = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 8)
        self.experts = nn.Parameter(_randn(3, 2, 8, seed=12) * 0.3)

    def forward(self, x):
        h = torch.relu(self.mid2(torch.relu(self.mid(torch.relu(self.inp(x))))))
        return torch.einsum("bi,eoi->bo", h, self.experts)


def _small_net_and_closure(lr=0.01):
    torch.manual_seed(0)
    model = _SmallNet()
    optimizer = SymmetryCurvature(model, lr=lr, weight_decay=0.1)
    x, y = _randn(6, 4, seed=13), _randn(6, 2, seed=14)

    def closure():
        optimizer.zero_grad()
        loss = (model(x) - y).square().mean()
        loss.backward()
        return loss

    return model, optimizer, closure


def test_torch_compile_compiles_the_step_once_and_matches_eager(compiled_and_eager):
    """State made in ``_init_group`` (run as Python while tracing), step counts and ``lr`` (a tensor, under a
    scheduler) as tensors: compiled, the step compiles at the first call and never again (the old Python step
    counter recompiled it at every step), and moves the parameters as the eager step does."""
    eager, compiled = compiled_and_eager(lambda: _small_net_and_closure(lr=torch.tensor(0.01)))
    for a, b in zip(eager, compiled, strict=True):
        torch.testing.assert_close(b, a)


def test_a_compiled_step_of_two_groups_is_traced_whole():
    """The step reads the state from ``_init_group``'s lists: from ``self.state``, the trace missed what the call for
    the second group made, gave the step up and compiled it piece by piece (56 frames here)."""
    weights = [nn.Parameter(_randn(8, 8, seed=seed)) for seed in (1, 2)]
    optimizer = SymmetryCurvature([{"params": [weights[0]]}, {"params": [weights[1]]}], lr=0.01)
    for seed, weight in enumerate(weights):
        weight.grad = _randn(8, 8, seed=seed + 3)
    torch._dynamo.reset()
    frames = counters["frames"].copy()
    torch.compile(optimizer.step, backend="aot_eager")()
    torch._dynamo.reset()
    traced = counters["frames"] - frames
    assert traced["total"] == traced["ok"] == 1  # torch.optim's step wrapper, with the step inlined


def test_a_step_reads_nothing_from_the_device(host_reads):
    _, optimizer, closure = _small_net_and_closure()
    for _ in range(2):
        with host_reads() as reads:
            optimizer.step(closure)
        assert not reads


def test_matrices_of_one_shape_share_one_batched_root_call(monkeypatch):
    """The two 8 x 8 layers' inverse roots come from one eigendecomposition call on their stacked S (the old step
    called it once per parameter), the experts' three from another, the first layer's from one of its own; a chunk
    holds at most BATCH_ELEMENTS numbers of S, and at least one parameter whole."""
    batches = []
    eigh = torch.linalg.eigh

    def counted(matrix, *args, **kwargs):
        batches.append(tuple(matrix.shape[:-2]))
        return eigh(matrix, *args, **kwargs)

    monkeypatch.setattr(torch.linalg, "eigh", counted)
    _, optimizer, closure = _small_net_and_closure()
    optimizer.step(closure)
    assert sorted(batches) == [(1, 2), (2, 2), (3, 2)]  # (matrices, blocks of S): inp, mid and mid2, experts
    batches.clear()
    monkeypatch.setattr("hf_ext.optim.symmetry_curvature.optimizer.BATCH_ELEMENTS", 2 * 8 * 8)  # one 8 x 8 layer's
    optimizer.step(closure)
    assert sorted(batches) == [(1, 2), (1, 2), (1, 2), (3, 2)]
