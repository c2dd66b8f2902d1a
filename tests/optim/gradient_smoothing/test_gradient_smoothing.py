import collections
import copy

import pytest
import torch
import torch.distributed as dist
import transformers as tf
from torch import nn
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func
from torch.distributed.fsdp import fully_shard
from torch.profiler import ProfilerActivity, profile

from hf_ext._sharded import Sharding
from hf_ext.models import load_minilm, tiny_causal_lm
from hf_ext.optim import GradientSmoothing, GradientSmoothingFactory, find_blocks, smoothing_matrix
from hf_ext.optim.gradient_smoothing import smoothing


class Stack(nn.Module):
    """A toy depth stack: ``depth`` identical blocks of one weight (out x in) and a bias, plus a head."""

    def __init__(self, depth=4, width=3, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.layers = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return self.head(x)


def _train(model, optimizer, steps=3, seed=1):
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(8, model.layers[0].in_features, generator=generator)
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        optimizer.step()


BASES = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
    "adamw": lambda params: torch.optim.AdamW(params, lr=1e-2),
    "muon": lambda params: torch.optim.Muon([p for p in params if p.dim() == 2], lr=1e-2),
}


@pytest.mark.parametrize("base", sorted(BASES))
@pytest.mark.parametrize("mode", ["update", "gradient"])
def test_a_window_of_one_is_the_base_optimizer_bit_for_bit(base, mode):
    plain, smoothed = Stack(), Stack()
    _train(plain, BASES[base](list(plain.parameters())))
    _train(smoothed, GradientSmoothing(BASES[base](list(smoothed.parameters())), smoothed, window=1, mode=mode))
    for (name, expected), actual in zip(plain.state_dict().items(), smoothed.state_dict().values(), strict=True):
        assert torch.equal(actual, expected), name


def test_matrix_uniform_window_renormalises_at_the_ends():
    expected = torch.tensor(
        [[1 / 2, 1 / 2, 0, 0], [1 / 3, 1 / 3, 1 / 3, 0], [0, 1 / 3, 1 / 3, 1 / 3], [0, 0, 1 / 2, 1 / 2]]
    )
    torch.testing.assert_close(smoothing_matrix(4, 3), expected)


def test_matrix_triangular_and_truncated_boundary():
    triangular = smoothing_matrix(4, 3, kernel="triangular")  # distance weights 2, 1
    torch.testing.assert_close(triangular[0], torch.tensor([2 / 3, 1 / 3, 0, 0]))
    torch.testing.assert_close(triangular[1], torch.tensor([1 / 4, 2 / 4, 1 / 4, 0]))
    truncated = smoothing_matrix(4, 3, kernel="triangular", boundary="truncate")
    torch.testing.assert_close(truncated[0], torch.tensor([2 / 4, 1 / 4, 0, 0]))
    torch.testing.assert_close(truncated[1], triangular[1])


def test_matrix_gaussian_and_explicit_weights():
    gaussian = smoothing_matrix(5, 5, kernel="gaussian", sigma=1.0)
    weights = torch.tensor([1.0, torch.e**-0.5, torch.e**-2])
    torch.testing.assert_close(
        gaussian[2], torch.cat([weights.flip(0), weights[1:]]) / (weights[0] + 2 * weights[1:].sum())
    )
    custom = smoothing_matrix(3, 3, weights=[0.0, 1.0])  # neighbours only
    torch.testing.assert_close(custom, torch.tensor([[0, 1, 0], [1 / 2, 0, 1 / 2], [0, 1, 0]]).float())


def test_sgd_updates_are_averaged_over_neighbours_by_hand():
    """loss = sum_l c_l . w_l, SGD lr 1: U_l = -c_l; smoothed U_0 = -(c_0 + c_1)/2, U_1 = -(c_0 + c_1 + c_2)/3, ..."""
    stack = Stack(depth=3, width=2)
    start = [layer.weight.detach().clone() for layer in stack.layers]
    coefficients = [1.0, 4.0, 7.0]
    optimizer = GradientSmoothing(torch.optim.SGD([layer.weight for layer in stack.layers], lr=1.0), stack, window=3)
    sum(c * layer.weight.sum() for c, layer in zip(coefficients, stack.layers, strict=True)).backward()
    optimizer.step()
    for layer, initial, update in zip(stack.layers, start, [-2.5, -4.0, -5.5], strict=True):
        torch.testing.assert_close(layer.weight.detach(), initial + update)


def test_update_and_gradient_modes_agree_for_plain_sgd_and_differ_for_adam():
    results = {}
    for base in ("sgd", "adam"):
        for mode in ("update", "gradient"):
            model = Stack()
            inner = (
                torch.optim.SGD(model.parameters(), lr=0.1)
                if base == "sgd"
                else torch.optim.Adam(model.parameters(), lr=1e-2)
            )
            _train(model, GradientSmoothing(inner, model, window=3, mode=mode))
            results[base, mode] = torch.cat([p.detach().flatten() for p in model.layers.parameters()])
    torch.testing.assert_close(results["sgd", "update"], results["sgd", "gradient"])
    assert not torch.allclose(results["adam", "update"], results["adam", "gradient"])


def test_parameters_outside_the_blocks_follow_the_base_optimizer():
    plain, smoothed = Stack(), Stack()
    _train(plain, torch.optim.SGD(plain.parameters(), lr=0.1), steps=1)
    _train(smoothed, GradientSmoothing(torch.optim.SGD(smoothed.parameters(), lr=0.1), smoothed), steps=1)
    assert torch.equal(plain.head.weight, smoothed.head.weight)  # one step: same gradient, same update
    assert not torch.equal(plain.layers[0].weight, smoothed.layers[0].weight)


def test_state_dict_round_trip_mid_training_resumes_exactly():
    straight = Stack()
    optimizer = GradientSmoothing(torch.optim.AdamW(straight.parameters(), lr=1e-2), straight, window=3)
    _train(straight, optimizer, steps=3)
    saved_model, saved_optimizer = copy.deepcopy(straight.state_dict()), copy.deepcopy(optimizer.state_dict())
    _train(straight, optimizer, steps=2, seed=2)

    resumed = Stack(seed=5)
    resumed.load_state_dict(saved_model)
    resumed_optimizer = GradientSmoothing(torch.optim.AdamW(resumed.parameters(), lr=1e-2), resumed, window=3)
    resumed_optimizer.load_state_dict(saved_optimizer)
    assert resumed_optimizer.state_dict()["state"][0]["step"] == 3
    _train(resumed, resumed_optimizer, steps=2, seed=2)
    for name, tensor in straight.state_dict().items():
        assert torch.equal(resumed.state_dict()[name], tensor), name


def test_a_deep_copy_carries_the_base_optimizer_and_its_state():
    model = Stack()
    optimizer = GradientSmoothing(torch.optim.AdamW(model.parameters(), lr=1e-2), model)
    _train(model, optimizer, steps=1)
    copied = copy.deepcopy(optimizer)
    assert copied.base_optimizer is not optimizer.base_optimizer
    assert copied.state_dict()["state"][0]["step"] == 1 and copied.mode == "update"


def test_param_groups_are_the_base_optimizers_so_schedulers_reach_it():
    model = Stack()
    base = torch.optim.SGD(model.parameters(), lr=1.0)
    optimizer = GradientSmoothing(base, model)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    _train(model, optimizer, steps=1)
    scheduler.step()
    assert base.param_groups[0]["lr"] == 0.5
    optimizer.load_state_dict(base.state_dict())  # base replaces its group dicts; we must follow
    scheduler.step()
    assert base.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"] == 0.25


def test_blocks_are_found_on_real_transformers_models():
    llama, _ = tiny_causal_lm(num_layers=3)
    name, blocks = find_blocks(llama)
    assert name == "model.layers" and blocks is llama.model.layers
    bert, _ = load_minilm(num_labels=2)
    name, blocks = find_blocks(bert)
    assert name == "bert.encoder.layer" and len(blocks) == 6
    optimizer = GradientSmoothing(torch.optim.AdamW(llama.parameters()), llama)
    assert "mlp.up_proj.weight" in optimizer.roles and len(optimizer.roles["mlp.up_proj.weight"]) == 3


def test_the_factory_builds_it_for_trainer_with_no_decay_on_norms():
    llama, _ = tiny_causal_lm()
    factory = GradientSmoothingFactory()
    optimizer = factory(llama, base_kwargs={"lr": 1e-3, "weight_decay": 0.1}, window=1)
    decays = {group["weight_decay"]: len(group["params"]) for group in optimizer.param_groups}
    norms = sum(1 for name, _ in llama.named_parameters() if "norm" in name)
    assert decays[0.0] == norms and isinstance(optimizer.base_optimizer, torch.optim.AdamW)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"window": 5}, r"`window` \(5\) is wider than the depth \(4 blocks\)"),
        ({"window": 2}, "`window` must be a positive odd integer"),
        ({"weights": [1.0, -0.5]}, "must be finite, non-negative and not all zero"),
        ({"weights": [0.0, 0.0]}, "must be finite, non-negative and not all zero"),
        ({"weights": [1.0]}, r"`weights` must have window // 2 \+ 1 = 2 entries"),
        ({"kernel": "box"}, r"`kernel` must be one of \['uniform', 'triangular', 'gaussian'\]"),
        ({"mode": "both"}, r"`mode` must be one of \['update', 'gradient'\]"),
        ({"boundary": "wrap"}, r"`boundary` must be one of \['renormalize', 'truncate'\]"),
        ({"blocks": "model.layers"}, r"GradientSmoothing: `blocks` names no submodule of Stack"),
        ({"sigma": 1.0}, r"`sigma` is the width of kernel='gaussian' only, got sigma=1.0 with kernel='uniform'"),
    ],
)
def test_bad_settings_name_the_field(kwargs, message):
    model = Stack()
    with pytest.raises(ValueError, match=message):
        GradientSmoothing(torch.optim.SGD(model.parameters(), lr=0.1), model, **kwargs)


def test_blocks_that_differ_are_refused():
    model = Stack()
    model.layers.append(nn.Linear(3, 4))
    with pytest.raises(ValueError, match=r"block 4 differs from block 0 at 'weight'"):
        GradientSmoothing(torch.optim.SGD(model.parameters(), lr=0.1), model, blocks=model.layers)


def _t5():
    config = tf.T5Config(
        vocab_size=50,
        d_model=8,
        d_kv=4,
        d_ff=16,
        num_layers=3,
        num_heads=2,
        dropout_rate=0.0,
        decoder_start_token_id=0,
        pad_token_id=0,
    )
    model = tf.T5ForConditionalGeneration(config)
    ids = torch.randint(0, 50, (2, 5), generator=torch.Generator().manual_seed(0))
    return model, {"input_ids": ids, "labels": ids}


def test_t5_blocks_are_smoothed_on_what_they_share_and_the_extra_bias_steps_unsmoothed():
    """Block 0 alone holds the relative attention bias: it takes the base step; the shared roles are averaged."""
    smoothed, batch = _t5()
    plain = copy.deepcopy(smoothed)
    blocks = smoothed.encoder.block
    start = [block.layer[0].SelfAttention.q.weight.detach().clone() for block in blocks]
    optimizer = GradientSmoothing(torch.optim.SGD(smoothed.parameters(), lr=0.1), smoothed, blocks="encoder.block")
    assert find_blocks(smoothed)[1] is blocks and "layer.0.SelfAttention.q.weight" in optimizer.roles
    assert not any("relative_attention_bias" in role for role in optimizer.roles)
    for model, step in ((plain, torch.optim.SGD(plain.parameters(), lr=0.1)), (smoothed, optimizer)):
        model(**batch).loss.backward()
        step.step()
    bias = "layer.0.SelfAttention.relative_attention_bias.weight"
    assert torch.equal(blocks[0].get_parameter(bias), plain.encoder.block[0].get_parameter(bias))
    steps = [block.layer[0].SelfAttention.q.weight - w for block, w in zip(plain.encoder.block, start, strict=True)]
    torch.testing.assert_close(blocks[1].layer[0].SelfAttention.q.weight, start[1] + sum(steps) / 3)  # the mean step


def test_blocks_whose_shared_parameters_differ_in_shape_are_refused_naming_them():
    model = Stack()
    model.layers[2].extra = nn.Linear(3, 3)  # held by block 2 alone: no difference
    model.layers[3].bias = nn.Parameter(torch.zeros(4))
    with pytest.raises(ValueError, match=r"block 3 differs from block 0 at 'bias'"):
        GradientSmoothing(torch.optim.SGD(model.parameters(), lr=0.1), model, blocks=model.layers)


@pytest.fixture
def one_process_group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_blocks_fully_sharded_one_by_one_are_still_found(one_process_group):
    """FSDP2 renames a sharded block's class FSDP<class>; the last block, left to the root's shard, keeps its own."""
    llama, _ = tiny_causal_lm(num_layers=3)
    for layer in llama.model.layers[:-1]:
        fully_shard(layer)
    fully_shard(llama)
    assert type(llama.model.layers[0]).__name__ == "FSDPLlamaDecoderLayer"
    assert find_blocks(llama)[1] is llama.model.layers
    optimizer = GradientSmoothing(torch.optim.AdamW(llama.parameters()), llama)
    assert len(optimizer.roles["mlp.up_proj.weight"]) == 3


def test_blocks_sharded_differently_are_refused(monkeypatch):
    """The depth mix runs on local shards, so a role must be split alike in every block (else its rows misalign)."""
    model = Stack()
    first = set(map(id, model.layers[0].parameters()))
    split = Sharding(dim=0, group=None, sizes=(2, 1))
    monkeypatch.setattr(smoothing, "sharding", lambda p, name: split if id(p) in first else None)
    with pytest.raises(ValueError, match=r"'weight' is sharded as None in block 1 .* must be sharded alike"):
        GradientSmoothing(torch.optim.SGD(model.parameters(), lr=0.1), model, window=3)


def _random_gradients(model, generator):
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=generator).to(p.dtype)


@pytest.mark.parametrize("mode", ["update", "gradient"])
def test_one_mix_a_step_over_every_role_into_a_kept_buffer(monkeypatch, mode):
    """The depth mix is one ``depth_smooth`` over all roles' stacked blocks (weight and bias here), written into the
    same buffer every step: no call per role, no parameter-sized result allocated each step."""
    calls, mix = [], smoothing.depth_smooth

    def spy(stacked, weights, offset=None, out=None):
        calls.append((stacked, out))
        return mix(stacked, weights, offset, out)

    monkeypatch.setattr(smoothing, "depth_smooth", spy)
    model = Stack()
    optimizer = GradientSmoothing(torch.optim.SGD(model.parameters(), lr=0.1), model, window=3, mode=mode)
    generator = torch.Generator().manual_seed(0)
    for _ in range(2):
        _random_gradients(model, generator)
        optimizer.step()
    assert len(optimizer.roles) == 2 and len(calls) == 2
    assert calls[0][1] is not None and calls[1][1] is calls[0][1] and calls[1][0] is calls[0][0]
    assert calls[0][0].shape == (4, 3 * 3 + 3)  # a row per block: its weight and bias side by side


@pytest.mark.parametrize("mode", ["update", "gradient"])
def test_a_model_moved_after_the_optimizer_was_built_steps_as_if_built_after(mode):
    """accelerate's ``prepare`` moves a model its optimizer was built on: the kept buffers follow it (to float64
    here, as they would to a GPU)."""

    def smoothed(model):
        return GradientSmoothing(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), model, mode=mode)

    moved, built_after = Stack(), Stack()
    optimizer = smoothed(moved)
    moved.double()
    built_after.double()
    for model, step in ((moved, optimizer), (built_after, smoothed(built_after))):
        generator = torch.Generator().manual_seed(0)
        for _ in range(2):
            _random_gradients(model, generator)
            step.step()
    for name, p in moved.named_parameters():
        assert torch.equal(p, built_after.get_parameter(name)), name


@pytest.mark.parametrize("mode", ["update", "gradient"])
def test_a_step_allocates_nothing(mode):
    """A parameter-sized temporary costs a CPU its fresh pages, more than the arithmetic: the step reuses buffers."""
    model = Stack(width=16)
    optimizer = GradientSmoothing(torch.optim.SGD(model.parameters(), lr=0.1), model, window=3, mode=mode)
    _random_gradients(model, torch.Generator().manual_seed(0))
    optimizer.step()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        optimizer.step()
    allocations = [(event.name, event.cpu_memory_usage) for event in profiler.events() if event.cpu_memory_usage > 0]
    assert not allocations


@pytest.mark.parametrize("mode", ["update", "gradient"])
def test_the_step_reads_no_number_back_to_the_host_beyond_its_base(mode, host_reads):
    """No ``.item()``/``float()``/``bool()``/``.tolist()`` of its own: it adds no device synchronisation to the base's
    (torch's AdamW reads its step counter, once per parameter, unless ``capturable``)."""
    plain, smoothed = Stack(), Stack()
    base = torch.optim.AdamW(plain.parameters(), lr=1e-2)
    wrapper = GradientSmoothing(torch.optim.AdamW(smoothed.parameters(), lr=1e-2), smoothed, mode=mode)
    reads = {}
    for model, optimizer in ((plain, base), (smoothed, wrapper)):
        generator = torch.Generator().manual_seed(0)
        for _ in range(2):  # the first step sets up state; the second is the steady one
            _random_gradients(model, generator)
            with host_reads() as counted:
                optimizer.step()
        reads[optimizer] = counted.total()
    assert reads[wrapper] == reads[base] > 0


@pytest.mark.parametrize("mode", ["update", "gradient"])
def test_a_compiled_step_writes_the_depth_buffers_whole(mode):
    """Compiled, a copy into each block's view of a buffer became a rewrite of the whole buffer per parameter (a
    ``slice_scatter``: quadratic in depth, the compiled step 3x the eager one at 4 layers and 30x at 16); a ``cat``
    writes all of them at once."""
    ops = collections.Counter()

    def count_ops(graph, inputs):
        ops.update(str(node.target) for node in graph.graph.nodes if node.op == "call_function")
        return make_boxed_func(graph.forward)

    model = Stack(depth=5)
    optimizer = GradientSmoothing(torch.optim.SGD(model.parameters(), lr=0.1), model, window=3, mode=mode)
    _random_gradients(model, torch.Generator().manual_seed(0))
    torch._dynamo.reset()
    torch.compile(optimizer.step, backend=aot_autograd(fw_compiler=count_ops))()
    torch._dynamo.reset()
    assert ops["aten.mm.default"] == 1
    assert not [op for op in ops if "scatter" in op]


@pytest.mark.parametrize("mode", ["update", "gradient"])
def test_torch_compile_compiles_the_step_once_and_steps_as_eager(mode, compiled_and_eager):
    """``torch.compile(optimizer.step)`` traces at the first step and never again (the buffers are made at
    construction, not at a first step), and moves the parameters as the eager step does, to float32 rounding (torch's
    AdamW computes its bias corrections differently compiled)."""

    def build():
        model = Stack()
        optimizer = GradientSmoothing(torch.optim.AdamW(model.parameters(), lr=1e-2), model, window=3, mode=mode)
        generator = torch.Generator().manual_seed(1)

        def closure():
            _random_gradients(model, generator)

        return model, optimizer, closure

    eager, compiled = compiled_and_eager(build, steps=4)
    for a, b in zip(eager, compiled, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
